"""State tiers on the Mooncake conversation trace: device-only vs + host vs + remote.

Draws ``kda_core.studies.transfer.tier_rates`` (``kda_core.sim.tiers``: Kimi K3 at TP8, bf16
checkpoints of 29 MB per GPU, SGLang placement, only each request's last tracked state written
through to host / remote): the state hit rate, the mean and p95 TTFT, and the bytes loaded from
each tier onto the device.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kda_core.studies import transfer
from plots import style
from words.catalog import T as Lang
from words.state_transfer import MSG

NAME = "state_tiers"


def compute(quick: bool = False) -> transfer.TierRates:
    """The whole trace (12,031 requests) or its first 300 for tests; 16 device checkpoints."""
    return transfer.tier_rates(300 if quick else 12031, 16, 2.0)


def _hit_rate(ax: Axes, x: np.ndarray, data: transfer.TierRates, colors: list, t: Lang) -> None:
    ax.bar(x, data.state_hit_rate, color=colors, width=0.6, gid="hit_rate")
    for xi, v in zip(x.tolist(), data.state_hit_rate.tolist()):
        ax.annotate(
            f"{v:.1%}", (xi, v), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8
        )
    ax.set_title(t("st_hit"))
    ax.yaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")


def _ttft(bx: Axes, x: np.ndarray, data: transfer.TierRates, colors: list, t: Lang) -> None:
    """Mean (filled) and p95 (hatched) time to first token per setup."""
    w, grey = 0.36, style.SOURCE_COLOR
    bx.bar(x - w / 2, data.ttft_mean_s, w, color=colors, gid="ttft_mean")
    p95 = {"color": "white", "edgecolor": colors, "hatch": "///", "gid": "ttft_p95"}
    bx.bar(x + w / 2, data.ttft_p95_s, w, **p95)
    bx.set_title(t("fig_ttft"))
    handles = [
        Patch(facecolor=grey, label=t("fig_mean")),
        Patch(facecolor="white", edgecolor=grey, hatch="///", label=t("fig_p95")),
    ]
    bx.legend(handles=handles, loc="upper right", fontsize=8)


def _loaded(cx: Axes, x: np.ndarray, data: transfer.TierRates, t: Lang) -> None:
    """Bytes loaded onto the device from the host and from the remote store, stacked."""
    host, remote = data.bytes_loaded[:, 0], data.bytes_loaded[:, 1]
    cx.bar(x, host, color=style.COLORS["hit"], width=0.6, gid="from_host", label=t("fig_from_host"))
    cx.bar(
        x,
        remote,
        bottom=host,
        color=style.COLORS["kv"],
        width=0.6,
        gid="from_remote",
        label=t("fig_from_remote"),
    )
    style.bytes_axis(cx.yaxis)
    cx.set_title(t("fig_moved"))
    cx.legend(loc="upper left", fontsize=8)


def make_figure(data: transfer.TierRates, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    ck = style.format_bytes(data.checkpoint_bytes)
    src = t("fig_source", n=data.n_requests, d=data.device_ckpts, h=data.host_ckpts, ck=ck)
    fig = style.new_figure("double", src)
    fig.suptitle(t("fig_suptitle"))
    axes = fig.subplots(1, 3)
    names = [t.word("setup", s) for s in data.setups]
    x = np.arange(len(names))
    colors = [style.SERIES[i] for i in range(len(names))]
    _hit_rate(axes[0], x, data, colors, t)
    _ttft(axes[1], x, data, colors, t)
    _loaded(axes[2], x, data, t)
    for a in axes:
        a.set_xticks(x, names, fontsize=8)
        a.grid(False, axis="x")
        a.set_ylim(bottom=0)
        a.margins(y=0.15)
    axes[1].set_ylim(0, 1.35 * float(data.ttft_p95_s.max()))  # room for the legend above
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
