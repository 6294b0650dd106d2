"""checkpoint_density's plotly figures (what ``kda_core.studies.density`` returns), drawn in the
language of ``t``; each returns (figure, CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import density as ds
from kda_core.studies import exports
from words import phrases
from words.catalog import T as Lang

NAME = "checkpoint_density"
GIB = float(1 << 30)
_X = "K=%{x:,}"


def _budgets(s: ds.DensitySweep, t: Lang) -> list[tuple[str, str]]:
    """(label in ``t``'s language, colour) per budget of the sweep."""
    return [(t.word("budget", b), SERIES[i % len(SERIES)]) for i, b in enumerate(s.budget_labels)]


def _hover(text: str) -> str:
    return text + "<extra></extra>"


def _tradeoff_points(fig: go.Figure, s: ds.DensitySweep, t: Lang) -> None:
    """The simulated points per budget in the three panels, and each budget's optimum."""
    k = s.intervals
    for j, (label, color) in enumerate(_budgets(s, t)):
        opt = int(s.optimum[j])
        panels = (
            (s.peak_state_bytes[:, j] / GIB, t("h_peak", y="%{y:.2f}")),
            (s.mean_replay_per_hit[:, j], t("h_replay", y="%{y:,.0f}")),
            (s.ttft_mean_s[:, j], t("h_ttft", y="%{y:.3f}")),
        )
        for row, (y, hover) in enumerate(panels, start=1):
            fig.add_scatter(
                x=k,
                y=y,
                name=t("l_budget", b=label),
                legendgroup=label,
                showlegend=row == 1,
                mode="lines+markers",
                line={"color": color},
                row=row,
                col=1,
                hovertemplate=_hover(f"{label}<br>{_X}<br>{hover}"),
            )
        fig.add_scatter(
            x=[k[opt]],
            y=[s.ttft_mean_s[opt, j]],
            mode="markers",
            legendgroup=label,
            name=t("l_optimum", b=label, k=int(k[opt])),
            marker={
                "symbol": "star",
                "size": 16,
                "color": color,
                "line": {"color": "black", "width": 1},
            },
            hovertemplate=_hover(t("h_optimum", b=label, x="%{x:,}", y="%{y:.3f}")),
            row=3,
            col=1,
        )


def _tradeoff_analytic(fig: go.Figure, s: ds.DensitySweep, t: Lang) -> None:
    """The study's analytic memory and replay curves under the simulated points."""
    k, a = s.intervals, s.analytic
    fig.add_scatter(
        x=k,
        y=a.state_bytes / GIB,
        name=t("l_an_mem"),
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dash"},
        row=1,
        col=1,
        hovertemplate=_hover(t("h_an_mem", x="%{x:,}", y="%{y:.2f}")),
    )
    fig.add_scatter(
        x=k,
        y=a.replay_curve,
        name=t("l_an_rep"),
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dashdot"},
        row=2,
        col=1,
        hovertemplate=_hover(t("h_an_rep", x="%{x:,}", y="%{y:,.0f}")),
    )


def fig_tradeoff(s: ds.DensitySweep, t: Lang) -> tuple[go.Figure, str]:
    k, a = s.intervals, s.analytic
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    _tradeoff_points(fig, s, t)
    _tradeoff_analytic(fig, s, t)
    top = float(max(np.nanmax(a.replay_curve), np.nanmax(s.mean_replay_per_hit), 1.0))
    notes = ds.replay_notes(s)
    note = phrases.replay_note(notes, t, detail=False).replace("\n", "<br>")  # one per curve
    fig.add_annotation(
        text=note,
        xref="x2 domain",
        yref="y2 domain",
        x=0.01,
        y=0.98,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        font={"size": 10, "color": "#333"},
        bgcolor="rgba(255,255,255,0.85)",
        bordercolor="#ccc",
        borderwidth=1,
    )
    title = f"{phrases.headline(notes, t)}<br><sup>{s.trace_name}, {s.model}</sup>"
    ui.style(fig, title, "", "", height=780)
    for r in (1, 2, 3):
        ui.log_axis(fig, "x", k, row=r, col=1, fmt=lambda v: f"{v:,.0f}")
    fig.update_xaxes(title_text=t("x_interval_log"), row=3, col=1)
    fig.update_yaxes(title_text=t("y_peak"), row=1, col=1)
    ui.log_axis(fig, "y", row=1, col=1)
    fig.update_yaxes(title_text=t("y_replay"), range=[0, top * 1.9], row=2, col=1)
    fig.update_yaxes(title_text=t("y_ttft"), row=3, col=1)
    fig.update_layout(margin={"b": 130})
    ui.top_margin(fig, 34)
    return fig, ui.write_csv(f"{NAME}-sweep", exports.columns("density_sweep", s))


def fig_hit_rates(s: ds.DensitySweep, t: Lang) -> tuple[go.Figure, str]:
    k = s.intervals
    fig = go.Figure()
    for j, (label, color) in enumerate(_budgets(s, t)):
        fig.add_scatter(
            x=k,
            y=s.state_hit_rate[:, j],
            name=t("l_state_hit", b=label),
            mode="lines+markers",
            line={"color": color, "width": 3},
            hovertemplate=_hover(t("h_state_hit", b=label, x="%{x}", y="%{y:.1%}")),
        )
        fig.add_scatter(
            x=k,
            y=s.token_hit_rate[:, j],
            name=t("l_token_hit", b=label),
            mode="lines+markers",
            line={"color": color, "dash": "dash"},
            hovertemplate=_hover(t("h_token_hit", b=label, x="%{x}", y="%{y:.1%}")),
        )
    a = s.analytic
    fig.add_scatter(
        x=k,
        y=a.state_hit_rate,
        name=t("l_an_hit"),
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate=_hover(t("h_an_hit", x="%{x}", y="%{y:.1%}")),
    )
    fig.add_hline(
        y=a.ideal_token_hit_rate,
        line={"color": COLORS["hit"], "width": 1},
        annotation_text=t("ideal_hit", r=a.ideal_token_hit_rate),
        annotation_position="top left",
    )
    ui.style(fig, t("t_hits"), t("x_interval_log"), t("y_hit"))
    ui.log_axis(fig, "x", k, fmt=lambda v: f"{v:,.0f}")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    cols = {
        "interval": k,
        "analytic_state_hit_rate": a.state_hit_rate,
        "analytic_replay_per_hit": a.replay_curve,
        "analytic_states": a.states,
        "analytic_state_bytes": a.state_bytes,
        "ideal_token_hit_rate": np.full(k.shape, a.ideal_token_hit_rate),
    }
    return fig, ui.write_csv(f"{NAME}-analytic", cols)


def fig_timeline(h: ds.HitTimeline, every: int, budget_gib: float, t: Lang) -> tuple:
    n = np.arange(1, h.arrival_s.size + 1)
    fig = go.Figure()
    fig.add_scatter(
        x=n,
        y=h.cum_token_hit_rate,
        name=t("l_cum_token"),
        line={"color": COLORS["hit"], "width": 2},
        hovertemplate=_hover(t("h_cum_token", x="%{x:,}", y="%{y:.1%}")),
    )
    fig.add_scatter(
        x=n,
        y=h.cum_state_hit_rate,
        name=t("l_cum_state"),
        line={"color": COLORS["state"], "width": 2},
        fill="tonexty",
        fillcolor="rgba(148,103,189,0.25)",
        hovertemplate=_hover(t("h_cum_state", x="%{x:,}", y="%{y:.1%}")),
    )
    title = t("t_timeline", every=every, b=f"{budget_gib:g} GiB")
    ui.style(fig, title, t("x_served"), t("y_cum"))
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    cols = {
        "request": n,
        "arrival_s": h.arrival_s,
        "input_len": h.input_len,
        "token_match": h.token_match,
        "restore_at": h.restore_at,
        "cum_token_hit_rate": h.cum_token_hit_rate,
        "cum_state_hit_rate": h.cum_state_hit_rate,
        "state_bytes": h.state_bytes,
        "kv_bytes": h.kv_bytes,
    }
    return fig, ui.write_csv(f"{NAME}-timeline", cols)


def fig_pareto(s: ds.DensitySweep, t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    for j, (label, color) in enumerate(_budgets(s, t)):
        front = s.pareto[:, j]
        fig.add_scatter(
            x=s.peak_state_bytes[:, j] / GIB,
            y=s.state_hit_rate[:, j],
            mode="markers+text",
            name=t("l_budget", b=label),
            text=[f"K={v:,}" if p else "" for v, p in zip(s.intervals.tolist(), front)],
            customdata=s.intervals,
            textposition="top center",
            textfont={"size": 10},
            marker={
                "color": color,
                "size": 10,
                "symbol": ["diamond" if p else "circle" for p in front],
            },
            hovertemplate=_hover(
                t("h_pareto", b=label, k="%{customdata:,}", x="%{x:.2f}", y="%{y:.1%}")
            ),
        )
    m = s.pareto.ravel()
    x = (s.peak_state_bytes / GIB).ravel()[m]
    y = s.state_hit_rate.ravel()[m]
    order = np.argsort(x)
    fig.add_scatter(
        x=x[order],
        y=y[order],
        mode="lines",
        name=t("l_frontier"),
        line={"color": "black", "dash": "dash", "shape": "hv"},
        hovertemplate=_hover(t("h_frontier", x="%{x:.2f}", y="%{y:.1%}")),
    )
    ui.style(fig, t("t_pareto"), t("x_peak_log"), t("y_state_hit"))
    ui.log_axis(fig, "x")
    fig.update_yaxes(tickformat=".0%")
    return fig, ui.write_csv(f"{NAME}-pareto", exports.columns("density_pareto", s))


def fig_policies(p: ds.PolicySweep, t: Lang) -> tuple[go.Figure, str]:
    labels = [t(f"pol_{lab}") for lab in p.labels]
    extra = np.stack(
        [
            p.checkpoints_stored[:, 0],
            p.mean_replay_per_hit[:, 0],
            p.evictions[:, 0],
            p.ttft_p50_s[:, 0],
            p.peak_state_bytes[:, 0] / GIB,
        ],
        axis=1,
    )
    hover = _hover(
        t(
            "h_policy",
            x="%{x}",
            name="%{fullData.name}",
            y="%{y:.1%}",
            c="%{customdata[0]:,}",
            r="%{customdata[1]:,.0f}",
            e="%{customdata[2]:,}",
            t="%{customdata[3]:.3f}",
            p="%{customdata[4]:.2f}",
        )
    )
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=p.token_hit_rate[:, 0],
        name=t("l_token"),
        marker_color=COLORS["hit"],
        customdata=extra,
        hovertemplate=hover,
    )
    fig.add_bar(
        x=labels,
        y=p.state_hit_rate[:, 0],
        name=t("l_state"),
        marker_color=COLORS["state"],
        customdata=extra,
        hovertemplate=hover,
        textposition="outside",
        text=[f"{v:.1%}" for v in p.state_hit_rate[:, 0]],
    )
    fig.add_hline(
        y=p.ideal_token_hit_rate,
        line={"color": COLORS["neutral"], "dash": "dot"},
        annotation_text=t("ideal", r=p.ideal_token_hit_rate),
        annotation_position="top right",
    )
    title = t("t_policies", b=t.word("budget", p.budget_labels[0]))
    ui.style(fig, title, t("x_policy"), t("y_hit"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    cols = {
        "policy": list(p.labels),
        "token_hit_rate": p.token_hit_rate[:, 0],
        "state_hit_rate": p.state_hit_rate[:, 0],
        "mean_replay_per_hit": p.mean_replay_per_hit[:, 0],
        "checkpoints_stored": p.checkpoints_stored[:, 0],
        "evictions": p.evictions[:, 0],
        "peak_state_bytes": p.peak_state_bytes[:, 0],
        "ttft_p50_s": p.ttft_p50_s[:, 0],
        "ttft_p95_s": p.ttft_p95_s[:, 0],
    }
    return fig, ui.write_csv(f"{NAME}-policies", cols)
