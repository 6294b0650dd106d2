"""prefix_replay's concurrency figures: the batch swimlane, the state pool over time, the pools.

Pure: ``studies.batch_view.BatchView`` (several requests served together by
``Engine.serve``) and the session's ``ScenarioResult`` in, ``(plotly figure, CSV path)`` out;
the CSV rows come from the studies (``batch_view.phase_table`` / ``pool_table``,
``prefix_replay.pools_table``).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import batch_view as bv
from kda_core.studies import prefix_replay as pr

NAME = "prefix_replay"
# one colour and legend name per batch phase (PHASES order); waiting reads as "idle" grey
PHASE_LOOK: dict[str, tuple[str, str]] = {
    "not_arrived": ("#f1f3f6", "not arrived"),
    "waiting": (COLORS["free"], "waiting"),
    "prefill": (COLORS["prefill"], "prefill chunk"),
    "decode": (COLORS["decode"], "decode"),
    "retracted": (COLORS["state"], "retracted"),
    "finished": ("#e5e7eb", "finished"),
    "rejected": (SERIES[2], "rejected"),
}
POOL_KINDS = (
    ("slots_running", "slots held by running requests", COLORS["state"]),
    ("slots_cached", "cached checkpoints", COLORS["checkpoint"]),
    ("slots_free", "free slots", COLORS["free"]),
)
POOL_COUNTER_COLORS = (COLORS["checkpoint"], COLORS["hit"], SERIES[0], COLORS["neutral"])


def _runs(row: np.ndarray) -> list[tuple[int, int, int]]:
    """Contiguous runs (start, end, code) of one request's phase row (drawing only); an empty
    row (no scheduler step ran) has none."""
    if row.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(row)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [row.size]])
    return [(int(a), int(b), int(row[a])) for a, b in zip(starts, ends)]


def fig_batch_phases(v: bv.BatchView) -> tuple[go.Figure, str]:
    """One lane per request: its phase in each scheduler step, as contiguous bars."""
    fig = go.Figure()
    rows = [f"#{i + 1}" for i in range(len(v.prompts))]
    shown: set[str] = set()
    for i, prow in enumerate(v.phase):
        for a, b, code in _runs(prow):
            phase = bv.PHASES[code]
            color, name = PHASE_LOOK[phase]
            fig.add_bar(
                y=[rows[i]], x=[b - a], base=[a], orientation="h", name=name,
                legendgroup=phase, showlegend=phase not in shown,
                marker={"color": color, "line": {"width": 0.5, "color": "white"}},
                hovertemplate=f"request #{i + 1}<br>{name}: steps {a}-{b - 1}<extra></extra>",
            )  # fmt: skip
            shown.add(phase)
    if v.n_steps == 0:  # no step ran: every request was rejected at admission
        _rejected_at_admission(fig, v, rows)
    ui.style(
        fig,
        f"Batch: each request's phase per scheduler step ({len(rows)} requests, "
        f"{v.n_steps} steps, peak {v.peak_running} running)",
        "scheduler step",
        "request",
        height=170 + 30 * len(rows),
    )
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_yaxes(
        type="category", autorange="reversed", categoryorder="array", categoryarray=rows
    )
    fig.update_xaxes(range=[-0.5, max(v.n_steps, 1) + 0.5])
    return fig, ui.write_csv(f"{NAME}-batch-phases", bv.phase_table(v))


def _rejected_at_admission(fig: go.Figure, v: bv.BatchView, rows: list[str]) -> None:
    """One "rejected" cell per rejected request at step 0 (before any step could run)."""
    color, name = PHASE_LOOK["rejected"]
    for k, i in enumerate(sorted(v.rejected)):
        fig.add_bar(
            y=[rows[i]], x=[1], base=[0], orientation="h", name=name, legendgroup="rejected",
            showlegend=k == 0, marker={"color": color, "line": {"width": 0.5, "color": "white"}},
            hovertemplate=f"request #{i + 1}<br>{name} at admission<extra></extra>",
        )  # fmt: skip


def fig_batch_pool(v: bv.BatchView) -> tuple[go.Figure, str]:
    """Top: the one state pool by kind per step (stacked); bottom: running requests per step
    and the max running requests line (the cap, labelled when the state pool bites)."""
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.58, 0.42],
        subplot_titles=(f"state slots (pool size {v.state_slots})", "running requests"),
    )  # fmt: skip
    steps = np.arange(v.n_steps)
    for field, name, color in POOL_KINDS:
        fig.add_scatter(
            x=steps, y=getattr(v, field), name=name, stackgroup="pool", mode="lines",
            line={"color": color, "width": 0.5, "shape": "hv"}, fillcolor=color,
            hovertemplate=f"step %{{x}}<br>{name}: %{{y}}<extra></extra>", row=1, col=1,
        )  # fmt: skip
    fig.add_scatter(
        x=steps, y=v.running, name="running requests", mode="lines+markers",
        line={"color": "black", "width": 2, "shape": "hv"}, marker={"size": 5},
        hovertemplate="step %{x}<br>%{y} running<extra></extra>", row=2, col=1,
    )  # fmt: skip
    label = f"max running requests {v.max_running}"
    if v.capped:
        label += " (capped by the state pool)"
    fig.add_scatter(
        x=[steps[0] if steps.size else 0, steps[-1] if steps.size else 1],
        y=[v.max_running] * 2, mode="lines", name=label,
        line={"color": COLORS["state"], "dash": "dash", "width": 2},
        hovertemplate=f"{label}<extra></extra>", row=2, col=1,
    )  # fmt: skip
    ui.style(
        fig,
        f"One state pool over time: {v.strategy}, peak {v.peak_running} running "
        f"(max running requests {v.max_running})",
        "",
        "",
        height=480,
    )
    fig.update_layout(margin={"t": 72})
    if v.n_steps == 0:
        fig.add_annotation(
            text=f"no scheduler step ran: every request was rejected "
            f"(the pool stayed empty, {v.state_slots} free slots)",
            showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
        )  # fmt: skip
    fig.update_xaxes(title_text="scheduler step", row=2, col=1)
    fig.update_yaxes(title_text="state slots", range=[0, v.state_slots], row=1, col=1)
    top = max(v.max_running, v.peak_running, 1) + 1
    fig.update_yaxes(title_text="running requests", range=[0, top], dtick=1, row=2, col=1)
    return fig, ui.write_csv(f"{NAME}-batch-pool", bv.pool_table(v))


def fig_pools(
    res: pr.ScenarioResult, capped: bool, batch: bv.BatchView | None
) -> tuple[go.Figure, str]:
    """Left: cumulative pool counters after each request of the session (one at a time);
    ``capped`` draws the checkpoint pool capacity (the reader set a budget). Right: real
    concurrency from the batch run, the state pool by kind at its peak step."""
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.12,
        subplot_titles=("per request, one at a time", "the batch run at its peak step"),
    )  # fmt: skip
    x = [f"#{i + 1}" for i in range(len(res.requests))]
    for (label, field), color in zip(pr.POOL_COUNTERS, POOL_COUNTER_COLORS):
        fig.add_bar(
            x=x, y=[getattr(r.pools, field) for r in res.requests], name=label,
            marker_color=color, row=1, col=1,
            hovertemplate=f"after request %{{x}}<br>{label}: %{{y}}<extra></extra>",
        )  # fmt: skip
    if capped:
        cap = res.requests[-1].pools.checkpoint_capacity
        fig.add_hline(
            y=cap, line={"color": COLORS["checkpoint"], "dash": "dash"}, row=1, col=1,
            annotation_text=f"checkpoint pool capacity {cap}", annotation_position="top left",
        )  # fmt: skip
    title = "Pools after each request (cumulative) · real concurrency"
    ui.style(fig, title, "", "", height=400)
    _peak_bars(fig, batch)  # after style: it sets the right panel's own axis titles
    fig.update_layout(barmode="group", margin={"t": 72})
    fig.update_xaxes(type="category", title_text="request", row=1, col=1)
    fig.update_yaxes(title_text="count (slots / events)", row=1, col=1)
    return fig, ui.write_csv(f"{NAME}-pools", pr.pools_table(res))


def _peak_bars(fig: go.Figure, batch: bv.BatchView | None) -> None:
    """The state pool by kind at the batch run's peak step, stacked, with the peak running."""
    if batch is None or batch.peak_step < 0:
        fig.add_annotation(
            text="serve the batch below to see real concurrency" if batch is None
            else "the last batch ran no step: every request was rejected", showarrow=False,
            x=0.5, y=0.5, xref="x2 domain", yref="y2 domain",
        )  # fmt: skip
        fig.update_xaxes(visible=False, row=1, col=2)
        fig.update_yaxes(visible=False, row=1, col=2)
        return
    at = batch.slots_at(batch.peak_step)
    what = f"step {batch.peak_step}"  # a category (data); the axis title says what it holds
    for (field, name, color), n in zip(POOL_KINDS, at.values()):
        fig.add_bar(
            x=[what], y=[n], name=name, marker_color=color, legendgroup=field, row=1, col=2,
            hovertemplate=f"{name}: %{{y}} slots<extra></extra>", offsetgroup="peak",
        )  # fmt: skip
    fig.update_yaxes(
        title_text="state slots at the peak", range=[0, batch.state_slots], row=1, col=2
    )
    fig.update_xaxes(
        type="category", row=1, col=2, tickvals=[what], ticktext=[what],  # ticktext: translated
        title_text=f"{batch.peak_running} running / max {batch.max_running}",
    )  # fmt: skip
    _stack(fig)


def _stack(fig: go.Figure) -> None:
    """Stack the right panel's bars (the left panel stays grouped): cumulative bases."""
    base = 0
    for t in fig.data:
        if t.offsetgroup == "peak":
            t.base = [base]
            base += int(t.y[0])
