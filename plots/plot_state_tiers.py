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
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kda_core.studies import transfer
from plots import style

NAME = "state_tiers"

TEXT = {
    "en": {
        "suptitle": "Where a KDA state is found: device, host, Mooncake Store",
        "hit": "state hit rate",
        "ttft": "TTFT (s)",
        "mean": "mean",
        "p95": "p95",
        "moved": "bytes loaded",
        "host": "from host",
        "remote": "from remote",
        "setups": {"device": "device", "device+host": "+ host", "device+host+remote": "+ remote"},
        "source": "Data: Mooncake conversation trace, first {n:,} requests; Kimi K3 TP8, "
        "{d} device / {h} host checkpoints of {ck}",
    },
    "zh": {
        "suptitle": "KDA 状态在哪里命中：设备、host 与 Mooncake Store",
        "hit": "状态命中率",
        "ttft": "首 token 时间（秒）",
        "mean": "平均",
        "p95": "p95",
        "moved": "加载的字节数",
        "host": "来自 host",
        "remote": "来自远端",
        "setups": {"device": "仅设备", "device+host": "+ host", "device+host+remote": "+ 远端"},
        "source": "数据：Mooncake 对话 trace 前 {n:,} 个请求；Kimi K3 TP8，"
        "设备 {d} / host {h} 个检查点（每个 {ck}）",
    },
}


def compute(quick: bool = False) -> transfer.TierRates:
    """The whole trace (12,031 requests) or its first 300 for tests; 16 device checkpoints."""
    return transfer.tier_rates(300 if quick else 12031, 16, 2.0)


def make_figure(data: transfer.TierRates, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    src = t["source"].format(n=data.n_requests, d=data.device_ckpts, h=data.host_ckpts,
                             ck=style.format_bytes(data.checkpoint_bytes))  # fmt: skip
    fig = style.new_figure("double", src)
    fig.suptitle(t["suptitle"])
    axes = fig.subplots(1, 3)
    names = [t["setups"][s] for s in data.setups]
    x = np.arange(len(names))
    colors = [style.SERIES[i] for i in range(len(names))]
    ax = axes[0]
    ax.bar(x, data.state_hit_rate, color=colors, width=0.6, gid="hit_rate")
    for xi, v in zip(x.tolist(), data.state_hit_rate.tolist()):
        ax.annotate(f"{v:.1%}", (xi, v), xytext=(0, 3), textcoords="offset points", ha="center",
                    fontsize=8)  # fmt: skip
    ax.set_title(t["hit"])
    ax.yaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")
    bx = axes[1]
    w = 0.36
    bx.bar(x - w / 2, data.ttft_mean_s, w, color=colors, gid="ttft_mean")
    bx.bar(x + w / 2, data.ttft_p95_s, w, color="white", edgecolor=colors, hatch="///",
           gid="ttft_p95")  # fmt: skip
    bx.set_title(t["ttft"])
    grey = style.SOURCE_COLOR
    handles = [Patch(facecolor=grey, label=t["mean"]),
               Patch(facecolor="white", edgecolor=grey, hatch="///", label=t["p95"])]  # fmt: skip
    bx.legend(handles=handles, loc="upper right", fontsize=8)
    cx = axes[2]
    host = data.bytes_loaded[:, 0]
    remote = data.bytes_loaded[:, 1]
    cx.bar(x, host, color=style.COLORS["hit"], width=0.6, gid="from_host", label=t["host"])
    cx.bar(x, remote, bottom=host, color=style.COLORS["kv"], width=0.6, gid="from_remote",
           label=t["remote"])  # fmt: skip
    style.bytes_axis(cx.yaxis)
    cx.set_title(t["moved"])
    cx.legend(loc="upper left", fontsize=8)
    for a in axes:
        a.set_xticks(x, names, fontsize=8)
        a.grid(False, axis="x")
        a.set_ylim(bottom=0)
        a.margins(y=0.15)
    bx.set_ylim(0, 1.35 * float(data.ttft_p95_s.max()))  # room for the legend above the bars
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
