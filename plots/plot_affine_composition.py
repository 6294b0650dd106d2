"""Affine composition of KDA segments: any grouping gives the same map, another order does not.

Tokens split into segments A, B, C; each segment is summarised by its affine map
S -> M S + b (``kda.segment_map``). Compares (``kda_core.studies.chunk_scan.composition``):
  * groupings ((A->B)->C, A->(B->C), a pairwise tree as in a parallel scan, the closed form of the
    whole span, token by token): distance of map(S0) to the recurrent final state (~1e-16);
  * orders (every permutation of the segments): relative distance of map(S0) to the true final
    state (order 1: the maps do not commute);
  * the offset b (what the segments wrote, [K, V]) of one head for the true order and with the
    last two segments swapped: the same writes in another order leave another state.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure, SubFigure

from kda_core.studies import chunk_scan
from plots import style
from words import phrases
from words.catalog import T as Lang
from words.chunk_scan import MSG

NAME = "affine_composition"
COLUMN = style.COLUMN_WIDTH
# Categories (not concepts): maps equal to the recurrence vs maps that differ, first two SERIES.
SAME_COLOR, OTHER_COLOR = style.SERIES[0], style.SERIES[1]
HEADS = 2


def compute(quick: bool = False) -> chunk_scan.Composition:
    """Three segments of 16 tokens, H = 2, K = V = 16, seed 0 (the chunk_scan app's default)."""
    return chunk_scan.composition(lengths=(16, 16, 16), H=HEADS, K=16, V=16, seed=0, head=0)


def _arrows(label: str) -> str:
    return label.replace("->", "→")


def _bars(
    ax: Axes,
    labels: list[str],
    values: np.ndarray,
    colors: str | list[str],
    xlabel: str,
    t: Lang,
    gid: str,
) -> None:
    y = np.arange(len(labels))
    ax.barh(y, values, color=colors, height=0.62, gid=gid)
    ax.set_yticks(y, labels)
    # inverted y with an empty strip below the last bar for the ε label
    ax.set_ylim(len(labels) - 0.5 + 0.55, -0.5)
    ax.set_xscale("log")
    ax.set_xlim(1e-17, 1e4)
    ax.grid(False, axis="y")
    for yi, v in zip(y.tolist(), np.asarray(values).tolist()):
        text = f"{v:.1e}" if v else "0"
        ax.annotate(
            text,
            (max(v, 1e-17), yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    eps = np.finfo(np.float64).eps
    grey = style.COLORS["neutral"]
    ax.axvline(eps, color=grey, ls=":", lw=1.1)
    ax.annotate(
        t("fig_eps_short"),
        (eps, 0),
        xycoords=("data", "axes fraction"),
        xytext=(3, 3),
        textcoords="offset points",
        fontsize=7.5,
        color=grey,
    )
    ax.set_xticks([1e-16, 1e-8, 1.0])
    ax.set_xlabel(xlabel)


def _compositions(top: SubFigure, data: chunk_scan.Composition, t: Lang) -> None:
    """Groupings (the same map as the recurrence) and orders (another map) side by side."""
    ag, ao = top.subplots(1, 2)
    g_labels = [_arrows(t.word("g", x)) for x in data.grouping_labels]
    _bars(ag, g_labels, data.grouping_S_diff, SAME_COLOR, t("fig_x_g"), t, "grouping")
    ag.set_title(t("fig_title_g"), loc="right")
    o_colors = [SAME_COLOR] + [OTHER_COLOR] * (len(data.order_labels) - 1)
    o_labels = [_arrows(x) for x in data.order_labels]
    o_labels[0] = f"{o_labels[0]} ({t('fig_true')})"
    _bars(ao, o_labels, data.order_S_rel, o_colors, t("fig_x_o"), t, "order")
    ao.set_title(t("fig_title_o"), loc="right")


def _offsets(bottom: SubFigure, data: chunk_scan.Composition, t: Lang) -> None:
    """The offset b of one head in the true order and with the last two segments swapped."""
    lim = float(max(np.abs(data.b_true).max(), np.abs(data.b_swapped).max()))  # colour scale
    axes = list(bottom.subplots(1, 2))
    for ax, b, order in zip(axes, (data.b_true, data.b_swapped), data.order_labels[:2]):
        norm = CenteredNorm(halfrange=lim)
        im = ax.imshow(b, cmap="RdBu_r", norm=norm, interpolation="nearest", gid=f"b_{order}")
        ax.set_title(t("fig_title_b", order=_arrows(order)), loc="center")
        ax.grid(False)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(t("fig_value", h=data.head))
        ax.set_ylabel(t("fig_key"))
    cb = bottom.colorbar(im, ax=axes, shrink=0.9, pad=0.02)
    cb.set_label(t("fig_cbar"))


def make_figure(data: chunk_scan.Composition, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    seg = ", ".join(f"{a} = {n}" for a, n in zip(data.labels, data.lengths.tolist()))
    K, V = data.b_true.shape  # [K, V] of one head
    source = phrases.input_source(data.source, t)
    fig = style.new_figure(
        (COLUMN, 7.0), t("fig_aff_source", source=source, segments=seg, H=HEADS, K=K, V=V)
    )
    fig.suptitle(t("fig_aff_suptitle"))
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.0, 1.0))
    _compositions(top, data, t)
    _offsets(bottom, data, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
