"""checkpoint_density's tables in the language of ``t``: the optimum per budget (with the
replay notes the figures carry) and the runs of the session."""

from __future__ import annotations

from kda_core.studies import density as ds
from words import phrases
from words.catalog import T

GIB = float(1 << 30)


def summary_markdown(s: ds.DensitySweep, n_requests: int, t: T) -> str:
    head = t(
        "s_head",
        trace=f"`{s.trace_name}`",
        n=n_requests,
        block=s.block_size,
        mib=s.state_bytes_per_checkpoint / (1 << 20),
        model=s.model,
        ideal=s.analytic.ideal_token_hit_rate,
    )
    lines = [head, "", t("s_th"), "|---|---:|---:|---:|---:|---:|"]
    for j, lab in enumerate(s.budget_labels):
        i = int(s.optimum[j])
        lines.append(
            f"| {t.word('budget', lab)} | **{int(s.intervals[i]):,}** | "
            f"{s.ttft_mean_s[i, j]:.3f} s | {s.state_hit_rate[i, j]:.1%} | "
            f"{s.token_hit_rate[i, j]:.1%} | {s.peak_state_bytes[i, j] / GIB:.2f} GiB |"
        )
    lines += ["", t("s_replay"), ""]
    note = phrases.replay_note(ds.replay_notes(s), t)
    return "\n".join(lines + [f"- {line}" for line in note.split("\n")])


def runs_markdown(history: list, t: T) -> str:
    """The session's runs: number, workload, intervals, the best K per budget."""
    rows = [
        f"| {n} | `{trace}` | {k} | "
        + "<br>".join(f"{t.word('budget', b)}: K={kk:,}" for b, kk in best)
        + " |"
        for n, trace, k, best in history
    ]
    return f"{t('runs_title')}\n\n{t('runs_th')}\n|---|---|---:|---|\n" + "\n".join(rows)
