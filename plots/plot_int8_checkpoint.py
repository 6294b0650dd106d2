"""INT8 checkpoints: the error of parking a real KDA state, and how it propagates while decoding.

Compares (``kda_core.studies.int8.int8_study``, TinyHybrid on the default bilingual text):
  * the signed error of one (layer, head) state after an INT8 round trip with one scale per key
    channel (SGLang's layout);
  * how many checkpoints fit 8 GiB per GPU for Kimi K3 at TP8, native bf16 vs each format;
  * decoding on after the restore (teacher-forced): the state's distance to an exact run and the
    max logit difference, when the state is quantized once at parking ("park once", one rounding
    per hit) vs re-quantized after every decode step ("every step").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kda_core.studies import int8
from plots import style

NAME = "int8_checkpoint"
# Park once vs every step is a comparison, not a concept: the first two SERIES colours, in this
# order (palette rule; the int8 app should draw the same two).
ONCE_COLOR, EVERY_COLOR = style.SERIES[0], style.SERIES[1]

TEXT = {
    "en": {
        "suptitle": "Parking a KDA state as INT8: one rounding per hit, not per step",
        "title_err": "Round-trip error\n{label}\n(KDA layer {layer}, head {head})",
        "value": "value channel",
        "key": "key channel",
        "title_cap": "Checkpoints per {budget}\n(Kimi K3 per GPU, TP{tp})",
        "cap_x": "checkpoints that fit",
        "native": "native {dtype}",
        "title_state": "State distance to an exact run",
        "title_logit": "Logit difference to an exact run",
        "steps": "decode steps after restore",
        "state_y": "relative Frobenius distance",
        "logit_y": "max |Δ logit|",
        "once": "park once: quantize at parking",
        "every": "every step: re-quantize after each token",
        "flip": "argmax differs",
        "cbar": "dequantized − exact",
        "source": "Data: KDA states of TinyHybrid (trained k3-mini) after {n} tokens, "
        "teacher-forced decoding; capacity: Kimi K3 state size per GPU",
    },
    "zh": {
        "suptitle": "以 INT8 暂存 KDA 状态：每次命中只舍入一次，而不是每步一次",
        "title_err": "往返量化误差\n{label}\n（KDA 第 {layer} 层，头 {head}）",
        "value": "值通道",
        "key": "键通道",
        "title_cap": "{budget} 可容纳的检查点\n（Kimi K3 每卡，TP{tp}）",
        "cap_x": "可容纳的检查点数",
        "native": "原生 {dtype}",
        "title_state": "与精确运行的状态距离",
        "title_logit": "与精确运行的 logit 差",
        "steps": "恢复后的解码步数",
        "state_y": "相对 Frobenius 距离",
        "logit_y": "max |Δ logit|",
        "once": "暂存时量化一次",
        "every": "每个 token 后都重新量化",
        "flip": "argmax 不同",
        "cbar": "反量化值 − 精确值",
        "source": "数据：TinyHybrid（训练后的 k3-mini）处理 {n} 个 token 后的 KDA 状态，"
        "teacher forcing 解码；容量：Kimi K3 每卡的状态大小",
    },
}


def compute(quick: bool = False) -> int8.Int8Study:
    """Park 64 tokens of the default text, INT8 per key channel, decode 32 steps (8 if quick)."""
    return int8.int8_study(n_tokens=64, steps=8 if quick else 32, budget_gib=8.0, tp=8)


def make_figure(data: int8.Int8Study, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    e, d, cap = data.errors, data.divergence, data.memory_k3
    fig = style.new_figure((style.COLUMN_WIDTH, 6.6), t["source"].format(n=data.n_tokens))
    fig.suptitle(t["suptitle"])
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.0, 1.0))
    ae, ac = top.subplots(1, 2, width_ratios=(1.0, 1.05))
    a_s, al = bottom.subplots(1, 2)

    im = ae.imshow(
        e.error, cmap="RdBu_r", norm=CenteredNorm(), interpolation="nearest", gid="error"
    )
    ae.set_title(t["title_err"].format(label=e.label, layer=e.layer, head=e.head), loc="center")
    ae.set_xlabel(t["value"])
    ae.set_ylabel(t["key"])
    ae.grid(False)
    cb = top.colorbar(im, ax=ae, shrink=0.9, pad=0.02)
    cb.formatter.set_powerlimits((-2, 2))
    cb.set_label(t["cbar"], fontsize=8.5)
    cb.ax.tick_params(labelsize=8)

    native = t["native"].format(dtype=cap.native_dtype)
    labels = [native if x == "native" else x for x in cap.labels]
    y = np.arange(len(labels))
    # every bar counts checkpoint slots (the concept colour); the format is on the y axis
    ac.barh(y, cap.capacity, color=style.COLORS["checkpoint"], height=0.62, gid="capacity")
    ac.set_yticks(y, labels, fontsize=8)
    ac.invert_yaxis()
    ac.grid(False, axis="y")
    for yi, c, g in zip(y.tolist(), cap.capacity.tolist(), cap.gain.tolist()):
        ac.annotate(f"{c:,}  ({g:.2f}×)", (c, yi), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7.5)  # fmt: skip
    ac.margins(x=0.45)
    ac.xaxis.set_major_locator(MaxNLocator(3))
    ac.set_xlabel(t["cap_x"])
    ac.set_title(
        t["title_cap"].format(budget=style.format_bytes(cap.budget_bytes), tp=cap.tp), loc="center"
    )

    for ax, once, every, once_ok, every_ok, ylabel, title in (
        (a_s, d.park_once_state_dist, d.every_step_state_dist, None, None, t["state_y"],
         t["title_state"]),
        (al, d.park_once_logit_diff, d.every_step_logit_diff, d.park_once_agree,
         d.every_step_agree, t["logit_y"], t["title_logit"]),
    ):  # fmt: skip
        kind = "state" if once_ok is None else "logit"
        ax.plot(d.steps, once, color=ONCE_COLOR, label=t["once"], gid=f"{kind}_once")
        ax.plot(d.steps, every, color=EVERY_COLOR, label=t["every"], gid=f"{kind}_every")
        if once_ok is not None:
            for vals, ok in ((once, once_ok), (every, every_ok)):
                if (~ok).any():
                    ax.plot(d.steps[~ok], vals[~ok], "x", color="black", ms=6, label=t["flip"])
        ax.set_xlabel(t["steps"])
        ax.set_ylabel(ylabel)
        ax.set_title(title, loc="center")
        ax.set_ylim(bottom=0)
        ax.set_xlim(d.steps[0], d.steps[-1])
    handles, names = al.get_legend_handles_labels()
    bottom.legend(handles, names, loc="outside lower center", ncols=len(names))
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
