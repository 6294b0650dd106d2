"""Checkpoint placement and retention policies on a real trace, over the state budget per GPU.

Compares (``kda_core.studies.density.policy_sweep``: the trace-driven simulator, Kimi K3 per GPU
at TP8) the lab's policies — a checkpoint at every block, every 4096 tokens, SGLang (chunk
boundaries + branch points), Marconi (speculative insertion + FLOP-aware eviction), vLLM
(block-aligned) — at four state budgets:
  * state hit rate (restorable prefix / input tokens), against the token hit rate an infinite
    KV cache would get (the ceiling: a token hit is not a state hit);
  * checkpoints stored over the run.
Trace: the first 4,000 requests of the bundled Mooncake conversation trace (see
``plot_checkpoint_density``: the whole trace would not fit the 60 s budget of all figures).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies import density
from plots import style
from plots.plot_checkpoint_density import BUDGETS_GIB, trace

NAME = "retention_policies"

TEXT = {
    "en": {
        "suptitle": "Which checkpoints to keep: policies vs state budget (real trace)",
        "budget": "state budget per GPU",
        "unlimited": "unlimited",
        "title_hit": "State hit rate",
        "hit": "restorable / input tokens",
        "ideal": "token hit rate, infinite KV (ceiling)",
        "title_ck": "Checkpoints stored",
        "ck": "checkpoints over the run",
        "policies": {},
        "source": "Data: trace-driven simulation of {trace}, {model} per GPU at TP8",
        "trace": "the first {n:,} requests of the Mooncake conversation trace",
    },
    "zh": {
        "suptitle": "保留哪些检查点：各策略 vs 状态预算（真实 trace）",
        "budget": "每卡状态预算",
        "unlimited": "不限",
        "title_hit": "状态命中率",
        "hit": "可恢复 / 输入 token",
        "ideal": "token 命中率，KV 无限（上限）",
        "title_ck": "保存的检查点",
        "ck": "整个运行中保存的检查点数",
        "policies": {"every block": "每个块", "interval 4096": "每 4096 个 token"},
        "source": "数据：在{trace}上做 trace 驱动模拟，{model} 每卡 TP8",
        "trace": "Mooncake 对话 trace 的前 {n:,} 个请求",
    },
}


def compute(quick: bool = False) -> density.PolicySweep:
    """Every default policy at 8 / 32 / 128 GiB and unlimited (20 simulations, ~4 s after the
    density figure, which shares two policies' runs); ``quick``: 400 requests, two budgets."""
    if quick:
        return density.policy_sweep(trace(True), density.DEFAULT_POLICIES, (8.0, None))
    return density.policy_sweep(trace(), density.DEFAULT_POLICIES, BUDGETS_GIB)


def make_figure(data: density.PolicySweep, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    fig = style.new_figure(
        (style.COLUMN_WIDTH, 4.3),
        t["source"].format(trace=style.trace_label(data.trace_name, t["trace"]), model=data.model),
    )
    fig.suptitle(t["suptitle"])
    gs = fig.add_gridspec(2, 2, height_ratios=(1.0, 0.2))
    ah, ac = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
    lg = fig.add_subplot(gs[1, :])
    x = np.arange(len(data.budget_labels))
    names = [t["unlimited"] if b == "unlimited" else b for b in data.budget_labels]
    markers = "osD^vP*X"
    for i, label in enumerate(data.labels):
        kw = {"color": style.SERIES[i], "marker": markers[i % len(markers)], "ms": 4.5, "lw": 1.7}
        name = t["policies"].get(label, label)
        ah.plot(x, data.state_hit_rate[i], label=name, gid=f"hit{i}", **kw)
        ac.plot(x, data.checkpoints_stored[i], gid=f"ck{i}", **kw)
    ah.axhline(data.ideal_token_hit_rate, color=style.COLORS["neutral"], ls="--", lw=1.3,
               label=t["ideal"], gid="ideal")  # fmt: skip
    ah.yaxis.set_major_formatter(ticker.PercentFormatter(1.0, decimals=0))
    ah.set_ylim(0, None)
    ah.set_ylabel(t["hit"])
    ah.set_title(t["title_hit"])
    ac.set_yscale("log")
    ac.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ac.yaxis.set_minor_locator(ticker.NullLocator())
    style.count_axis(ac.yaxis)
    ac.set_ylabel(t["ck"])
    ac.set_title(t["title_ck"])
    for ax in (ah, ac):
        ax.set_xticks(x, names)
        ax.set_xlabel(t["budget"])
        ax.margins(x=0.08)
    handles, labels = ah.get_legend_handles_labels()
    lg.axis("off")
    lg.legend(handles, labels, loc="center", ncols=3, fontsize=8, borderaxespad=0)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
