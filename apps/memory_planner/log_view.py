"""memory_planner's log panel drawn in the language of ``t``: the verdict with its reasoning,
requested vs effective, held vs reserved, what the paste cannot pin, the fixes with their effect
and cost, the inferred flags, and one row per line the reader knows (``sizing.LogReport``). The
engines' own lines are shown as they are printed (code spans), the reader's sentences in the
page's language (``words.memory_planner_reasons``)."""

from __future__ import annotations

import gradio as gr

from apps.ui import guard
from kda_core.sizing import LogReport
from kda_core.sizing.logread import Reason, join_reasons
from words.catalog import T


def reason_text(r: Reason, t: T) -> str:
    """One of the reader's sentences in the page's language (``t``'s catalog has
    ``words.memory_planner_reasons`` as a base)."""
    return t(f"r_{r.key}", **r.params)


def _cell(text: str, limit: int = 200) -> str:
    """A log line or the reader's words inside a table cell: a code span, pipes escaped, cut
    to ``limit`` characters (a vLLM args line runs to a thousand)."""
    return "`" + text.replace("`", "'").replace("|", "\\|")[:limit] + "`"


_SHOWN_FLAGS = (
    "tp",
    "ssm_dtype",
    "kv_dtype",
    "page_size",
    "ratio",
    "ratio_range",
    "max_mamba_cache_size",
    "slots_per_request",
    "strategy",
    "kv_tokens",
    "ring_len",
    "max_num_seqs",
    "max_model_len",
    "num_blocks",
    "block_size",
    "prefix_caching",
)
"""The inferred flags a reader is shown (the rest are the reader's bookkeeping)."""


def _value(v: object, t: T) -> str:
    if isinstance(v, bool):
        return t("on") if v else t("off")
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple) and len(v) == 2:
        return f"{_value(v[0], t)} .. {_value(v[1], t)}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def flags_text(r: LogReport, t: T) -> str:
    """The inferred flags, one code span each (``key=value``; a range ``a .. b``)."""
    shown = [(k, r.inferred[k]) for k in _SHOWN_FLAGS if r.inferred.get(k) is not None]
    return " ".join(_cell(f"{k}={_value(v, t)}") for k, v in shown)


def _fixes(r: LogReport, t: T) -> str:
    rows = []
    for f in r.fixes:
        reach = "" if f.reaches is None else t("yes") if f.reaches else t("no")
        costs = "; ".join(reason_text(c, t) for c in f.costs)
        rows.append(f"| {_cell(f.flag)} | {reason_text(f.effect, t)} | {reach} | {costs} |")
    return f"{t('fix_th2')}\n|---|---|---|---|\n" + "\n".join(rows)


def report_markdown(r: LogReport | str | None, t: T) -> str:
    """The verdict and its reasoning, requested vs effective, held vs reserved, what the paste
    cannot pin, the fixes with their effect and cost, and the inferred flags; a refused log
    (a message) says so instead of keeping an earlier verdict."""
    if r is None:
        return t("log_none")
    if isinstance(r, str):
        return t("log_refused", message=r)
    c = t.catalog
    counts = tuple(c("rep_count", n=n, status=c(f"st_{s}")) for s, n in r.counts().items() if n)
    out = [t("rep_title", engine=r.engine or "?", model=r.model, counts=counts)]
    out.append(t(f"vd_{r.verdict}"))
    out.append(f"{t('why')} {join_reasons(r.reasons, lambda x: reason_text(x, t))}")
    for key, part in (("running_th", r.bounds), ("held_th", r.held), ("missing_th", r.missing)):
        if part:
            out.append(t(key) + "\n" + "\n".join(f"- {reason_text(x, t)}" for x in part))
    if r.fixes:
        out.append(_fixes(r, t))
    if r.inferred:
        out.append(f"{t('inferred')} {flags_text(r, t)}")
    return "\n\n".join(out)


def lines_markdown(r: LogReport | str | None, t: T) -> str:
    """One row per line the reader knows: its status and, where compared, the logged and
    rebuilt numbers; the lines it does not know are counted in one sentence, not listed."""
    if r is None or isinstance(r, str):
        return ""
    rows = []
    for v in r.lines:
        nums = "; ".join(f"{f}: {a:g} → {b:g}" for f, a, b in (v.diffs or v.checks))
        nums = nums or ", ".join(v.inputs)
        status = t(f"st_{v.status}")
        rows.append(
            f"| {v.line_no} | {status} | {_cell(v.text, 160)} | {_cell(nums) if nums else ''} |"
        )
    table = f"{t('lines_th')}\n|---|---|---|---|\n" + "\n".join(rows) if rows else ""
    skipped = t("lines_skipped", n=r.skipped) if r.skipped else ""
    return "\n\n".join(x for x in (table, skipped) if x)


def draw_log(report: LogReport | str | None, t: T) -> tuple:
    """The verdict with its fixes, then the line-by-line comparison."""
    return report_markdown(report, t), lines_markdown(report, t)


def draw_log_check(view: Exception | None, t: T) -> tuple:
    """Before reading: a refused log replaces the earlier verdict (nothing changes else)."""
    if view is None:
        return gr.skip(), gr.skip()
    return draw_log(guard.message_of(view, t.code), t)
