"""fleet_routing's plotly figures of ``kda_core.studies.fleet`` (each returns the figure
and its CSV path), in the language of ``t``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.fleet_routing.tables import engine_name, reason_name, router_name
from apps.ui import COLORS, SERIES
from kda_core.fleet import GAP_REASONS
from kda_core.studies.fleet import SUMMARY_KEYS, FleetStudy
from words.catalog import T as Lang

NAME = "fleet_routing"
RATES = (  # (summary key, legend key, colour)
    ("state_hit_rate", "l_given", COLORS["hit"]),
    ("expected_hit_rate", "l_counted", SERIES[0]),
    ("token_hit_rate", "l_kv", COLORS["neutral"]),
    ("best_hit_rate", "l_best", SERIES[3]),
)
REASON_COLORS = dict(zip(GAP_REASONS, (COLORS["hit"], SERIES[1], SERIES[2], SERIES[0])))
MAX_POINTS = 3000  # the scatter's largest gaps (the CSV has them all)


def fig_rates(s: FleetStudy, t: Lang) -> tuple[go.Figure, str]:
    """Per router: what the replicas gave, what the router counted, the KV prefix held and the
    best replica, as grouped bars."""
    names = [router_name(r, t) for r in s.routers]
    fig = go.Figure()
    for key, label, color in RATES:
        y = s.rates[:, SUMMARY_KEYS.index(key)]
        fig.add_bar(
            x=names,
            y=y,
            name=t(label),
            marker_color=color,
            hovertemplate=t("h_rate", router="%{x}", what=t(label), y="%{y:.1%}")
            + "<extra></extra>",
        )
    n = len(s.chosen.input_len)
    title = t("t_rates", n=n, k=s.replicas, engine=engine_name(s.engine, t))
    ui.style(fig, title, "", t("y_rate"), height=420)
    fig.update_layout(barmode="group", margin={"b": 130})
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-hit-rates",
        {"router": list(s.routers), **{k: s.rates[:, j] for j, k in enumerate(SUMMARY_KEYS)}},
    )
    return fig, csv


def fig_load(s: FleetStudy, t: Lang) -> tuple[go.Figure, str]:
    """In-flight requests per replica over the trace's time, for the chosen router."""
    fig = go.Figure()
    for k in range(s.replicas):
        fig.add_scatter(
            x=s.load_t,
            y=s.load[:, k],
            name=t("l_replica", k=k),
            mode="lines",
            line={"color": SERIES[k % len(SERIES)], "width": 1.6, "shape": "hv"},
            hovertemplate=t("h_load", k=k, x="%{x:.0f}", y="%{y}") + "<extra></extra>",
        )
    title = t("t_load", router=router_name(s.chosen.router, t))
    ui.style(fig, title, t("x_time"), t("y_load"), height=380)
    fig.update_yaxes(rangemode="tozero")
    cols = {f"replica_{k}_in_flight": s.load[:, k] for k in range(s.replicas)}
    return fig, ui.write_csv(f"{NAME}-load", {"time_s": s.load_t, **cols})


def fig_over(s: FleetStudy, t: Lang) -> tuple[go.Figure, str]:
    """The KV-only router's requests: tokens it counted against tokens the replica restored,
    coloured by why they differ (the over-promised ones below the diagonal)."""
    kv = s.kv_only
    show = np.union1d(s.over[:MAX_POINTS], np.flatnonzero(kv.expected > 0)[:MAX_POINTS])
    fig = go.Figure()
    for code, reason in enumerate(GAP_REASONS):
        idx = show[kv.reason[show] == code]
        if not len(idx):
            continue
        label = reason_name(reason, t)
        fig.add_scatter(
            x=kv.expected[idx],
            y=kv.cached[idx],
            mode="markers",
            name=label,
            marker={"color": REASON_COLORS[reason], "size": 6, "opacity": 0.7},
            customdata=idx,
            hovertemplate=t("h_over", i="%{customdata}", x="%{x}", y="%{y}", reason=label)
            + "<extra></extra>",
        )
    top = float(max(kv.expected.max(initial=0), kv.cached.max(initial=0), 1))
    diag = {"color": COLORS["neutral"], "dash": "dot", "width": 1}
    fig.add_scatter(x=[0, top], y=[0, top], mode="lines", name=t("l_diag"), line=diag)
    ui.style(fig, t("t_over", n=len(s.over)), t("x_counted"), t("y_given"), height=420)
    csv = ui.write_csv(
        f"{NAME}-over-promised",
        {
            "request": s.over,
            "replica": kv.replica[s.over],
            "counted_tokens": kv.expected[s.over],
            "restored_tokens": kv.cached[s.over],
            "kv_prefix_tokens": kv.token_match[s.over],
            "reason": [GAP_REASONS[c] for c in kv.reason[s.over]],
        },
    )
    return fig, csv


__all__ = ["NAME", "fig_load", "fig_over", "fig_rates"]
