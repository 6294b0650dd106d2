"""unified_memory's pool comparison table in the language of ``t``: the unified pool, the
best static ratio and the ratios tuned for each phase."""

from __future__ import annotations

from kda_core.studies import memory as mem
from words.catalog import T


def summary_markdown(c: mem.Comparison, t: T) -> str:
    rows = [(t("pool_unified", mode=t(f"mode_{c.unified.kind}")), c.unified)]
    rows.append((t("pool_best", r=c.best_ratio), c.best_static))
    rows += [
        (t("pool_for", phase=t.word("phase", n), r=r), s)
        for n, r, s in zip(c.phase_names, c.phase_ratios, c.phase_static)
    ]
    out = [t("th"), "|---|---:|---:|---:|---:|---:|---:|"]
    for label, r in rows:
        out.append(
            f"| {label} | {r.mean_concurrency:.1f} | {r.peak_concurrency} | "
            f"{r.mean_queue_delay:.1f} | {r.makespan} | {r.blocked_steps} | "
            f"{r.total_moves:,} |"
        )
    return "\n".join(out)
