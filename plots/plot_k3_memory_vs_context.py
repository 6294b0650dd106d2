"""Kimi K3 memory vs context length: one request's MLA KV grows per token, its KDA state is flat.

Compares, per GPU at TP8 in bf16 (``kda_core.studies.planner.plan``):
  * MLA latent KV of one request (24 MLA layers x 576 values per token), growing linearly;
  * one KDA state slot (69 layers' recurrent states + short-conv windows), the same at any length;
  * the crossover: the first context length where MLA KV outweighs one KDA slot
    (``Plan.crossover_context``, the same number the memory_planner app prints).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies import planner
from plots import style
from words.memory_planner import MSG

NAME = "k3_memory_vs_context"


def compute(quick: bool = False) -> planner.Plan:
    """The planner's default Kimi K3 plan (TP8, bf16), contexts 1 .. 1M tokens."""
    return planner.plan("kimi-k3", tp=8, n_context=16 if quick else 64, ssm_dtype="bfloat16")


def make_figure(data: planner.Plan, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    source = t("fig_source", model=data.model, tp=data.tp, dtype=data.kv_dtype)
    fig = style.new_figure("single", source)
    ax = fig.add_subplot()
    x = data.context_lens
    ax.plot(x, data.kv_bytes, color=style.COLORS["kv"], label=t("fig_mla"), gid="mla")
    ax.plot(x, data.state_bytes, color=style.COLORS["state"], label=t("fig_kda"), gid="kda")
    ax.set_xscale("log")
    ax.set_yscale("log")
    style.bytes_axis(ax.yaxis, log=True)
    ax.xaxis.set_major_formatter(
        ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}" if v < 1e6 else f"{v / 1e6:g}M")
    )
    c = data.crossover_context

    ax.annotate(
        t("fig_cross", n=c),
        (c, data.slot_bytes),
        xytext=(8, -28),
        textcoords="offset points",
        fontsize=9,
        color="#333333",
        arrowprops={"arrowstyle": "-", "color": style.COLORS["neutral"], "lw": 0.8},
    )
    ax.annotate(
        t("fig_end_mla", b=style.format_bytes(data.kv_bytes[-1]), n=int(x[-1])),
        (x[-1], data.kv_bytes[-1]),
        xytext=(-6, 8),
        textcoords="offset points",
        ha="right",
        fontsize=8.5,
        color=style.COLORS["kv"],
    )
    ax.annotate(
        t("fig_end_kda", b=style.format_bytes(data.state_bytes[-1])),
        (x[-1], data.state_bytes[-1]),
        xytext=(-6, 8),
        textcoords="offset points",
        ha="right",
        fontsize=8.5,
        color=style.COLORS["state"],
    )
    ax.set_xlim(x[0], x[-1])
    ax.margins(y=0.12)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi)  # frozen: the drop line is drawn in axes fraction
    frac = float(np.log(data.slot_bytes / lo) / np.log(hi / lo))
    # a drop line from the crossing to the axis (a full-height one ran through the legend)
    ax.axvline(c, ymax=frac, color=style.COLORS["neutral"], ls=":", lw=1.2, gid="crossover")
    ax.set_xlabel(t("fig_x"))
    ax.set_ylabel(t("fig_y"))
    ax.set_title(t("fig_title"))
    ax.legend(loc="upper left")
    ax.grid(True, which="major")
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
