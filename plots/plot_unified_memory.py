"""Unified two-ended memory pool vs static partitions, over a workload whose mix shifts.

Compares (``kda_core.studies.memory.compare`` on ``memory.shifting_mix()``: a chat phase of short
prompts, then a long-context phase; Kimi K3 per GPU at TP8, bf16, 28 GiB):
  * the unified pool over time: KDA state slots grow from the bottom of one byte buffer, MLA KV
    pages from the top; x marks the steps where the two ends met (the head of the queue waited);
  * running requests over time: unified vs the best static ratio in hindsight and the ratios
    tuned for each phase alone;
  * mean concurrency vs the static ratio, against the unified pool.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import memory
from plots import style
from words.catalog import T as Lang
from words.unified_memory import MSG

NAME = "unified_memory"


def compute(quick: bool = False) -> memory.Comparison:
    """The unified_memory app's default comparison (~6 s); ``quick``: 10x fewer requests."""
    mix = memory.shifting_mix(n_chat=300, n_long=15) if quick else memory.shifting_mix()
    return memory.compare(mix, memory.ReplayConfig(), mode="eager")


def make_figure(data: memory.Comparison, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    u = data.unified
    fig = style.new_figure("tall", t("fig_source", size=style.format_bytes(u.total_bytes)))
    fig.suptitle(t("fig_suptitle"))
    # a legend row under the buffer panel (inside the panel the legend covered the KV area)
    gs = fig.add_gridspec(3, 2, height_ratios=(1.0, 0.07, 1.05))
    ax = fig.add_subplot(gs[0, :])
    _draw_buffer(ax, u, t)
    lg = fig.add_subplot(gs[1, :])
    lg.axis("off")
    handles, names = ax.get_legend_handles_labels()
    legend = {"fontsize": 8, "frameon": False, "markerscale": 3, "borderaxespad": 0}
    lg.legend(handles, names, loc="center", ncols=3, **legend)
    _draw_running(fig.add_subplot(gs[2, 0]), data, t)
    _draw_ratio_sweep(fig.add_subplot(gs[2, 1]), data, t)
    return fig


def _draw_buffer(ax: Axes, u: memory.ReplayResult, t: Lang) -> None:
    """The one byte buffer over time: state slots from the bottom, MLA KV from the top."""
    tl = u.timeline
    steps = range(tl.state_frontier.shape[0])
    area = {"step": "post", "alpha": 0.85, "lw": 0}
    state, kv = style.COLORS["state"], style.COLORS["kv"]
    ax.fill_between(
        steps, 0, tl.state_frontier, color=state, label=t("fig_state"), gid="state", **area
    )
    ax.fill_between(
        steps, tl.kv_frontier, u.total_bytes, color=kv, label=t("fig_kv"), gid="kv", **area
    )
    blocked = tl.blocked.astype(bool)
    if blocked.any():
        met = {"color": "black", "ms": 2.2, "label": t("fig_met"), "gid": "met"}
        ax.plot(tl.blocked.nonzero()[0], tl.state_frontier[blocked], ".", **met)
    ax.set_xlim(0, tl.state_frontier.shape[0])
    ax.set_ylim(0, u.total_bytes)
    style.bytes_axis(ax.yaxis)
    ax.set_xlabel(t("x_step"))
    ax.set_ylabel(t("fig_offset"))
    ax.set_title(t("fig_title_tl", mode=t.word("mode", u.kind)))
    ax.grid(False)


def _draw_running(br: Axes, data: memory.Comparison, t: Lang) -> None:
    """Running requests per step: the unified pool against the static partitions."""
    u = data.unified
    # categorical colours (palette.SERIES in a fixed order; unified black), as in the app
    pools = [(t("fig_unified"), u, "black", 2.2)]
    pools.append((t("fig_best", r=data.best_ratio), data.best_static, style.SERIES[2], 1.4))
    for i, (ph, r, res) in enumerate(zip(data.phase_names, data.phase_ratios, data.phase_static)):
        name = t("fig_tuned", phase=t.word("phase", ph), r=r)
        pools.append((name, res, style.SERIES[3 + i], 1.4))
    for name, res, color, lw in pools:
        label = t("fig_makespan", name=name, n=res.makespan)
        gid = f"running_{res.kind}_{res.ratio}"
        br.plot(res.timeline.running, color=color, lw=lw, gid=gid, label=label)
    br.set_xlabel(t("x_step"))
    br.set_ylabel(t("y_requests"))
    br.set_title(t("fig_title_run"))
    br.legend(loc="upper right", fontsize=7.5)
    br.set_ylim(0, 1.4 * u.peak_concurrency)  # room for the legend above the curves
    x_end = 2 * u.makespan  # the slowest static pool runs on past the edge: mark where it ends
    br.set_xlim(0, x_end)
    for n_cut, (_name, res, color, _lw) in enumerate(p for p in pools if p[1].makespan > x_end):
        y_cut = float(res.timeline.running[x_end - 1])
        br.plot([x_end], [y_cut], ">", color=color, ms=7, clip_on=False, gid=f"cut{n_cut}")
        more = t("fig_more", n=res.makespan)
        br.annotate(
            more,
            (x_end, y_cut),
            xytext=(-4, 6 + 11 * n_cut),
            textcoords="offset points",
            ha="right",
            fontsize=7.5,
            color=color,
        )


def _draw_ratio_sweep(cr: Axes, data: memory.Comparison, t: Lang) -> None:
    """Mean concurrency of static partitions over the KV:state ratio, unified as a line; the
    ratios tuned for each phase named in the legend (a label on the line overlapped the
    best-static label and the curve)."""
    u, best = data.unified, data.best_static.mean_concurrency
    top = u.mean_concurrency * 1.45  # the legend sits above the unified line
    static = {"marker": "o", "color": style.SERIES[2], "lw": 1.6, "ms": 4, "gid": "static"}
    cr.plot(data.ratios, data.static_mean_concurrency, label=t("l_static"), **static)
    unified = t("fig_unified")
    cr.axhline(u.mean_concurrency, color="black", lw=2.2, label=unified, gid="unified_mean")
    cr.annotate(
        f"{unified} {u.mean_concurrency:.1f}",
        (data.ratios[-1], u.mean_concurrency),
        xytext=(0, 4),
        textcoords="offset points",
        color="black",
        ha="right",
        fontsize=8.5,
    )
    phases = []
    for i, (ph, r) in enumerate(zip(data.phase_names, data.phase_ratios)):
        # up to the best static point only: above it sit the labels and the legend
        label = t("fig_tuned", phase=t.word("phase", ph), r=r)
        line = {"color": style.SERIES[3 + i], "ls": ":", "lw": 1.3, "gid": f"phase_{i}"}
        phases.append(cr.axvline(r, ymax=best / top, label=label, **line))
    cr.plot([data.best_ratio], [best], "D", color="black", ms=6)
    cr.annotate(
        t("fig_best_pt", c=best),
        (data.best_ratio, best),
        xytext=(0, 8),
        textcoords="offset points",
        ha="center",
        fontsize=8.5,
    )
    cr.set_xscale("log")
    cr.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    cr.set_ylim(0, top)
    cr.legend(handles=phases, loc="upper left", fontsize=7.5, framealpha=0.9)
    cr.set_xlabel(t("fig_ratio"))
    cr.set_ylabel(t("y_mean_running"))
    cr.set_title(t("fig_title_ratio"))


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
