"""Why a request got no hit, SGLang vs vLLM, on the Mooncake conversation trace.

Draws ``kda_core.studies.hit_reasons.hit_reasons`` (Kimi K3 at TP8: vLLM's block raised to 768
tokens; SGLang extra_buffer defaults) with unlimited budgets and under a state budget per GPU:
per engine, the share of requests and the share of uncached input tokens per reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kda_core.studies.hit_reasons import ENGINES, REASONS, HitReasons, hit_reasons
from kda_core.workloads import bundled_trace
from plots import style

NAME = "hit_reasons"
BUDGET_GIB = 8.0

TEXT = {
    "en": {
        "suptitle": "Why a request got no hit: SGLang vs vLLM on the same trace",
        "requests": "share of requests",
        "tokens": "share of the uncached tokens",
        "engines": {"sglang": "SGLang", "vllm": "vLLM"},
        "unlimited": "no budget",
        "budget": "{gib:g} GiB states",
        "reasons": {
            "hit": "hit (at least half the shared prefix)",
            "first_occurrence": "first occurrence",
            "below_one_block": "shared prefix < one block",
            "state_in_unique_tokens": "states in request-unique tokens",
            "no_state_at_branch": "no state at the branch point",
            "evicted_state_budget": "evicted: state budget",
            "evicted_kv_budget": "evicted: KV budget",
            "evicted_unified_budget": "evicted: unified budget",
            "host_last_state_only": "host holds last states only",
            "evicted_host_budget": "evicted: host capacity",
        },
        "source": "Data: Mooncake conversation trace, first {n:,} requests; Kimi K3 TP8, vLLM "
        "block {vb} tokens; sequential replay",
    },
    "zh": {
        "suptitle": "请求为何没有命中：同一 trace 上的 SGLang 与 vLLM",
        "requests": "请求占比",
        "tokens": "未命中输入 token 占比",
        "engines": {"sglang": "SGLang", "vllm": "vLLM"},
        "unlimited": "无预算",
        "budget": "状态 {gib:g} GiB",
        "reasons": {
            "hit": "命中（至少共享前缀的一半）",
            "first_occurrence": "首次出现",
            "below_one_block": "共享前缀不足一个 block",
            "state_in_unique_tokens": "状态落在请求独有的 token 中",
            "no_state_at_branch": "分叉点没有状态",
            "evicted_state_budget": "被状态预算逐出",
            "evicted_kv_budget": "被 KV 预算逐出",
            "evicted_unified_budget": "被统一预算逐出",
            "host_last_state_only": "host 只存每个请求最后的状态",
            "evicted_host_budget": "被 host 容量逐出",
        },
        "source": "数据：Mooncake 对话 trace 前 {n:,} 个请求；Kimi K3 TP8，vLLM block "
        "{vb} 个 token；顺序回放",
    },
}

_COLORS = dict(
    zip(REASONS, (style.COLORS["hit"], style.COLORS["free"], *style.SERIES), strict=True)
)


@dataclass(frozen=True)
class ReasonFigureData:
    """The study at each budget (None = unlimited), in drawing order."""

    budgets_gib: tuple[float | None, ...]
    runs: tuple[HitReasons, ...]


def compute(quick: bool = False) -> ReasonFigureData:
    """The whole trace (12,031 requests) or its first 300 for tests."""
    trace = bundled_trace("conversation").head(300 if quick else 12031)
    budgets = (None, BUDGET_GIB)
    runs = tuple(
        hit_reasons(trace, state_budget_bytes=None if b is None else b * (1 << 30)) for b in budgets
    )
    return ReasonFigureData(budgets, runs)


def bar_shares(data: ReasonFigureData) -> tuple[list[tuple[str, float | None]], np.ndarray]:
    """Bars top to bottom as (engine, budget) and their shares ``[2 metrics, bars, reasons]``."""
    bars, req, tok = [], [], []
    for budget, run in zip(data.budgets_gib, data.runs, strict=True):
        r, t = run.share_arrays()
        for row, engine in enumerate(ENGINES):
            bars.append((engine, budget))
            req.append(r[row])
            tok.append(t[row])
    return bars, np.array([req, tok])


def make_figure(data: ReasonFigureData, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    first = data.runs[0]
    src = t["source"].format(n=len(first.input_len), vb=first.vllm.unit)
    fig = style.new_figure("double", src)
    fig.suptitle(t["suptitle"])
    grid = fig.add_gridspec(2, 2, height_ratios=(3, 1))
    left_ax = fig.add_subplot(grid[0, 0])
    axes = (left_ax, fig.add_subplot(grid[0, 1], sharey=left_ax))
    key_ax = fig.add_subplot(grid[1, :])  # the legend's own row, clear of the panels and footer
    key_ax.axis("off")
    bars, shares = bar_shares(data)
    labels = [
        f"{t['engines'][e]}, " + (t["unlimited"] if b is None else t["budget"].format(gib=b))
        for e, b in bars
    ]
    y = np.arange(len(bars))[::-1]
    present = [k for k in range(len(REASONS)) if shares[:, :, k].any()]
    panels = zip(axes, shares, ("requests", "tokens"), strict=True)
    for ax, metric, key in panels:
        left = np.zeros(len(bars))
        for k in present:
            name = REASONS[k]
            color = _COLORS[name]
            ax.barh(y, metric[:, k], left=left, height=0.6, color=color, gid=f"{key}_{name}")
            left += metric[:, k]
        ax.set_title(t[key])
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")
        ax.grid(False, axis="y")
    axes[0].set_yticks(y, labels, fontsize=8)
    handles = [Patch(color=_COLORS[REASONS[k]], label=t["reasons"][REASONS[k]]) for k in present]
    key_ax.legend(handles=handles, loc="center", ncol=2, fontsize=8, frameon=False)
    axes[1].tick_params(labelleft=False)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
