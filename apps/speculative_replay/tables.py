"""speculative_replay's markdown: the verify summary, the session's verify steps and the
generation line (words: ``words.speculative_replay``)."""

from __future__ import annotations

from apps.ui.catalog import T
from kda_core.studies import speculative as sp


def code(text: str, n: int = 48) -> str:
    """Readable bytes as inline markdown code (no markdown escapes needed), cut at ``n``."""
    t = text if len(text) <= n else text[: n - 1] + "…"
    return "`" + t.replace("`", "'").replace("|", "¦") + "`"


def yes_no(flag: bool, t: T) -> str:
    return t("yes") if flag else t("no")


def summary_markdown(v: sp.VerifyStudy, mem: sp.MemoryOverD, t: T) -> str:
    toks = " ".join(
        f"**{int(x)}**" if i < v.n_accept else f"~~{int(x)}~~" for i, x in enumerate(v.inputs)
    )
    toks += "<br>" + code(sp.readable(v.inputs)) + " " + t("r_tokens_note")
    gib = 1 << 30
    rows = [
        (t("r_prompt"), t("r_prompt_v", n=v.prompt_tokens), t("r_prompt_n")),
        (t("r_verified"), f"{v.draft_tokens}", toks.replace("|", "&#124;")),
        (t("r_committed"), f"{v.n_accept}", t("r_greedy", g=v.natural_accept)),
        (t("r_commit_err"), f"{v.commit_error.max():.1e}", t("r_all_counts")),
        (t("r_fold"), f"{v.fold_bf16_error.max():.1e}", t("r_fold_n")),
        (t("r_ring"), f"{v.ring_bytes:,}", f"L={v.ring_len}"),
        (t("r_per_draft"), f"{v.per_draft_state_bytes:,}", f"×{v.memory_ratio:.1f}"),
        (
            t("r_k3_rings"),
            f"{mem.deploy_ring_bytes / gib:.2f} GiB",
            t("r_k3_rings_n", slots=mem.deploy_slots, d=mem.deploy_draft_tokens),
        ),
        (
            t("r_k3_states"),
            f"{mem.deploy_per_draft_bytes / gib:.2f} GiB",
            t("r_k3_states_n", n=mem.deploy_max_running),
        ),
    ]
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return t("th") + "\n|---|---|\n" + body


def history_markdown(hist: list, t: T) -> str:
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return f"{t('hist_title')}\n\n{t('hist_th')}\n|---|---|---|---|---|\n{body}"


def generation_markdown(g: sp.GenerationStudy, t: T) -> str:
    ids = ", ".join(str(int(x)) for x in g.tokens[:12]) + (", …" if g.tokens.size > 12 else "")
    md = t(
        "gen_md",
        n=g.tokens.size,
        text=code(g.readable, 40),
        ids=ids,
        acc=g.acceptance_rate,
        per=g.tokens_per_step,
        eq=yes_no(g.equals_greedy, t),
    )
    return f"{md}\n\n<small>{t('note')}</small>"
