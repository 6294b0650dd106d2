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
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import speculative
from plots import style
from words.catalog import T as Lang
from words.speculative_replay import MSG

NAME = "speculative_memory"


def compute(quick: bool = False) -> speculative.MemoryOverD:
    """D = 1..16 for k3-mini (TP1) and Kimi K3 (TP8), bf16; the K3 write-up's 120 slots."""
    return speculative.memory_over_d(tuple(range(1, 17)), tp=8, dtype="bfloat16")


def _per_request(ax: Axes, data: speculative.MemoryOverD, t: Lang) -> None:
    """Kimi K3, one request over D: per-draft states vs rings, and the conv windows."""
    row, d = 1, data.d_values  # row 1: Kimi K3
    state, replay, conv = (style.COLORS[k] for k in ("state", "replay", "conv"))
    ax.plot(
        d,
        data.per_draft_state_bytes[row],
        marker="o",
        ms=4,
        color=state,
        label=t("fig_per_draft"),
        gid="per_draft",
    )
    ax.step(d, data.ring_bytes[row], where="mid", color=replay, label=t("fig_rings"), gid="rings")
    ax.plot(
        d, data.conv_window_bytes[row], color=conv, ls="--", lw=1.6, label=t("fig_conv"), gid="conv"
    )
    style.bytes_axis(ax.yaxis)
    ax.set_ylim(bottom=0)
    ax.set_xticks(d)
    ax.set_xlabel(t("fig_d"))
    ax.set_ylabel(t("fig_bytes"))
    ax.set_title(t("fig_title_req", model=data.models[row], tp=data.tp, dtype=data.dtype))
    ax.legend(loc="upper left")


def _ratio(bx: Axes, data: speculative.MemoryOverD, t: Lang) -> None:
    """Per-draft states / rings over D, per model."""
    for i, name in enumerate(data.models):
        bx.plot(
            data.d_values,
            data.ratio[i],
            marker="o",
            ms=3.5,
            lw=1.6,
            color=style.SERIES[i],
            label=name,
            gid=f"ratio_{name}",
        )
    bx.set_xticks([1, 4, 8, 12, 16])
    bx.set_xlabel(t("fig_d"))
    bx.set_ylabel(t("fig_ratio"))
    bx.set_title(t("fig_title_ratio"))
    bx.set_ylim(bottom=0)
    bx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}×"))
    bx.legend(loc="center right")


def _deployment(cx: Axes, data: speculative.MemoryOverD, t: Lang) -> None:
    """The K3 write-up's deployment: rings for every slot vs per-draft states for the running
    requests only."""
    n = data.deploy_max_running
    vals = (data.deploy_ring_bytes, data.deploy_per_draft_bytes, data.deploy_conv_window_bytes)
    names = (t("fig_deploy_rings"), t("fig_deploy_draft", n=n), t("fig_deploy_conv", n=n))
    colors = (style.COLORS["replay"], style.COLORS["state"], style.COLORS["conv"])
    x = np.arange(len(vals))
    cx.bar(x, vals, color=colors, width=0.62, gid="deploy")
    for xi, v in zip(x.tolist(), vals):
        cx.annotate(
            style.format_bytes(v),
            (xi, v),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=8,
        )
    cx.set_xticks(x, names, fontsize=8)
    style.bytes_axis(cx.yaxis)
    cx.margins(y=0.15)
    cx.grid(False, axis="x")
    cx.set_title(t("fig_title_deploy", slots=data.deploy_slots, d=data.deploy_draft_tokens))


def make_figure(data: speculative.MemoryOverD, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    source = t("fig_source", model=data.models[1], tp=data.tp, dtype=data.dtype)
    fig = style.new_figure("grid", source)
    fig.suptitle(t("fig_suptitle"))
    gs = fig.add_gridspec(2, 2, height_ratios=(1.15, 1.0))
    _per_request(fig.add_subplot(gs[0, :]), data, t)
    _ratio(fig.add_subplot(gs[1, 0]), data, t)
    _deployment(fig.add_subplot(gs[1, 1]), data, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
