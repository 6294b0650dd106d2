"""prefix_replay's batch view, its two engine options drawn per scheduler step.

Pure: ``studies.batch_view.BatchView`` in, ``(plotly figure, CSV path)`` out. ``fig_border``:
one byte buffer (``Engine(unified_memory=...)``), the state side from byte 0 up (slots of
running requests, then cached checkpoints), the free gap, the MLA KV from the top down, and the
steps where the head of the queue waited for the buffer. ``fig_graphs``: decode on captured
sizes (``Engine(cuda_graph_bs=...)``), the real batch and its padding per step, and the index
table (the state index of every row; padding rows on the sink, index 0). CSV rows come from
``exports.columns("batch_pool" | "batch_index", view)``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import batch_view as bv
from kda_core.studies import exports
from words.catalog import T as Lang

NAME = "prefix_replay"
SINK_COLOR = SERIES[2]  # the padding rows and the sink they write


def _hover(text: str) -> str:
    return text + "<extra></extra>"


def _placeholder(title: str, message: str) -> go.Figure:
    """The option is off: a short figure that says how to turn it on."""
    return ui.empty_figure(title, message).update_layout(height=160)


def fig_border(v: bv.BatchView, t: Lang) -> tuple[go.Figure, str | None]:
    """The buffer per step, bottom to top: running requests' slots, cached checkpoints, the
    free gap, the KV; the two frontiers as lines; x where the head waited for the buffer."""
    if v.border is None or v.buffer_bytes is None:
        return _placeholder(t("n_border"), t("empty_border")), None
    kib = 1024
    steps = np.arange(v.n_steps)
    state_end, kv_start = v.border[:, 0] / kib, v.border[:, 1] / kib
    running = v.slots_running * v.slot_bytes / kib
    layers = (
        ("kind_slots_running", running, COLORS["state"]),
        ("kind_slots_cached", state_end - running, COLORS["checkpoint"]),
        ("kind_free_gap", kv_start - state_end, COLORS["free"]),
        ("kind_kv", v.buffer_bytes / kib - kv_start, COLORS["kv"]),
    )
    fig = go.Figure()
    for key, y, color in layers:
        name = t(key)
        fig.add_scatter(
            x=steps,
            y=y,
            name=name,
            stackgroup="buffer",
            mode="lines",
            fillcolor=color,
            line={"color": color, "width": 0.5, "shape": "hv"},
            hovertemplate=_hover(t("h_bytes", x="%{x}", name=name, y="%{y:.0f}")),
        )
    for key, y, dash in (("l_state_end", state_end, "solid"), ("l_kv_start", kv_start, "dot")):
        name = t(key)
        fig.add_scatter(
            x=steps,
            y=y,
            name=name,
            mode="lines",
            line={"color": "black", "width": 1.5, "dash": dash, "shape": "hv"},
            hovertemplate=_hover(t("h_bytes", x="%{x}", name=name, y="%{y:.0f}")),
        )
    held = np.flatnonzero(v.held_for_memory >= 0)
    if held.size:
        mid = (state_end[held] + kv_start[held]) / 2
        fig.add_scatter(
            x=held,
            y=mid,
            name=t("l_held"),
            mode="markers",
            marker={"symbol": "x", "size": 9, "color": "black"},
            hovertext=[t("h_held", x=int(s), n=int(v.held_for_memory[s]) + 1) for s in held],
            hovertemplate=_hover("%{hovertext}"),
        )
    ui.style(fig, t("t_border", kib=v.buffer_bytes // kib), t("x_step"), t("y_kib"), height=440)
    fig.update_yaxes(range=[0, v.buffer_bytes / kib])
    return fig, ui.write_csv(f"{NAME}-batch-border", exports.columns("batch_pool", v))


def fig_graphs(v: bv.BatchView, t: Lang) -> tuple[go.Figure, str | None]:
    """Top: per step the real batch and its padding rows (all-decode steps) or the eager step.
    Bottom: the index table, one cell per row of the captured shape, its state index."""
    if v.graph_bs is None or v.graph_padded is None or v.graph_batch is None:
        return _placeholder(t("n_graphs"), t("empty_graphs")), None
    bs = v.graph_bs
    sizes = ", ".join(map(str, bs)) if len(bs) <= 6 else f"{bs[0]}, {bs[1]}, …, {bs[-1]}"
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        row_heights=[0.35, 0.65],
        subplot_titles=(t("st_padding"), t("st_index")),
    )
    steps = np.arange(v.n_steps)
    eager = np.where(v.graph_padded == 0, v.running, 0)
    bars = (
        ("kind_real", v.graph_batch, COLORS["decode"]),
        ("kind_pad", v.graph_padded - v.graph_batch, SINK_COLOR),
        ("kind_eager", eager, COLORS["free"]),
    )
    for key, y, color in bars:
        name = t(key)
        fig.add_bar(
            x=steps,
            y=y,
            name=name,
            marker_color=color,
            row=1,
            col=1,
            hovertemplate=_hover(t("h_batch", x="%{x}", name=name, y="%{y}")),
        )
    _index_cells(fig, v, t)
    ui.style(fig, t("t_graphs", sizes=sizes), "", "", height=520)
    fig.update_layout(barmode="stack", bargap=0.15)
    ui.top_margin(fig, 42)
    fig.update_xaxes(title_text=t("x_step"), row=2, col=1)
    fig.update_yaxes(title_text=t("y_rows"), dtick=max(1, v.graph_bs[-1] // 4), row=1, col=1)
    return fig, ui.write_csv(f"{NAME}-batch-graphs", exports.columns("batch_index", v))


def _index_cells(fig: go.Figure, v: bv.BatchView, t: Lang) -> None:
    """The index table as a heatmap: a request's row coloured as the real batch, a padding
    row as the sink, the state index written in the cell; no cell where the shape has no row."""
    idx, req = v.state_index, v.row_request
    assert idx is not None and req is not None
    width = idx.shape[1]
    kind = np.where(idx < 0, np.nan, np.where(req >= 0, 1.0, 0.0)).T  # [row, step]
    text = np.where(idx < 0, "", idx.astype(str)).T
    hover = [
        [_cell_hover(t, s, r, int(idx[s, r]), int(req[s, r])) for s in range(v.n_steps)]
        for r in range(width)
    ]
    fig.add_heatmap(
        x=np.arange(v.n_steps),
        y=np.arange(width),
        z=kind,
        text=text,
        texttemplate="%{text}",
        textfont={"size": 9},
        customdata=hover,
        hovertemplate=_hover("%{customdata}"),
        colorscale=[
            [0, SINK_COLOR],
            [0.5, SINK_COLOR],
            [0.5, COLORS["decode"]],
            [1, COLORS["decode"]],
        ],
        zmin=0,
        zmax=1,
        showscale=False,
        xgap=1,
        ygap=1,
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text=t("y_row"), autorange="reversed", dtick=1, row=2, col=1)


def _cell_hover(t: Lang, step: int, row: int, index: int, request: int) -> str:
    if index < 0:
        return ""
    if request < 0:
        return t("h_sink_row", x=step, r=row)
    return t("h_real_row", x=step, r=row, n=request + 1, i=index, s=index - 1)
