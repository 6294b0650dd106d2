"""memory_planner's figures: memory vs context, running requests vs ratio, strategies, live run;
and the Plan button's outputs drawn (``draw_plan``, ``draw_check``).

Pure: a ``studies.planner.Plan`` (or the live run's ``batch_view.BatchView``) in,
``(plotly figure, CSV path)`` out; the CSV rows come from the studies.
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.memory_planner.tables import (
    engines_markdown,
    history_markdown,
    live_markdown,
    log_text,
    summary_markdown,
    vllm_log_text,
)
from apps.ui import COLORS, SERIES, guard
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import exports
from kda_core.studies import planner as pl
from words.catalog import T as Lang

NAME = "memory_planner"


def fig_context(p: pl.Plan, t: Lang) -> tuple[go.Figure, str]:
    x = p.context_lens
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=p.kv_bytes / sizing.MIB,
        name=t("l_mla"),
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate=t("h_mla", x="%{x:,}", y="%{y:,.1f}") + "<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=p.state_bytes / sizing.MIB,
        name=t("l_kda"),
        line={"color": COLORS["state"], "width": 3},
        hovertemplate=t("h_kda", x="%{x:,}", y="%{y:,.1f}") + "<extra></extra>",
    )
    ui.vline(
        fig,
        p.crossover_context,
        t("cross", n=p.crossover_context),
        log=True,
        xanchor="right",
    )
    ui.style(fig, t("t_context", model=p.model, tp=p.tp), t("x_context"), t("y_mib"))
    ui.log_axis(fig, "x")
    ui.log_axis(fig, "y")
    ui.top_margin(fig, 34)
    return fig, ui.write_csv(f"{NAME}-memory_vs_context", exports.columns("plan_memory", p))


def fig_ratio(p: pl.Plan, t: Lang) -> tuple[go.Figure, str]:
    r = p.ratios
    fig = go.Figure()
    fig.add_scatter(
        x=r,
        y=p.running_by_state,
        name=t("l_by_state"),
        line={"color": COLORS["state"], "width": 3},
        hovertemplate=t("h_by_state", x="%{x:.3f}", y="%{y:,}") + "<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.running_by_kv,
        name=t("l_by_kv", n=p.tokens_per_request),
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate=t("h_by_kv", x="%{x:.3f}", y="%{y:,}") + "<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.max_running_by_ratio,
        name=t("l_max"),
        line={"color": "black", "width": 1.5, "dash": "dash"},
        hovertemplate=t("h_max", x="%{x:.3f}", y="%{y:,}") + "<extra></extra>",
    )
    ui.vline(fig, p.balanced_ratio, t("balanced", r=p.balanced_ratio), log=True)
    if p.ratios.min() <= p.ratio <= p.ratios.max():
        fig.add_scatter(
            x=[p.ratio],
            y=[p.max_running],
            mode="markers",
            name=t("l_this", r=p.ratio),
            marker={"color": "black", "size": 11, "symbol": "diamond"},
            hovertemplate=t("h_this", x="%{x:g}", y="%{y:,}") + "<extra></extra>",
        )
    ui.style(fig, t("t_ratio"), t("x_ratio"), t("y_running"))
    ui.log_axis(fig, "x")
    ui.top_margin(fig, 34)
    return fig, ui.write_csv(f"{NAME}-running_vs_ratio", exports.columns("plan_ratio", p))


def fig_strategies(p: pl.Plan, t: Lang) -> tuple[go.Figure, str]:
    names = list(p.strategy_names)
    valid = p.strategy_reserved >= 0
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=(t("st_slots"), t("st_max", n=p.state_slots)),
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_reserved, 0),
        name=t("l_reserved"),
        marker_color=SERIES[0],
        hovertemplate=t("h_reserved", x="%{x}", y="%{y}") + "<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_held, 0),
        name=t("l_held"),
        marker_color=SERIES[1],
        hovertemplate=t("h_held", x="%{x}", y="%{y}") + "<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_max_running, 0),
        name=t("l_state_cap"),
        marker_color=COLORS["neutral"],
        text=[f"{v:,}" if ok else t("na") for v, ok in zip(p.strategy_max_running, valid)],
        textposition="outside",
        cliponaxis=False,
        hovertemplate=t("h_state_cap", x="%{x}", y="%{y:,}") + "<extra></extra>",
        row=1,
        col=2,
    )
    ui.style(fig, t("t_strategies"), "", "")
    fig.update_layout(barmode="group")
    ui.top_margin(fig, 50)
    fig.update_yaxes(title_text=t("y_slots"), row=1, col=1)
    top = float(max(p.strategy_max_running.max(), 1))
    fig.update_yaxes(title_text=t("y_running"), range=[0, top * 1.18], row=1, col=2)
    # short horizontal tick labels (two lines for the long name) so nothing overlaps the title
    ticks = [n.replace("_lazy", "<br>_lazy") for n in names]
    fig.update_xaxes(
        title_text=t("x_strategy"),
        tickangle=0,
        tickmode="array",
        tickvals=names,
        ticktext=ticks,
        title_standoff=8,
    )
    return fig, ui.write_csv(f"{NAME}-strategies", exports.columns("plan_strategies", p))


def fig_live(v: bv.BatchView | None, strategy: str, t: Lang) -> tuple[go.Figure, str | None]:
    """Running requests per scheduler step of the live run vs the planner's max running."""
    if v is None:
        fig = ui.empty_figure(t("t_live_none"), t("live_none_fig", s=strategy))
        fig.update_layout(height=220)
        return fig, None
    steps = np.arange(v.n_steps)
    fig = go.Figure()
    fig.add_bar(
        x=steps,
        y=v.running,
        name=t("l_admitted"),
        marker_color=COLORS["state"],
        hovertemplate=t("h_admitted", x="%{x}", y="%{y}") + "<extra></extra>",
    )
    cap = v.planner_max_running
    fig.add_scatter(
        x=[-0.5, v.n_steps - 0.5],
        y=[cap] * 2,
        mode="lines",
        name=t("l_planner", n=cap),
        line={"color": "black", "dash": "dash", "width": 2},
        hovertemplate=t("h_planner", n=cap) + "<extra></extra>",
    )
    n = len(v.prompts)
    title = t("t_live", s=v.strategy, slots=v.state_slots, n=n, peak=v.peak_running, plan=cap)
    ui.style(fig, title, t("x_step"), t("y_per_step"), height=320)
    fig.update_yaxes(range=[0, max(v.planner_max_running, v.peak_running) + 1.5], dtick=1)
    return fig, ui.write_csv(f"{NAME}-live", exports.columns("batch_pool", v))


