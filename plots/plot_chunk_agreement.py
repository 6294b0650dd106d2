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
from matplotlib.figure import Figure

from kda_core.studies import chunk_scan
from plots import style

NAME = "chunk_agreement"
# Two metrics (categories, not concepts): the first two SERIES colours, in legend order.
STEPS_COLOR, FLOPS_COLOR = style.SERIES[0], style.SERIES[1]

TEXT = {
    "en": {
        "title_a": "Chunked = recurrent\n(float64, seeded inputs)",
        "title_b": "What chunking buys\n(one K3 layer, T = {T:,})",
        "x": "chunk size C (tokens)",
        "y_a": "relative error of outputs o",
        "T": "T = {T}",
        "eps": "float64 machine ε",
        "steps": "fewer sequential steps: T / ⌈T/C⌉",
        "flops": "more matmul FLOPs: chunked / recurrent",
        "y_b": "ratio to the token recurrence",
        "source": "Data: KDA on {source} inputs, float64; cost model: one Kimi K3 KDA layer, "
        "{H} heads, K = {K}, V = {V}",
        "random": "random (seed {seed})",
    },
    "zh": {
        "title_a": "分块 = 递归\n（float64，固定种子输入）",
        "title_b": "分块换来什么\n（K3 单层，T = {T:,}）",
        "x": "块大小 C（token）",
        "y_a": "输出 o 的相对误差",
        "T": "T = {T}",
        "eps": "float64 机器精度 ε",
        "steps": "顺序步数减少：T / ⌈T/C⌉",
        "flops": "矩阵乘 FLOPs 增加：分块 / 递归",
        "y_b": "相对逐 token 递归的比值",
        "source": "数据：KDA 在{source}输入上，float64；代价模型：Kimi K3 的一个 KDA 层，"
        "{H} 个头，K = {K}，V = {V}",
        "random": "随机（种子 {seed}）",
    },
}


def compute(quick: bool = False) -> chunk_scan.ChunkScanStudy:
    """The chunk_scan app's default study (seed 0, C = 64, no wall-clock timing); ~0.3 s."""
    return chunk_scan.chunk_scan_study(seed=0, chunk_size=64, measure_time=False)


def make_figure(data: chunk_scan.ChunkScanStudy, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    ag, cost = data.agreement, data.cost
    source = style.input_source(ag.source, t["random"])
    fig = style.new_figure(
        "double", t["source"].format(source=source, H=cost.H, K=cost.K, V=cost.V)
    )
    ax, bx = fig.subplots(1, 2)
    for i, T in enumerate(ag.T_values.tolist()):
        ax.plot(ag.chunk_sizes, ag.o_rel[i], marker="o", label=t["T"].format(T=T), gid=f"T{T}")
    ax.axhline(np.finfo(np.float64).eps, color=style.COLORS["neutral"], ls=":", lw=1.2)
    ax.annotate(
        t["eps"],
        (ag.chunk_sizes[0], np.finfo(np.float64).eps),
        xytext=(2, -11),
        textcoords="offset points",
        fontsize=8.5,
        color=style.COLORS["neutral"],
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(1e-17, 1e-14)
    ax.set_xticks(ag.chunk_sizes)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xlabel(t["x"])
    ax.set_ylabel(t["y_a"])
    ax.set_title(t["title_a"])
    ax.legend(loc="upper left", ncols=2)

    row = -1  # the longest sequence of the cost grid
    T = int(cost.T_values[row])
    bx.plot(
        cost.chunk_sizes, cost.steps_ratio[row], marker="o", color=STEPS_COLOR,
        label=t["steps"], gid="steps",
    )  # fmt: skip
    bx.plot(
        cost.chunk_sizes, cost.flops_ratio[row], marker="s", color=FLOPS_COLOR,
        label=t["flops"], gid="flops",
    )  # fmt: skip
    for x, y in zip(cost.chunk_sizes.tolist(), cost.steps_ratio[row].tolist()):
        bx.annotate(f"{y:.0f}×", (x, y), xytext=(0, 6), textcoords="offset points", ha="center",
                    fontsize=8, color=STEPS_COLOR)  # fmt: skip
    for x, y in zip(cost.chunk_sizes.tolist(), cost.flops_ratio[row].tolist()):
        bx.annotate(f"{y:.2f}×", (x, y), xytext=(0, -13), textcoords="offset points",
                    ha="center", fontsize=8, color=FLOPS_COLOR)  # fmt: skip
    bx.set_xscale("log", base=2)
    bx.set_yscale("log", base=2)
    bx.set_ylim(0.5, 4096)  # headroom: the legend sits above the largest label (128×)
    bx.set_xticks(cost.chunk_sizes)
    bx.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    bx.xaxis.set_minor_locator(ticker.NullLocator())
    bx.margins(x=0.12)
    bx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}×"))
    bx.set_xlabel(t["x"])
    bx.set_ylabel(t["y_b"])
    bx.set_title(t["title_b"].format(T=T))
    bx.legend(loc="upper left")
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
