"""prefix_replay's concurrency figures: the batch swimlane, the state pool over time, the pools
panel.

Pure: ``studies.batch_view.BatchView`` (several requests served together by
``Engine.serve``) and the session's ``ScenarioResult`` in, ``(plotly figure, CSV path)`` out;
the CSV rows come from the studies (``exports.columns``).
The batch summary is ``batch_tables``, the two engine options' figures ``batch_options_view``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import batch_view as bv
from kda_core.studies import exports
from kda_core.studies import prefix_replay as pr
from words.catalog import T as Lang

NAME = "prefix_replay"
# one colour per batch phase (PHASES order; the legend name is the catalog's ``pk_<phase>``);
# waiting reads as "idle" grey
PHASE_COLOR: dict[str, str] = {
    "not_arrived": "#f1f3f6",
    "waiting": COLORS["free"],
    "waiting_memory": SERIES[3],  # the head of the queue: its memory did not fit
    "prefill": COLORS["prefill"],
    "decode": COLORS["decode"],
    "retracted": COLORS["state"],
    "finished": "#e5e7eb",
    "rejected": SERIES[2],
}
POOL_KINDS = (
    ("slots_running", COLORS["state"]),
    ("slots_cached", COLORS["checkpoint"]),
    ("slots_free", COLORS["free"]),
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


def _hover(text: str) -> str:
    return text + "<extra></extra>"


def fig_batch_phases(v: bv.BatchView, t: Lang) -> tuple[go.Figure, str]:
    """One lane per request: its phase in each scheduler step, as contiguous bars."""
    fig = go.Figure()
    rows = [f"#{i + 1}" for i in range(len(v.prompts))]
    shown: set[str] = set()
    for i, prow in enumerate(v.phase):
        for a, b, code in _runs(prow):
            phase = bv.PHASES[code]
            color, name = PHASE_COLOR[phase], t(f"pk_{phase}")
            fig.add_bar(
                y=[rows[i]],
                x=[b - a],
                base=[a],
                orientation="h",
                name=name,
                legendgroup=phase,
                showlegend=phase not in shown,
                marker={"color": color, "line": {"width": 0.5, "color": "white"}},
                hovertemplate=_hover(t("h_phase", n=i + 1, name=name, a=a, b=b - 1)),
            )
            shown.add(phase)
    if v.n_steps == 0:  # no step ran: every request was rejected at admission
        _rejected_at_admission(fig, v, rows, t)
    title = t("t_phases", n=len(rows), s=v.n_steps, p=v.peak_running)
    ui.style(fig, title, t("x_step"), t("y_request"), height=170 + 30 * len(rows))
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_yaxes(
        type="category", autorange="reversed", categoryorder="array", categoryarray=rows
    )
    fig.update_xaxes(range=[-0.5, max(v.n_steps, 1) + 0.5])
    return fig, ui.write_csv(f"{NAME}-batch-phases", exports.columns("batch_phases", v))


def _rejected_at_admission(fig: go.Figure, v: bv.BatchView, rows: list[str], t: Lang) -> None:
    """One "rejected" cell per rejected request at step 0 (before any step could run)."""
    color, name = PHASE_COLOR["rejected"], t("pk_rejected")
    for k, i in enumerate(sorted(v.rejected)):
        fig.add_bar(
            y=[rows[i]],
            x=[1],
            base=[0],
            orientation="h",
            name=name,
            legendgroup="rejected",
            showlegend=k == 0,
            marker={"color": color, "line": {"width": 0.5, "color": "white"}},
            hovertemplate=_hover(t("h_rejected0", n=i + 1, name=name)),
        )


def fig_batch_pool(v: bv.BatchView, t: Lang) -> tuple[go.Figure, str]:
    """Top: the one state pool by kind per step (stacked); bottom: running requests per step
    and the max running requests line (the cap, labelled when the state pool bites)."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        row_heights=[0.58, 0.42],
        subplot_titles=(t("st_pool", n=v.state_slots), t("st_running")),
    )
    steps = np.arange(v.n_steps)
    for field, color in POOL_KINDS:
        name = t(f"kind_{field}")
        fig.add_scatter(
            x=steps,
            y=getattr(v, field),
            name=name,
            stackgroup="pool",
            mode="lines",
            line={"color": color, "width": 0.5, "shape": "hv"},
            fillcolor=color,
            hovertemplate=_hover(t("h_pool", x="%{x}", name=name, y="%{y}")),
            row=1,
            col=1,
        )
    fig.add_scatter(
        x=steps,
        y=v.running,
        name=t("l_running"),
        mode="lines+markers",
        line={"color": "black", "width": 2, "shape": "hv"},
        marker={"size": 5},
        hovertemplate=_hover(t("h_running", x="%{x}", y="%{y}")),
        row=2,
        col=1,
    )
    label = t("l_cap_capped" if v.capped else "l_cap", n=v.max_running)
    fig.add_scatter(
        x=[steps[0] if steps.size else 0, steps[-1] if steps.size else 1],
        y=[v.max_running] * 2,
        mode="lines",
        name=label,
        line={"color": COLORS["state"], "dash": "dash", "width": 2},
        hovertemplate=_hover(label),
        row=2,
        col=1,
    )
    ui.style(fig, t("t_bpool", s=v.strategy, p=v.peak_running, m=v.max_running), "", "", height=480)
    ui.top_margin(fig, 42)
    if v.n_steps == 0:
        fig.add_annotation(
            text=t("no_step", n=v.state_slots),
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
    fig.update_xaxes(title_text=t("x_step"), row=2, col=1)
    fig.update_yaxes(title_text=t("y_slots"), range=[0, v.state_slots], row=1, col=1)
    top = max(v.max_running, v.peak_running, 1) + 1
    fig.update_yaxes(title_text=t("l_running"), range=[0, top], dtick=1, row=2, col=1)
    return fig, ui.write_csv(f"{NAME}-batch-pool", exports.columns("batch_pool", v))


def fig_pools(
    res: pr.ScenarioResult, capped: bool, batch: bv.BatchView | None, t: Lang
) -> tuple[go.Figure, str]:
    """Left: cumulative pool counters after each request of the session (one at a time);
    ``capped`` draws the checkpoint pool capacity (the reader set a budget). Right: real
    concurrency from the batch run, the state pool by kind at its peak step."""
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.12,
        subplot_titles=(t("st_per_request"), t("st_batch_peak")),
    )
    x = [f"#{i + 1}" for i in range(len(res.requests))]
    for (_, field), color in zip(pr.POOL_COUNTERS, POOL_COUNTER_COLORS):
        label = t(f"cnt_{field}")
        fig.add_bar(
            x=x,
            y=[getattr(r.pools, field) for r in res.requests],
            name=label,
            marker_color=color,
            row=1,
            col=1,
            hovertemplate=_hover(t("h_counter", x="%{x}", name=label, y="%{y}")),
        )
    if capped:
        cap = res.requests[-1].pools.checkpoint_capacity
        fig.add_hline(
            y=cap,
            line={"color": COLORS["checkpoint"], "dash": "dash"},
            row=1,
            col=1,
            annotation_text=t("cap", n=cap),
            annotation_position="top left",
        )
    ui.style(fig, t("t_pools"), "", "", height=400)
    _peak_bars(fig, batch, t)  # after style: it sets the right panel's own axis titles
    fig.update_layout(barmode="group")
    ui.top_margin(fig, 42)
    fig.update_xaxes(type="category", title_text=t("y_request"), row=1, col=1)
    fig.update_yaxes(title_text=t("y_count"), row=1, col=1)
    return fig, ui.write_csv(f"{NAME}-pools", exports.columns("replay_pools", res))