def draw_plan(view: tuple, t: Lang) -> tuple:
    """Summary, log, three (figure, csv) pairs, the history table, the history, the live run
    (markdown, figure, csv), then SGLang and vLLM side by side and vLLM's log."""
    p, hist, live, v = view
    f1, c1 = fig_context(p, t)
    f2, c2 = fig_ratio(p, t)
    f3, c3 = fig_strategies(p, t)
    f4, c4 = fig_live(live, p.strategy, t)
    summary, live_md = summary_markdown(p, t), live_markdown(live, p, t)
    figs = (f1, c1, f2, c2, f3, c3, history_markdown(hist, t), hist, live_md, f4, c4)
    return summary, log_text(p), *figs, engines_markdown(p, v, t), vllm_log_text(v)


def draw_check(view: Exception | None, t: Lang) -> tuple:
    """Status, summary, log, three figures, live run (markdown, figure), engines, vLLM's log:
    the status by the Plan button; with a refusal, the right column says "not planned" and its
    figures, logs and live run are emptied (a plan that succeeds redraws them after)."""
    if view is None:
        return ("", *[gr.skip()] * 9)
    msg = t("not_planned", message=guard.message_of(view, t.code))
    keys = ("n_context", "n_ratio", "n_strategies", "n_live")
    f1, f2, f3, f4 = [ui.empty_figure(t(k), t("not_planned_fig")) for k in keys]
    return msg, msg, "", f1, f2, f3, "", f4, msg, ""
