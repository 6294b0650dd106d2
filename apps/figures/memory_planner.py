"""memory_planner's figures: memory vs context, running requests vs ratio, strategies, live run.

Pure: a ``studies.planner.Plan`` (or the live run's ``batch_view.BatchView``) in,
``(plotly figure, CSV path)`` out; the CSV rows come from the studies.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl

NAME = "memory_planner"


def fig_context(p: pl.Plan) -> tuple[go.Figure, str]:
    x = p.context_lens
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=p.mla_bytes / sizing.MIB,
        name="MLA KV (grows per token)",
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate="context %{x:,} tokens<br>MLA KV %{y:,.1f} MiB<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=p.kda_bytes / sizing.MIB,
        name="KDA state + conv window (one slot, flat)",
        line={"color": COLORS["state"], "width": 3},
        hovertemplate="context %{x:,} tokens<br>KDA slot %{y:,.1f} MiB<extra></extra>",
    )
    ui.vline(
        fig,
        p.crossover_context,
        f"MLA > KDA from {p.crossover_context:,} tokens",
        log=True,
        xanchor="right",
    )
    ui.style(
        fig,
        f"One request's memory on one GPU vs context ({p.model}, TP{p.tp})",
        "context length (tokens, log scale)",
        "memory per request (MiB, log scale)",
    )
    ui.log_axis(fig, "x")
    ui.log_axis(fig, "y")
    fig.update_layout(margin={"t": 64})
    return fig, ui.write_csv(f"{NAME}-memory_vs_context", pl.context_table(p))


def fig_ratio(p: pl.Plan) -> tuple[go.Figure, str]:
    r = p.ratios
    fig = go.Figure()
    fig.add_scatter(
        x=r,
        y=p.running_by_state,
        name="limit from state slots",
        line={"color": COLORS["state"], "width": 3},
        hovertemplate="ratio %{x:.3f}<br>%{y:,} requests (state)<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.running_by_kv,
        name=f"limit from KV ({p.tokens_per_request:,} tokens/request)",
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate="ratio %{x:.3f}<br>%{y:,} requests (KV)<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.max_running_by_ratio,
        name="max running requests",
        line={"color": "black", "width": 1.5, "dash": "dash"},
        hovertemplate="ratio %{x:.3f}<br>max running %{y:,}<extra></extra>",
    )
    ui.vline(fig, p.balanced_ratio, f"balanced {p.balanced_ratio:.3g}", log=True)
    if p.ratios.min() <= p.ratio <= p.ratios.max():
        fig.add_scatter(
            x=[p.ratio],
            y=[p.max_running],
            mode="markers",
            name=f"this plan (ratio {p.ratio:g})",
            marker={"color": "black", "size": 11, "symbol": "diamond"},
            hovertemplate="this plan<br>ratio %{x:g}<br>max running %{y:,}<extra></extra>",
        )
    ui.style(
        fig,
        "Max running requests vs --mamba-full-memory-ratio",
        "mamba-full-memory-ratio (state : KV bytes, log scale)",
        "running requests",
    )
    ui.log_axis(fig, "x")
    fig.update_layout(margin={"t": 64})
    return fig, ui.write_csv(f"{NAME}-running_vs_ratio", pl.ratio_table(p))


def fig_strategies(p: pl.Plan) -> tuple[go.Figure, str]:
    names = list(p.strategy_names)
    valid = p.strategy_reserved >= 0
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=("state slots per request", f"max running from {p.state_slots:,} slots"),
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_reserved, 0),
        name="slots reserved / request",
        marker_color=SERIES[0],
        hovertemplate="%{x}<br>reserved %{y} slots<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_held, 0),
        name="slots held / request",
        marker_color=SERIES[1],
        hovertemplate="%{x}<br>held %{y} slots<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_max_running, 0),
        name="max running requests (state cap)",
        marker_color=COLORS["neutral"],
        text=[f"{v:,}" if ok else "n/a" for v, ok in zip(p.strategy_max_running, valid)],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="%{x}<br>max running %{y:,}<extra></extra>",
        row=1,
        col=2,
    )
    ui.style(fig, "Radix strategies: slots per request and the concurrency they allow", "", "")
    fig.update_layout(barmode="group", margin={"t": 80})
    fig.update_yaxes(title_text="slots per request", row=1, col=1)
    top = float(max(p.strategy_max_running.max(), 1))
    fig.update_yaxes(title_text="running requests", range=[0, top * 1.18], row=1, col=2)
    # short horizontal tick labels (two lines for the long name) so nothing overlaps the title
    ticks = [n.replace("_lazy", "<br>_lazy") for n in names]
    fig.update_xaxes(
        title_text="strategy",
        tickangle=0,
        tickmode="array",
        tickvals=names,
        ticktext=ticks,
        title_standoff=8,
    )
    return fig, ui.write_csv(f"{NAME}-strategies", pl.strategy_table(p))


def fig_live(v: bv.BatchView | None, strategy: str) -> tuple[go.Figure, str | None]:
    """Running requests per scheduler step of the live run vs the planner's max running."""
    if v is None:
        fig = ui.empty_figure(
            "Live run", f"no live run for {strategy}: the engine always keeps a radix cache"
        )
        fig.update_layout(height=220)
        return fig, None
    steps = np.arange(v.n_steps)
    fig = go.Figure()
    fig.add_bar(
        x=steps, y=v.running, name="what the live run admitted", marker_color=COLORS["state"],
        hovertemplate="step %{x}<br>%{y} running<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(
        x=[-0.5, v.n_steps - 0.5], y=[v.planner_max_running] * 2, mode="lines",
        name=f"the planner's max running requests ({v.planner_max_running})",
        line={"color": "black", "dash": "dash", "width": 2},
        hovertemplate=f"planner: {v.planner_max_running}<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        f"Live run on a scaled pool: {v.strategy}, {v.state_slots} state slots, "
        f"{len(v.prompts)} requests: peak {v.peak_running} running, planner "
        f"{v.planner_max_running}",
        "scheduler step",
        "running requests per step",
        height=320,
    )
    fig.update_yaxes(range=[0, max(v.planner_max_running, v.peak_running) + 1.5], dtick=1)
    return fig, ui.write_csv(f"{NAME}-live", bv.pool_table(v))