def _peak_bars(fig: go.Figure, batch: bv.BatchView | None, t: Lang) -> None:
    """The state pool by kind at the batch run's peak step, stacked, with the peak running."""
    if batch is None or batch.peak_step < 0:
        fig.add_annotation(
            text=t("serve_below") if batch is None else t("all_rejected_panel"),
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="x2 domain",
            yref="y2 domain",
        )
        fig.update_xaxes(visible=False, row=1, col=2)
        fig.update_yaxes(visible=False, row=1, col=2)
        return
    at = batch.slots_at(batch.peak_step)
    what = f"step {batch.peak_step}"  # a category (data); the tick text says it in the language
    for (field, color), n in zip(POOL_KINDS, at.values()):
        name = t(f"kind_{field}")
        fig.add_bar(
            x=[what],
            y=[n],
            name=name,
            marker_color=color,
            legendgroup=field,
            row=1,
            col=2,
            hovertemplate=_hover(t("h_kind", name=name, y="%{y}")),
            offsetgroup="peak",
        )
    fig.update_yaxes(title_text=t("y_peak_slots"), range=[0, batch.state_slots], row=1, col=2)
    fig.update_xaxes(
        type="category",
        row=1,
        col=2,
        tickvals=[what],
        ticktext=[t("step_n", n=batch.peak_step)],
        title_text=t("x_peak", run=batch.peak_running, cap=batch.max_running),
    )
    _stack(fig)


def _stack(fig: go.Figure) -> None:
    """Stack the right panel's bars (the left panel stays grouped): cumulative bases."""
    base = 0
    for t in fig.data:
        if t.offsetgroup == "peak":
            t.base = [base]
            base += int(t.y[0])
