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
from words.catalog import T
from words.fleet_routing import MSG

NAME = "fleet_routing"
REPLICAS = 4
BUDGET_GIB = 4.0

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


_RATES = (  # (summary key, the page's legend key, colour)
    ("state_hit_rate", "l_given", style.COLORS["hit"]),
    ("expected_hit_rate", "l_counted", style.SERIES[0]),
)


def _rates(ax, s: FleetStudy, t: T) -> None:  # noqa: ANN001
    x = np.arange(len(s.routers))
    for k, (key, label, color) in enumerate(_RATES):
        y = s.rates[:, SUMMARY_KEYS.index(key)]
        ax.bar(x + (k - 0.5) * 0.38, y, 0.38, color=color, label=t(label), gid=f"rate_{key}")
    names = [t.word("r", r) for r in s.routers]
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(t("y_rate"))
    ax.set_title(t("fig_rates"), fontsize=9)
    ax.yaxis.set_major_formatter(lambda v, _p: f"{v:.0%}")
    ax.legend(fontsize=7, frameon=False, loc="upper left")


def _over(ax, s: FleetStudy, t: T) -> None:  # noqa: ANN001
    kv = s.kv_only
    for code, reason in enumerate(GAP_REASONS):
        idx = np.flatnonzero((kv.reason == code) & (np.maximum(kv.expected, kv.cached) > 0))
        if len(idx):
            kw = {"s": 6, "alpha": 0.6, "color": _REASON_COLORS[reason], "gid": f"over_{reason}"}
            ax.scatter(
                kv.expected[idx] / 1e3, kv.cached[idx] / 1e3, label=t.word("g", reason), **kw
            )
    top = max(float(kv.expected.max()), float(kv.cached.max()), 1.0) / 1e3
    ax.plot([0, top], [0, top], color=style.COLORS["neutral"], lw=0.8, ls=":")
    ax.set_title(t("fig_over", n=len(s.over)), fontsize=9)
    ax.set_xlabel(t("fig_x_over"))
    ax.set_ylabel(t("fig_y_over"))
    ax.legend(fontsize=6, frameon=False, loc="upper left", markerscale=2)


def _load(ax, s: FleetStudy, t: T) -> None:  # noqa: ANN001
    for k in range(s.replicas):
        kw = {"where": "post", "lw": 0.9, "color": style.SERIES[k], "gid": f"load_{k}"}
        ax.step(s.load_t / 60, s.load[:, k], label=t("l_replica", k=k), **kw)
    ax.set_title(t("fig_load"), fontsize=9)
    ax.set_xlabel(t("fig_x_load"))
    ax.set_ylim(0, 1.6 * max(float(s.load.max()), 1.0))  # headroom for the legend
    ax.legend(fontsize=6, frameon=False, ncol=4, loc="upper center", columnspacing=0.8)


def make_figure(s: FleetStudy, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    src = t("fig_source", n=len(s.chosen.input_len), k=s.replicas, gib=BUDGET_GIB)
    fig = style.new_figure("grid", src)
    fig.suptitle(t("fig_suptitle"))
    grid = fig.add_gridspec(2, 2)
    _rates(fig.add_subplot(grid[0, :]), s, t)
    _over(fig.add_subplot(grid[1, 0]), s, t)
    _load(fig.add_subplot(grid[1, 1]), s, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
