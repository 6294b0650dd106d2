"""int8_checkpoint's tables in the language of ``t``: the park-and-restore summary, the exact
vs compressed continuations (decoded text made safe for a table cell) and the session's runs."""

from __future__ import annotations

import html
import math

from kda_core.studies import int8 as st
from kda_core.studies import quality
from words.catalog import T

# markdown characters as entities, so backslash escapes and pipes print as they are
_ENTITIES = (("\\", "&#92;"), ("|", "&#124;"), ("*", "&#42;"), ("_", "&#95;"), ("`", "&#96;"))


def bound_ratio(r: float) -> str:
    """max error / bound to 4 decimals, rounded away from 1: a ratio under the bound never
    reads as 1 (nor one above it); the table and the error map's title both say it so."""
    v = math.floor(r * 1e4) if r < 1 else math.ceil(r * 1e4)
    return f"{v / 1e4:.4f}"


def table_cell(text: str) -> str:
    """Decoded text safe inside a markdown table cell (HTML-escaped, markdown characters as
    entities, so backslash escapes and pipes print as they are)."""
    out = html.escape(text, quote=False)
    for ch, ent in _ENTITIES:
        out = out.replace(ch, ent)
    return out


def summary_markdown(s: st.Int8Study, chosen: str, t: T) -> str:
    tb = s.table
    i = tb.labels.index(chosen)
    k3 = s.memory_k3
    j = k3.labels.index(chosen)
    d = s.divergence
    text = s.parked_text.replace("\n", "⏎").replace("|", "&#124;")
    bound = "r_bound_ok" if tb.bound_holds[i] else "r_bound_bad"
    rows = [
        (t("r_parked"), t("r_tokens", n=s.n_tokens), text[-60:]),
        (t("r_format"), t.word("var", chosen), t("r_scales")),
        (t("r_rel"), f"{tb.rel_fro[i]:.3g}", t("r_ceiling", c=tb.bound_rel_fro[i])),
        (t("r_max_abs"), f"{tb.max_abs[i]:.3g}", t(bound, r=bound_ratio(tb.max_bound_ratio[i]))),
        (
            t("r_once"),
            f"{d.park_once_state_dist[-1]:.3g}",
            t("r_dlogit", d=d.park_once_logit_diff.max()),
        ),
        (
            t("r_every"),
            f"{d.every_step_state_dist[-1]:.3g}",
            t("r_dlogit", d=d.every_step_logit_diff.max()),
        ),
        (
            t("r_ckpt", model=k3.model),
            f"{k3.total_bytes[j] / (1 << 20):.1f} MiB",
            t("r_native", m=k3.total_bytes[0] / (1 << 20)),
        ),
        (t("r_gain"), f"**×{k3.gain[j]:.2f}**", t("r_vs", a=k3.capacity[j], b=k3.capacity[0])),
    ]
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return t("th") + "\n|---|---|\n" + body


def continuation_markdown(c: quality.Continuation, t: T) -> str:
    """Exact vs compressed greedy continuations side by side; the first difference marked."""
    k = c.first_divergence

    def row(pieces: tuple[str, ...]) -> str:
        if k is None:
            return table_cell("".join(pieces))
        first = table_cell(pieces[k] or "…")
        return (
            table_cell("".join(pieces[:k]))
            + f"<mark><b>{first}</b></mark>"
            + table_cell("".join(pieces[k + 1 :]))
        )

    n = len(c.exact)
    verdict = t("c_same", n=n) if k is None else t("c_diff", k=k + 1, n=n)
    return (
        t("c_title", verdict=verdict, tail=table_cell(c.prompt_tail))
        + f"\n\n{t('c_th')}\n|---|---|\n"
        + f"| {t('c_exact')} | {row(c.exact_pieces)} |\n"
        + f"| {t.word('var', c.label)} | {row(c.compressed_pieces)} |"
    )


def history_markdown(hist: list, t: T) -> str:
    rows = [[n, k, t.word("var", v), *rest] for n, k, v, *rest in hist]
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in rows)
    return f"{t('runs_title')}\n\n{t('runs_th')}\n|---|---|---|---|---|---|\n{body}"
