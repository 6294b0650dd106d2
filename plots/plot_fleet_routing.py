"""Routing a hybrid fleet: what each router counted against what the replicas gave.

Draws ``kda_core.studies.fleet.fleet_study`` on the Mooncake conversation trace at 4 replicas
under SGLang's rules with a state budget per GPU: per router the share of input tokens the
replicas restored and the share the router counted; the KV-only router's requests, counted
against restored; and the state-aware router's load per replica over time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from kda_core.studies.fleet import GAP_REASONS, SUMMARY_KEYS, FleetStudy, fleet_study
from kda_core.workloads import bundled_trace
from plots import style

NAME = "fleet_routing"
REPLICAS = 4
BUDGET_GIB = 4.0

TEXT = {
    "en": {
        "suptitle": "Four replicas, six routers: hits counted vs given\n(Kimi K3, SGLang rules)",
        "rates": "share of input tokens",
        "given": "restored by the replica",
        "counted": "counted by the router",
        "routers": {
            "round_robin": "round-robin",
            "least_loaded": "least loaded",
            "sglang_cache_aware": "SGLang cache-aware",
            "kv_events": "KV events",
            "kv_events_all_groups": "KV events, all groups",
            "state_aware": "state-aware",
        },
        "rates_title": "Hit rates per router",
        "over": "KV-only router:\n{n:,} requests over-promised",
        "x_over": "tokens counted (thousands)",
        "y_over": "tokens restored (thousands)",
        "reasons": {
            "as_expected": "as counted",
            "kv_without_state": "KV held, no state that deep",
            "not_held": "counted, not held",
            "unexpected_hit": "more than counted",
        },
        "load": "State-aware router:\nrequests in flight per replica",
        "x_load": "time (min)",
        "replica": "replica {k}",
        "source": "Data: Mooncake conversation trace, {n:,} requests; {k} replicas, Kimi K3 "
        "TP8, {gib:g} GiB of states per GPU; events in SGLang 0.5.23's format",
    },
    "zh": {
        "suptitle": "四个副本、六种路由器：估计的命中与实际的命中\n（Kimi K3，SGLang 规则）",
        "rates": "占输入 token 的比例",
        "given": "副本实际恢复",
        "counted": "路由器估计",
        "routers": {
            "round_robin": "轮询",
            "least_loaded": "最少负载",
            "sglang_cache_aware": "SGLang 缓存感知",
            "kv_events": "KV 事件",
            "kv_events_all_groups": "KV 事件（全部组）",
            "state_aware": "状态感知",
        },
        "rates_title": "各路由器的命中率",
        "over": "只看 KV 的路由器：\n{n:,} 个请求被多估",
        "x_over": "估计的 token（千）",
        "y_over": "实际恢复的 token（千）",
        "reasons": {
            "as_expected": "与估计一致",
            "kv_without_state": "KV 在，那么深处没有状态",
            "not_held": "计入但不在副本上",
            "unexpected_hit": "比估计的多",
        },
        "load": "状态感知路由器：\n各副本的在途请求数",
        "x_load": "时间（分钟）",
        "replica": "副本 {k}",
        "source": "数据：Mooncake 对话 trace，{n:,} 个请求；{k} 个副本，Kimi K3 TP8，每 GPU "
        "{gib:g} GiB 状态；事件为 SGLang 0.5.23 的格式",
    },
}
_REASON_COLORS = dict(
    zip(GAP_REASONS, (style.COLORS["hit"], style.SERIES[1], style.SERIES[2], style.SERIES[0]))
)


def compute(quick: bool = False) -> FleetStudy:
    """The whole trace (12,031 requests) or its first 600 for tests."""
    trace = bundled_trace("conversation").head(600 if quick else 12031)
    return fleet_study(
        trace,
        replicas=REPLICAS,
        router="state_aware",
        engine="sglang",
        state_budget_bytes=BUDGET_GIB * (1 << 30),
        bins=120,
    )


def _rates(ax, s: FleetStudy, t) -> None:  # noqa: ANN001
    x = np.arange(len(s.routers))
    for k, (key, color) in enumerate(
        (("state_hit_rate", style.COLORS["hit"]), ("expected_hit_rate", style.SERIES[0]))
    ):
        y = s.rates[:, SUMMARY_KEYS.index(key)]
        label = t["given"] if k == 0 else t["counted"]
        ax.bar(x + (k - 0.5) * 0.38, y, 0.38, color=color, label=label, gid=f"rate_{key}")
    ax.set_xticks(x, [t["routers"][r] for r in s.routers], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(t["rates"])
    ax.set_title(t["rates_title"], fontsize=9)
    ax.yaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")
    ax.legend(fontsize=7, frameon=False, loc="upper left")


def _over(ax, s: FleetStudy, t) -> None:  # noqa: ANN001
    kv = s.kv_only
    for code, reason in enumerate(GAP_REASONS):
        idx = np.flatnonzero((kv.reason == code) & (np.maximum(kv.expected, kv.cached) > 0))
        if len(idx):
            kw = {"s": 6, "alpha": 0.6, "color": _REASON_COLORS[reason], "gid": f"over_{reason}"}
            ax.scatter(
                kv.expected[idx] / 1e3, kv.cached[idx] / 1e3, label=t["reasons"][reason], **kw
            )
    top = max(float(kv.expected.max()), float(kv.cached.max()), 1.0) / 1e3
    ax.plot([0, top], [0, top], color=style.COLORS["neutral"], lw=0.8, ls=":")
    ax.set_title(t["over"].format(n=len(s.over)), fontsize=9)
    ax.set_xlabel(t["x_over"])
    ax.set_ylabel(t["y_over"])
    ax.legend(fontsize=6, frameon=False, loc="upper left", markerscale=2)


def _load(ax, s: FleetStudy, t) -> None:  # noqa: ANN001
    for k in range(s.replicas):
        kw = {"where": "post", "lw": 0.9, "color": style.SERIES[k], "gid": f"load_{k}"}
        ax.step(s.load_t / 60, s.load[:, k], label=t["replica"].format(k=k), **kw)
    ax.set_title(t["load"], fontsize=9)
    ax.set_xlabel(t["x_load"])
    ax.set_ylim(0, 1.6 * max(float(s.load.max()), 1.0))  # headroom for the legend
    ax.legend(fontsize=6, frameon=False, ncol=4, loc="upper center", columnspacing=0.8)


def make_figure(s: FleetStudy, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    src = t["source"].format(n=len(s.chosen.input_len), k=s.replicas, gib=BUDGET_GIB)
    fig = style.new_figure("grid", src)
    fig.suptitle(t["suptitle"])
    grid = fig.add_gridspec(2, 2)
    _rates(fig.add_subplot(grid[0, :]), s, t)
    _over(fig.add_subplot(grid[1, 0]), s, t)
    _load(fig.add_subplot(grid[1, 1]), s, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
