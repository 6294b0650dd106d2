"""Recurrence vs chunked KDA: the chunkwise form agrees to float64 rounding, and what it buys.

Compares (``kda_core.studies.chunk_scan.chunk_scan_study``):
  * agreement: relative Frobenius error of ``kda.chunked`` outputs against the token recurrence
    ``kda.recurrent``, for several sequence lengths T and chunk sizes C (seeded inputs);
  * speed, as a deterministic cost model for one Kimi K3 KDA layer (96 heads of 128 x 128):
    sequential steps (T for the recurrence, ceil(T / C) chunked) and matmul FLOPs
    (the chunked form does more arithmetic in far fewer, matmul-shaped steps).
Left out: wall-clock timings (``chunk_scan.timing``): they change run to run, and these files
must be byte-identical.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import chunk_scan
from plots import style
from words import phrases
from words.catalog import T as Lang
from words.chunk_scan import MSG

NAME = "chunk_agreement"
# Two metrics (categories, not concepts): the first two SERIES colours, in legend order.
STEPS_COLOR, FLOPS_COLOR = style.SERIES[0], style.SERIES[1]


def compute(quick: bool = False) -> chunk_scan.ChunkScanStudy:
    """The chunk_scan app's default study (seed 0, C = 64, no wall-clock timing); ~0.3 s."""
    return chunk_scan.chunk_scan_study(seed=0, chunk_size=64, measure_time=False)


def _agreement(ax: Axes, ag: chunk_scan.Agreement, t: Lang) -> None:
    """Relative error of the chunked outputs per T over the chunk size, at float64 rounding."""
    eps = np.finfo(np.float64).eps
    for i, T in enumerate(ag.T_values.tolist()):
        ax.plot(ag.chunk_sizes, ag.o_rel[i], marker="o", label=t("fig_T", T=T), gid=f"T{T}")
    ax.axhline(eps, color=style.COLORS["neutral"], ls=":", lw=1.2)
    ax.annotate(
        t("fig_eps"),
        (ag.chunk_sizes[0], eps),
        xytext=(2, -11),
        textcoords="offset points",
        fontsize=8.5,
        color=style.COLORS["neutral"],
    )
    _chunk_axis(ax, ag.chunk_sizes)
    ax.set_yscale("log")
    ax.set_ylim(1e-17, 1e-14)
    ax.set_xlabel(t("x_chunk"))
    ax.set_ylabel(t("fig_y_rel"))
    ax.set_title(t("fig_title_agree"))
    ax.legend(loc="upper left", ncols=2)


def _chunk_axis(ax: Axes, chunk_sizes: np.ndarray) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(chunk_sizes)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_locator(ticker.NullLocator())


def _cost(bx: Axes, cost: chunk_scan.Cost, t: Lang) -> None:
    """At the longest T: sequential steps saved and FLOPs added, each point labelled."""
    row = -1  # the longest sequence of the cost grid
    curves = (
        (cost.steps_ratio[row], "o", STEPS_COLOR, "fig_steps", "steps", "{:.0f}×", 6),
        (cost.flops_ratio[row], "s", FLOPS_COLOR, "fig_flops", "flops", "{:.2f}×", -13),
    )
    for y, marker, color, key, gid, fmt, dy in curves:
        bx.plot(cost.chunk_sizes, y, marker=marker, color=color, label=t(key), gid=gid)
        for xi, yi in zip(cost.chunk_sizes.tolist(), y.tolist()):
            bx.annotate(
                fmt.format(yi),
                (xi, yi),
                xytext=(0, dy),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=color,
            )
    _chunk_axis(bx, cost.chunk_sizes)
    bx.set_yscale("log", base=2)
    bx.set_ylim(0.5, 4096)  # headroom: the legend sits above the largest label (128×)
    bx.margins(x=0.12)
    bx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}×"))
    bx.set_xlabel(t("x_chunk"))
    bx.set_ylabel(t("fig_y_ratio"))
    bx.set_title(t("fig_title_cost", T=int(cost.T_values[row])))
    bx.legend(loc="upper left")


def make_figure(data: chunk_scan.ChunkScanStudy, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    ag, cost = data.agreement, data.cost
    source = phrases.input_source(ag.source, t)
    fig = style.new_figure(
        "double", t("fig_agree_source", source=source, H=cost.H, K=cost.K, V=cost.V)
    )
    ax, bx = fig.subplots(1, 2)
    _agreement(ax, ag, t)
    _cost(bx, cost, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
