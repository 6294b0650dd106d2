"""Checkpoint density on a real trace: memory ~1/K, replay per hit, and the TTFT optimum.

Compares (``kda_core.studies.density.density_sweep``: the trace-driven simulator with the shared
radix cache, ``policy.make("interval", every=K)``, Kimi K3 per GPU at TP8) over the checkpoint
interval K and four state budgets per GPU:
  * peak checkpoint memory (unlimited: ~1/K, the analytic distinct-prefix / K beside it);
  * state hit rate (restorable prefix / input tokens);
  * mean replayed tokens per state hit, with the study's ONE analytic curve
    (``DensityAnalytic.replay_curve``: the trace's ideal match points floored to K, the same
    curve the app draws) and the study's on-chart note (``words.phrases.replay_note``, the same
    as the app's) on why the simulated replay stays flat on this trace (a follow-up turn usually
    matches exactly at a checkpoint); the suptitle (``words.phrases.headline``) says "replay ~K"
    only if the data shows it;
  * mean time to first token, the best interval of each budget marked.
Trace: the first 4,000 requests (~19 min) of the bundled Mooncake conversation trace; the whole
trace (12,031 requests) gives the same optima but takes ~45 s with the retention figure, over
the 60 s budget of ``python -m plots``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import density
from kda_core.workloads import bundled_trace
from plots import style
from words import phrases
from words.catalog import T as Lang
from words.checkpoint_density import MSG

NAME = "checkpoint_density"
TRACE_REQUESTS = 4000
QUICK_REQUESTS = 400
INTERVALS = (512, 1024, 2048, 4096, 8192, 16384)
BUDGETS_GIB = (8.0, 32.0, 128.0, None)


def trace(quick: bool = False):  # noqa: ANN201 - kda_core.workloads.Trace
    """The first TRACE_REQUESTS requests of the bundled Mooncake conversation trace."""
    return bundled_trace("conversation").head(QUICK_REQUESTS if quick else TRACE_REQUESTS)


def compute(quick: bool = False) -> density.DensitySweep:
    """Interval x budget sweep (24 simulations, ~8 s; ``quick``: 400 requests, 3 x 2 runs)."""
    if quick:
        return density.density_sweep(trace(True), (512, 2048, 8192), (8.0, None))
    return density.density_sweep(trace(), INTERVALS, BUDGETS_GIB)


def _n_requests(trace_name: str) -> int:
    """Request count from a head trace's name (``name[:N]``), else TRACE_REQUESTS."""
    tail = trace_name.rsplit("[:", 1)[-1].rstrip("]")
    return int(tail) if tail.isdigit() else TRACE_REQUESTS


def _curves(axes: tuple, data: density.DensitySweep, t: Lang) -> None:
    """Per budget: memory, state hit, replay and TTFT against K, the best K starred; the
    analytic memory and replay curves dashed."""
    am, ah, ar, at = axes
    k = data.intervals
    for j, label in enumerate(data.budget_labels):
        c = style.SERIES[j]
        kw = {"color": c, "marker": "o", "ms": 3.5, "lw": 1.7}
        name = t("fig_budget", b=t.word("budget", label))
        am.plot(k, data.peak_state_bytes[:, j], label=name, gid=f"mem{j}", **kw)
        ah.plot(k, data.state_hit_rate[:, j], gid=f"hit{j}", **kw)
        ar.plot(k, data.mean_replay_per_hit[:, j], gid=f"rep{j}", **kw)
        at.plot(k, data.ttft_mean_s[:, j], gid=f"ttft{j}", **kw)
        o = int(data.optimum[j])
        star = {"color": c, "ms": 15, "mec": "black", "mew": 0.7, "gid": f"opt{j}"}
        at.plot(k[o], data.ttft_mean_s[o, j], "*", label=t("fig_opt") if j == 0 else None, **star)
    dashed = {"color": style.COLORS["neutral"], "ls": "--", "lw": 1.3}
    am.plot(k, data.analytic.state_bytes, label=t("fig_an_mem"), gid="an_mem", **dashed)
    ar.plot(k, data.analytic.replay_curve, label=t("fig_an_rep"), gid="an_rep", **dashed)


def _replay_note(ar: Axes, notes: density.ReplayNotes, t: Lang) -> None:
    """The per-curve replay note in a box at the top left of the replay panel."""
    box = {"boxstyle": "round,pad=0.25", "fc": "white", "ec": "#ccc", "lw": 0.5, "alpha": 0.9}
    note = phrases.replay_note(notes, t, width=30 if t.zh else 52, detail=False)
    ar.text(
        0.02,
        0.97,
        note,
        transform=ar.transAxes,
        va="top",
        ha="left",
        fontsize=5.6,
        linespacing=1.15,
        color="#333",
        gid="replay_note",
        bbox=box,
    )


def make_figure(data: density.DensitySweep, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    an = data.analytic
    source = t(
        "fig_source",
        n=_n_requests(data.trace_name),
        model=data.model,
        block=data.block_size,
        ckpt=style.format_bytes(data.state_bytes_per_checkpoint),
    )
    fig = style.new_figure((style.COLUMN_WIDTH, 6.9), source)
    for footer in fig.texts:  # the source line wraps at the figure edge instead of running off
        footer.set_wrap(True)
    notes = density.replay_notes(data)
    fig.suptitle("\n".join(phrases.wrap(phrases.headline(notes, t), 38 if t.zh else 66)))
    gs = fig.add_gridspec(3, 2, height_ratios=(0.16, 1.0, 1.0))
    lg = fig.add_subplot(gs[0, :])
    am = fig.add_subplot(gs[1, 0])
    ah = fig.add_subplot(gs[1, 1], sharex=am)
    ar = fig.add_subplot(gs[2, 0], sharex=am)
    at = fig.add_subplot(gs[2, 1], sharex=am)
    k = data.intervals
    _curves((am, ah, ar, at), data, t)
    top = max(float(an.replay_curve.max()), float(data.mean_replay_per_hit.max()), 1.0)
    ar.set_ylim(0, top * 2.1)
    _replay_note(ar, notes, t)
    am.set_yscale("log")
    style.bytes_axis(am.yaxis, log=True, subs=(1.0, 4.0, 16.0, 64.0, 256.0))
    ah.yaxis.set_major_formatter(ticker.PercentFormatter(1.0, decimals=0))
    ah.set_ylim(bottom=0)
    for ax in (am, ah):
        ax.tick_params(axis="x", labelbottom=False)
    for ax, title, ylabel in (
        (am, t("fig_title_mem"), t("fig_mem")),
        (ah, t("fig_title_hit"), t("fig_hit")),
        (ar, t("fig_title_rep"), t("fig_rep")),
        (at, t("fig_title_ttft"), t("fig_ttft")),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(k)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
    ar.set_xlabel(t("fig_k"))
    at.set_xlabel(t("fig_k"))
    handles, names = [], []
    for ax in (am, ar, at):
        h, n = ax.get_legend_handles_labels()
        handles += h
        names += n
    lg.axis("off")
    lg.legend(handles, names, loc="center", ncols=3, fontsize=8, borderaxespad=0)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
