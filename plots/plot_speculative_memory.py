"""Speculative decoding on KDA: ReplaySSM rings vs one full state per draft token.

Compares (``kda_core.studies.speculative.memory_over_d``, Kimi K3 per GPU at TP8, bf16):
  * per request over the number of draft tokens D: the six ReplaySSM rings (d, k, g, raw v,
    raw k, beta; L = next power of two >= 2D entries) vs D per-draft recurrent states, plus the
    conv windows both designs keep;
  * the per-draft / ring ratio for the tiny lab model and for Kimi K3;
  * the K3 write-up's deployment: rings for every state slot vs per-draft states for the running
    requests only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies import speculative
from plots import style

NAME = "speculative_memory"

TEXT = {
    "en": {
        "suptitle": "Speculative decoding: ReplaySSM rings vs a state per draft token",
        "title_req": "One request, {model} per GPU (TP{tp}, {dtype})",
        "d": "draft tokens D",
        "bytes": "bytes per request",
        "rings": "ReplaySSM rings (L = next pow2 ≥ 2D)",
        "per_draft": "D per-draft recurrent states",
        "conv": "conv windows (both designs)",
        "title_ratio": "Per-draft states / rings",
        "ratio": "memory ratio",
        "title_deploy": "Deployment: {slots} slots, D = {d}",
        "deploy_rings": "rings\n(every slot)",
        "deploy_draft": "per-draft states\n({n} running)",
        "deploy_conv": "conv windows\n({n} running)",
        "source": "Data: buffer shapes of SGLang's speculative verify for {model} at TP{tp} "
        "and the lab's tiny model, {dtype}",
    },
    "zh": {
        "suptitle": "推测解码：ReplaySSM 环形缓冲 vs 每个草稿 token 一份状态",
        "title_req": "单个请求，{model} 每卡（TP{tp}，{dtype}）",
        "d": "草稿 token 数 D",
        "bytes": "每个请求的字节数",
        "rings": "ReplaySSM 环（L = 不小于 2D 的 2 的幂）",
        "per_draft": "D 份草稿递归状态",
        "conv": "卷积窗口（两种设计都需要）",
        "title_ratio": "草稿状态 / 环",
        "ratio": "显存比值",
        "title_deploy": "部署：{slots} 个槽，D = {d}",
        "deploy_rings": "环\n（每个槽）",
        "deploy_draft": "草稿状态\n（{n} 个运行中）",
        "deploy_conv": "卷积窗口\n（{n} 个运行中）",
        "source": "数据：SGLang 推测验证缓冲区的形状，{model}（TP{tp}）与实验室的小模型，{dtype}",
    },
}


def compute(quick: bool = False) -> speculative.MemoryOverD:
    """D = 1..16 for k3-mini (TP1) and Kimi K3 (TP8), bf16; the K3 write-up's 120 slots."""
    return speculative.memory_over_d(tuple(range(1, 17)), tp=8, dtype="bfloat16")


def make_figure(data: speculative.MemoryOverD, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    fig = style.new_figure(
        "grid", t["source"].format(model=data.models[1], tp=data.tp, dtype=data.dtype)
    )
    fig.suptitle(t["suptitle"])
    gs = fig.add_gridspec(2, 2, height_ratios=(1.15, 1.0))
    ax = fig.add_subplot(gs[0, :])
    row = 1  # Kimi K3
    d = data.d_values
    ax.plot(d, data.per_draft_state_bytes[row], marker="o", ms=4, color=style.COLORS["state"],
            label=t["per_draft"], gid="per_draft")  # fmt: skip
    ax.step(d, data.ring_bytes[row], where="mid", color=style.COLORS["replay"], label=t["rings"],
            gid="rings")  # fmt: skip
    ax.plot(d, data.conv_window_bytes[row], color=style.COLORS["conv"], ls="--", lw=1.6,
            label=t["conv"], gid="conv")  # fmt: skip
    style.bytes_axis(ax.yaxis)
    ax.set_ylim(bottom=0)
    ax.set_xticks(d)
    ax.set_xlabel(t["d"])
    ax.set_ylabel(t["bytes"])
    ax.set_title(t["title_req"].format(model=data.models[row], tp=data.tp, dtype=data.dtype))
    ax.legend(loc="upper left")

    bx = fig.add_subplot(gs[1, 0])
    for i, name in enumerate(data.models):
        bx.plot(d, data.ratio[i], marker="o", ms=3.5, lw=1.6, color=style.SERIES[i],
                label=name, gid=f"ratio_{name}")  # fmt: skip
    bx.set_xticks([1, 4, 8, 12, 16])
    bx.set_xlabel(t["d"])
    bx.set_ylabel(t["ratio"])
    bx.set_title(t["title_ratio"])
    bx.set_ylim(bottom=0)
    bx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}×"))
    bx.legend(loc="center right")

    cx = fig.add_subplot(gs[1, 1])
    vals = (data.deploy_ring_bytes, data.deploy_per_draft_bytes, data.deploy_conv_window_bytes)
    names = (
        t["deploy_rings"],
        t["deploy_draft"].format(n=data.deploy_max_running),
        t["deploy_conv"].format(n=data.deploy_max_running),
    )
    colors = (style.COLORS["replay"], style.COLORS["state"], style.COLORS["conv"])
    x = np.arange(len(vals))
    cx.bar(x, vals, color=colors, width=0.62, gid="deploy")
    for xi, v in zip(x.tolist(), vals):
        cx.annotate(style.format_bytes(v), (xi, v), xytext=(0, 3), textcoords="offset points",
                    ha="center", fontsize=8)  # fmt: skip
    cx.set_xticks(x, names, fontsize=8)
    style.bytes_axis(cx.yaxis)
    cx.margins(y=0.15)
    cx.grid(False, axis="x")
    cx.set_title(t["title_deploy"].format(slots=data.deploy_slots, d=data.deploy_draft_tokens))
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
