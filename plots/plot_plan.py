"""Plan from a trace: SGLang's flags swept on the Mooncake conversation trace, Kimi K3 at TP8.

Draws ``kda_core.studies.plan_trace.trace_plan`` (``kda_core.plan.sweep`` over
``--mamba-full-memory-ratio`` x ``--chunked-prefill-size`` on 28.8 GiB per GPU, every point
sized as SGLang 0.5.23 sizes it and the trace replayed under its pools): left, cached tokens
against the concurrency cap, the Pareto front joined and the recommended point (the most cached
tokens with at least 16 running) ringed; right, TTFT p99 from the cost model against the ratio.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies.plan_trace import TracePlan, trace_plan
from plots import style
from words.memory_planner_trace import MSG

NAME = "plan"

MIN_RUNNING = 16
GPU_GIB = 28.8


def compute(quick: bool = False) -> TracePlan:
    """The first 3,000 requests of the trace, or 400 for tests."""
    return trace_plan(n_requests=400 if quick else 3000, gpu_gib=GPU_GIB, min_running=MIN_RUNNING)


def make_figure(data: TracePlan, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    s = data.sweep
    ok = data.max_running >= 0
    src = t("fig_source", n=s.n_requests, gib=GPU_GIB, ok=int(ok.sum()), pts=len(ok))
    fig = style.new_figure("double", src)
    fig.suptitle(t("fig_suptitle"))
    ax, bx = fig.subplots(1, 2)
    for k, c in enumerate(sorted(set(data.chunk.tolist()))):
        sel = ok & (data.chunk == c)
        color = style.SERIES[k % len(style.SERIES)]
        label = t("trace_l_chunk", c=c)
        ax.plot(
            data.max_running[sel],
            data.cached_tokens[sel],
            "o",
            color=color,
            ms=5,
            label=label,
            gid=f"points-{c}",
        )
        bx.plot(
            data.ratio[sel],
            data.ttft_p99_s[sel],
            "-o",
            color=color,
            ms=3.5,
            label=label,
            gid=f"ttft-{c}",
        )
    order = np.flatnonzero(data.on_front)
    order = order[np.argsort(data.max_running[order], kind="stable")]
    ax.plot(
        data.max_running[order],
        data.cached_tokens[order],
        "-",
        color=style.COLORS["hit"],
        lw=1.4,
        label=t("trace_l_front"),
        gid="pareto",
    )
    if data.best >= 0:
        b = data.best
        ax.plot(
            [data.max_running[b]],
            [data.cached_tokens[b]],
            "o",
            mfc="none",
            ms=13,
            mew=2,
            color=style.COLORS["state"],
            label=t("fig_best", m=MIN_RUNNING),
            gid="best",
        )
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v / 1e6:g}M"))
    ax.set_title(t("fig_front"))
    ax.set_xlabel(t("trace_x"))
    ax.set_ylabel(t("trace_y"))
    ax.legend(loc="best", fontsize=7)
    bx.set_title(t("fig_ttft"))
    bx.set_xlabel(t("fig_x_ratio"))
    bx.set_ylabel(t("fig_y_ttft"))
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.legend(loc="best", fontsize=7)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
