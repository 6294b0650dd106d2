"""Checkpoint density app: the plotly figures (what ``kda_core.studies.density`` returns)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.text.checkpoint_density import GIB
from apps.ui import COLORS, SERIES
from kda_core.studies import density as ds
from kda_core.studies import exports

NAME = "checkpoint_density"


def _budget_colors(n: int) -> list[str]:
    return [SERIES[i % len(SERIES)] for i in range(n)]


def _tradeoff_points(fig: go.Figure, s: ds.DensitySweep) -> None:
    """The simulated points per budget in the three panels, and each budget's optimum."""
    k = s.intervals
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        opt = int(s.optimum[j])
        panels = (
            (s.peak_state_bytes[:, j] / GIB, "peak state %{y:.2f} GiB"),
            (s.mean_replay_per_hit[:, j], "replay %{y:,.0f} tokens/hit"),
            (s.ttft_mean_s[:, j], "mean TTFT %{y:.3f} s"),
        )
        for row, (y, hover) in enumerate(panels, start=1):
            fig.add_scatter(
                x=k,
                y=y,
                name=f"budget {label}",
                legendgroup=label,
                showlegend=row == 1,
                mode="lines+markers",
                line={"color": color},
                hovertemplate=f"{label}<br>K=%{{x}}<br>{hover}<extra></extra>",
                row=row,
                col=1,
            )
        fig.add_scatter(
            x=[k[opt]],
            y=[s.ttft_mean_s[opt, j]],
            mode="markers",
            name=f"optimum at {label}: K={k[opt]:,}",
            legendgroup=label,
            marker={
                "symbol": "star",
                "size": 16,
                "color": color,
                "line": {"color": "black", "width": 1},
            },
            hovertemplate=f"optimum ({label})<br>K=%{{x}}<br>TTFT %{{y:.3f}} s<extra></extra>",
            row=3,
            col=1,
        )


def _tradeoff_analytic(fig: go.Figure, s: ds.DensitySweep) -> None:
    """The study's analytic memory and replay curves under the simulated points."""
    k = s.intervals
    a = s.analytic
    fig.add_scatter(
        x=k,
        y=a.state_bytes / GIB,
        name="analytic memory: distinct prefix / K",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dash"},
        hovertemplate="analytic memory<br>K=%{x:,}<br>%{y:.2f} GiB<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_scatter(
        x=k,
        y=a.replay_curve,
        name="analytic replay: ideal match − floor to K (KV kept for every token)",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dashdot"},
        hovertemplate="analytic replay<br>K=%{x:,}<br>%{y:,.0f} tokens/hit<extra></extra>",
        row=2,
        col=1,
    )


