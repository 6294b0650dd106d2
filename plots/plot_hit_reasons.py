"""Why a request got no hit, SGLang vs vLLM, on the Mooncake conversation trace.

Draws ``kda_core.studies.hit_reasons.hit_reasons`` (Kimi K3 at TP8: vLLM's block raised to 768
tokens; SGLang extra_buffer defaults) with unlimited budgets and under a state budget per GPU:
per engine, the share of requests and the share of uncached input tokens per reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kda_core.studies.hit_reasons import ENGINES, REASONS, HitReasons, hit_reasons
from kda_core.workloads import bundled_trace
from plots import style
from words.trace_hits import MSG

NAME = "hit_reasons"
BUDGET_GIB = 8.0

_COLORS = dict(
    zip(
        REASONS,
        (style.COLORS["hit"], style.COLORS["free"], *style.SERIES, style.COLORS["checkpoint"]),
        strict=True,
    )
)


@dataclass(frozen=True)
class ReasonFigureData:
    """The study at each budget (None = unlimited), in drawing order."""

    budgets_gib: tuple[float | None, ...]
    runs: tuple[HitReasons, ...]


def compute(quick: bool = False) -> ReasonFigureData:
    """The whole trace (12,031 requests) or its first 300 for tests."""
    trace = bundled_trace("conversation").head(300 if quick else 12031)
    budgets = (None, BUDGET_GIB)
    runs = tuple(
        hit_reasons(trace, state_budget_bytes=None if b is None else b * (1 << 30)) for b in budgets
    )
    return ReasonFigureData(budgets, runs)


def bar_shares(data: ReasonFigureData) -> tuple[list[tuple[str, float | None]], np.ndarray]:
    """Bars top to bottom as (engine, budget) and their shares ``[2 metrics, bars, reasons]``."""
    bars, req, tok = [], [], []
    for budget, run in zip(data.budgets_gib, data.runs, strict=True):
        r, t = run.share_arrays()
        for row, engine in enumerate(ENGINES):
            bars.append((engine, budget))
            req.append(r[row])
            tok.append(t[row])
    return bars, np.array([req, tok])


def make_figure(data: ReasonFigureData, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    first = data.runs[0]
    src = t("fig_source", n=len(first.input_len), vb=first.vllm.unit)
    fig = style.new_figure("double", src)
    fig.suptitle(t("fig_suptitle"))
    grid = fig.add_gridspec(2, 2, height_ratios=(3, 1))
    left_ax = fig.add_subplot(grid[0, 0])
    axes = (left_ax, fig.add_subplot(grid[0, 1], sharey=left_ax))
    key_ax = fig.add_subplot(grid[1, :])  # the legend's own row, clear of the panels and footer
    key_ax.axis("off")
    bars, shares = bar_shares(data)
    engines = {"sglang": "SGLang", "vllm": "vLLM"}  # names, the same in both languages
    budgets = {b: t("fig_unlimited") if b is None else t("fig_budget", gib=b) for _, b in bars}
    labels = [t("fig_bar", engine=engines[e], budget=budgets[b]) for e, b in bars]
    y = np.arange(len(bars))[::-1]
    present = [k for k in range(len(REASONS)) if shares[:, :, k].any()]
    panels = zip(axes, shares, ("requests", "tokens"), strict=True)
    for ax, metric, key in panels:
        left = np.zeros(len(bars))
        for k in present:
            name = REASONS[k]
            color = _COLORS[name]
            ax.barh(y, metric[:, k], left=left, height=0.6, color=color, gid=f"{key}_{name}")
            left += metric[:, k]
        ax.set_title(t(f"fig_{key}"))
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")
        ax.grid(False, axis="y")
    axes[0].set_yticks(y, labels, fontsize=8)
    handles = [Patch(color=_COLORS[REASONS[k]], label=t(f"r_{REASONS[k]}")) for k in present]
    key_ax.legend(handles=handles, loc="center", ncol=2, fontsize=8, frameon=False)
    axes[1].tick_params(labelleft=False)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
