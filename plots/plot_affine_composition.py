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
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure

from kda_core.studies import chunk_scan
from plots import style

NAME = "affine_composition"
COLUMN = style.COLUMN_WIDTH
# Categories (not concepts): maps equal to the recurrence vs maps that differ, first two SERIES.
SAME_COLOR, OTHER_COLOR = style.SERIES[0], style.SERIES[1]
HEADS = 2

TEXT = {
    "en": {
        "suptitle": "Segment maps compose in any grouping, but not in any order",
        "title_g": "Grouping (associative)",
        "title_o": "Order (not commutative)",
        "x_g": "max |map(S₀) − recurrent Sₜ|",
        "x_o": "rel. distance to the true Sₜ",
        "true": "true order",
        "title_m": "b of {order}",
        "key": "key channel",
        "value": "value channel (head {h})",
        "eps": "float64 ε",
        "cbar": "entry of b",
        "source": "Data: KDA on {source} inputs, segments {segments} tokens, "
        "{H} heads, K = {K}, V = {V}; float64",
        "random": "random (seed {seed})",
        "groupings": {
            "pairwise tree (parallel scan)": "pairwise tree (parallel scan)",
            "closed form of the whole span": "closed form of the whole span",
            "token by token": "token by token",
        },
    },
    "zh": {
        "suptitle": "分段映射可任意结合，但不可任意交换顺序",
        "title_g": "结合方式（满足结合律）",
        "title_o": "顺序（不满足交换律）",
        "x_g": "max |map(S₀) − 递归 Sₜ|",
        "x_o": "与真实 Sₜ 的相对距离",
        "true": "真实顺序",
        "title_m": "{order} 的 b",
        "key": "键通道",
        "value": "值通道（头 {h}）",
        "eps": "float64 ε",
        "cbar": "b 的元素值",
        "source": "数据：KDA 在{source}输入上，分段 {segments} 个 token，"
        "{H} 个头，K = {K}，V = {V}；float64",
        "random": "随机（种子 {seed}）",
        "groupings": {
            "pairwise tree (parallel scan)": "两两归约树（并行扫描）",
            "closed form of the whole span": "整段的闭式解",
            "token by token": "逐 token",
        },
    },
}


def compute(quick: bool = False) -> chunk_scan.Composition:
    """Three segments of 16 tokens, H = 2, K = V = 16, seed 0 (the chunk_scan app's default)."""
    return chunk_scan.composition(lengths=(16, 16, 16), H=HEADS, K=16, V=16, seed=0, head=0)


def _arrows(label: str) -> str:
    return label.replace("->", "→")


def _bars(ax, labels, values, colors, xlabel: str, eps_label: str, gid: str) -> None:  # noqa: ANN001
    y = np.arange(len(labels))
    ax.barh(y, values, color=colors, height=0.62, gid=gid)
    ax.set_yticks(y, labels)
    # inverted y with an empty strip below the last bar for the ε label
    ax.set_ylim(len(labels) - 0.5 + 0.55, -0.5)
    ax.set_xscale("log")
    ax.set_xlim(1e-17, 1e4)
    ax.grid(False, axis="y")
    for yi, v in zip(y.tolist(), np.asarray(values).tolist()):
        ax.annotate(f"{v:.1e}" if v else "0", (max(v, 1e-17), yi), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)  # fmt: skip
    eps = np.finfo(np.float64).eps
    ax.axvline(eps, color=style.COLORS["neutral"], ls=":", lw=1.1)
    ax.annotate(eps_label, (eps, 0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                textcoords="offset points", fontsize=7.5,
                color=style.COLORS["neutral"])  # fmt: skip
    ax.set_xticks([1e-16, 1e-8, 1.0])
    ax.set_xlabel(xlabel)


def make_figure(data: chunk_scan.Composition, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    seg = ", ".join(f"{a} = {n}" for a, n in zip(data.labels, data.lengths.tolist()))
    K, V = data.b_true.shape  # [K, V] of one head
    source = style.input_source(data.source, t["random"])
    fig = style.new_figure(
        (COLUMN, 7.0), t["source"].format(source=source, segments=seg, H=HEADS, K=K, V=V)
    )
    fig.suptitle(t["suptitle"])
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.0, 1.0))
    ag, ao = top.subplots(1, 2)
    g_labels = [_arrows(t["groupings"].get(x, x)) for x in data.grouping_labels]
    _bars(ag, g_labels, data.grouping_S_diff, SAME_COLOR, t["x_g"], t["eps"], "grouping")
    ag.set_title(t["title_g"], loc="right")
    o_colors = [SAME_COLOR] + [OTHER_COLOR] * (len(data.order_labels) - 1)
    o_labels = [_arrows(x) for x in data.order_labels]
    o_labels[0] = f"{o_labels[0]} ({t['true']})"
    _bars(ao, o_labels, data.order_S_rel, o_colors, t["x_o"], t["eps"], "order")
    ao.set_title(t["title_o"], loc="right")

    lim = float(max(np.abs(data.b_true).max(), np.abs(data.b_swapped).max()))  # colour scale
    axes = list(bottom.subplots(1, 2))
    for ax, b, order in zip(axes, (data.b_true, data.b_swapped), data.order_labels[:2]):
        im = ax.imshow(b, cmap="RdBu_r", norm=CenteredNorm(halfrange=lim), interpolation="nearest",
                       gid=f"b_{order}")  # fmt: skip
        ax.set_title(t["title_m"].format(order=_arrows(order)), loc="center")
        ax.grid(False)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(t["value"].format(h=data.head))
        ax.set_ylabel(t["key"])
    cb = bottom.colorbar(im, ax=axes, shrink=0.9, pad=0.02)
    cb.set_label(t["cbar"])
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