def fig_tradeoff(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    k = s.intervals
    a = s.analytic
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    _tradeoff_points(fig, s)
    _tradeoff_analytic(fig, s)
    top = float(max(np.nanmax(a.replay_curve), np.nanmax(s.mean_replay_per_hit), 1.0))
    note = ds.replay_note(s, detail=False).replace("\n", "<br>")  # one short line per curve
    title = f"{ds.headline(s)}<br><sup>{s.trace_name}, {s.model}</sup>"
    zh_title = f"{ds.headline(s, 'zh')}<br><sup>{s.trace_name}, {s.model}</sup>"
    zh_note = ds.replay_note(s, "zh", detail=False).replace("\n", "<br>")
    fig.update_layout(meta={"zh": {note: zh_note, title: zh_title}})
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
    ui.style(fig, title, "", "", height=780)
    for r in (1, 2, 3):
        ui.log_axis(fig, "x", k, row=r, col=1, fmt=lambda v: f"{v:,.0f}")
    fig.update_xaxes(title_text="checkpoint interval K (tokens, log scale)", row=3, col=1)
    fig.update_yaxes(title_text="peak state (GiB)", row=1, col=1)
    ui.log_axis(fig, "y", row=1, col=1)
    fig.update_yaxes(title_text="replay per hit (tokens)", range=[0, top * 1.9], row=2, col=1)
    fig.update_yaxes(title_text="mean TTFT (s)", row=3, col=1)
    fig.update_layout(margin={"b": 130, "t": 64})
    csv = ui.write_csv(f"{NAME}-sweep", exports.density_sweep_columns(s))
    return fig, csv


def fig_hit_rates(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    k = s.intervals
    fig = go.Figure()
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        fig.add_scatter(
            x=k,
            y=s.state_hit_rate[:, j],
            name=f"state hit, {label}",
            mode="lines+markers",
            line={"color": color, "width": 3},
            hovertemplate=f"{label}<br>K=%{{x}}<br>state hit %{{y:.1%}}<extra></extra>",
        )
        fig.add_scatter(
            x=k,
            y=s.token_hit_rate[:, j],
            name=f"token hit, {label}",
            mode="lines+markers",
            line={"color": color, "dash": "dash"},
            hovertemplate=f"{label}<br>K=%{{x}}<br>token hit %{{y:.1%}}<extra></extra>",
        )
    fig.add_scatter(
        x=k,
        y=s.analytic.state_hit_rate,
        name="analytic state hit (no budget)",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate="analytic<br>K=%{x}<br>%{y:.1%}<extra></extra>",
    )
    fig.add_hline(
        y=s.analytic.ideal_token_hit_rate,
        line={"color": COLORS["hit"], "width": 1},
        annotation_text=f"ideal token hit {s.analytic.ideal_token_hit_rate:.1%}",
        annotation_position="top left",
    )
    ui.style(
        fig,
        "A token hit is not a state hit",
        "checkpoint interval K (tokens, log scale)",
        "hit rate (share of input tokens)",
    )
    ui.log_axis(fig, "x", k, fmt=lambda v: f"{v:,.0f}")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    a = s.analytic
    csv = ui.write_csv(
        f"{NAME}-analytic",
        {
            "interval": k,
            "analytic_state_hit_rate": a.state_hit_rate,
            "analytic_replay_per_hit": a.replay_curve,
            "analytic_states": a.states,
            "analytic_state_bytes": a.state_bytes,
            "ideal_token_hit_rate": np.full(k.shape, a.ideal_token_hit_rate),
        },
    )
    return fig, csv


def fig_timeline(h: ds.HitTimeline, every: int, budget: str) -> tuple[go.Figure, str]:
    n = np.arange(1, h.arrival_s.size + 1)
    fig = go.Figure()
    fig.add_scatter(
        x=n,
        y=h.cum_token_hit_rate,
        name="token hit (KV could reuse)",
        line={"color": COLORS["hit"], "width": 2},
        hovertemplate="after %{x:,} requests<br>token hit %{y:.1%}<extra></extra>",
    )
    fig.add_scatter(
        x=n,
        y=h.cum_state_hit_rate,
        name="state hit (KDA can resume)",
        line={"color": COLORS["state"], "width": 2},
        fill="tonexty",
        fillcolor="rgba(148,103,189,0.25)",
        hovertemplate="after %{x:,} requests<br>state hit %{y:.1%}<extra></extra>",
    )
    ui.style(
        fig,
        f"Cumulative hit rates over the trace (interval {every:,}, budget {budget})"
        "; the shaded gap is replayed or re-prefilled",
        "requests served",
        "cumulative hit rate",
    )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-timeline",
        {
            "request": n,
            "arrival_s": h.arrival_s,
            "input_len": h.input_len,
            "token_match": h.token_match,
            "restore_at": h.restore_at,
            "cum_token_hit_rate": h.cum_token_hit_rate,
            "cum_state_hit_rate": h.cum_state_hit_rate,
            "state_bytes": h.state_bytes,
            "kv_bytes": h.kv_bytes,
        },
    )
    return fig, csv


def fig_pareto(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    fig = go.Figure()
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        fig.add_scatter(
            x=s.peak_state_bytes[:, j] / GIB,
            y=s.state_hit_rate[:, j],
            mode="markers+text",
            name=f"budget {label}",
            text=[f"K={v:,}" if p else "" for v, p in zip(s.intervals.tolist(), s.pareto[:, j])],
            customdata=s.intervals,
            textposition="top center",
            textfont={"size": 10},
            marker={
                "color": color,
                "size": 10,
                "symbol": ["diamond" if p else "circle" for p in s.pareto[:, j]],
            },
            hovertemplate=f"{label}<br>K=%{{customdata:,}}<br>peak state "
            "%{x:.2f} GiB<br>state hit %{y:.1%}<extra></extra>",
        )
    m = s.pareto.ravel()
    x = (s.peak_state_bytes / GIB).ravel()[m]
    y = s.state_hit_rate.ravel()[m]
    order = np.argsort(x)
    fig.add_scatter(
        x=x[order],
        y=y[order],
        mode="lines",
        name="Pareto frontier (◆)",
        line={"color": "black", "dash": "dash", "shape": "hv"},
        hovertemplate="frontier<br>%{x:.2f} GiB<br>%{y:.1%}<extra></extra>",
    )
    ui.style(
        fig,
        "Memory vs state hit: the Pareto frontier",
        "peak state memory (GiB per GPU, log scale)",
        "state hit rate",
    )
    ui.log_axis(fig, "x")
    fig.update_yaxes(tickformat=".0%")
    csv = ui.write_csv(f"{NAME}-pareto", exports.density_pareto_columns(s))
    return fig, csv


def fig_policies(p: ds.PolicySweep) -> tuple[go.Figure, str]:
    labels = list(p.labels)
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
    hover = (
        "%{x}<br>%{fullData.name}: %{y:.1%}<br>checkpoints %{customdata[0]:,}<br>replay "
        "%{customdata[1]:,.0f} tokens/hit<br>evictions %{customdata[2]:,}<br>TTFT p50 "
        "%{customdata[3]:.3f} s<br>peak state %{customdata[4]:.2f} GiB<extra></extra>"
    )
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=p.token_hit_rate[:, 0],
        name="token hit",
        marker_color=COLORS["hit"],
        customdata=extra,
        hovertemplate=hover,
    )
    fig.add_bar(
        x=labels,
        y=p.state_hit_rate[:, 0],
        name="state hit",
        marker_color=COLORS["state"],
        customdata=extra,
        hovertemplate=hover,
        text=[f"{v:.1%}" for v in p.state_hit_rate[:, 0]],
        textposition="outside",
    )
    fig.add_hline(
        y=p.ideal_token_hit_rate,
        line={"color": COLORS["neutral"], "dash": "dot"},
        annotation_text=f"ideal {p.ideal_token_hit_rate:.1%}",
        annotation_position="top right",
    )
    ui.style(
        fig,
        f"Policies at one budget ({p.budget_labels[0]} of state per GPU)",
        "checkpoint policy",
        "hit rate (share of input tokens)",
    )
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-policies",
        {
            "policy": labels,
            "token_hit_rate": p.token_hit_rate[:, 0],
            "state_hit_rate": p.state_hit_rate[:, 0],
            "mean_replay_per_hit": p.mean_replay_per_hit[:, 0],
            "checkpoints_stored": p.checkpoints_stored[:, 0],
            "evictions": p.evictions[:, 0],
            "peak_state_bytes": p.peak_state_bytes[:, 0],
            "ttft_p50_s": p.ttft_p50_s[:, 0],
            "ttft_p95_s": p.ttft_p95_s[:, 0],
        },
    )
    return fig, csv
