"""prefix_replay's figures of one session: the token timeline, the radix tree, the logit drift.

Pure: study views in, ``(plotly figure, CSV path)`` out; the CSV rows come from
``kda_core.studies.prefix_replay``'s tables. The replay step's figure is ``replay_view``; the batch
view's figures and the pools panel are ``batch_view``.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.prefix_replay.tables import count, settings_label
from apps.ui import COLORS, SERIES
from kda_core.studies import exports, tree_layout
from kda_core.studies import prefix_replay as pr
from words.catalog import T as Lang

NAME = "prefix_replay"
PHASE_COLOR = {
    "restore": COLORS["hit"],
    "replay": COLORS["replay"],
    "prefill": COLORS["prefill"],
    "decode": COLORS["decode"],
}


def _hover(text: str) -> str:
    return text + "<extra></extra>"


def fig_timeline(res: pr.ScenarioResult, sel: int, t: Lang) -> tuple[go.Figure, str]:
    """One row per request: reused / replay / prefill / decode spans, checkpoints, match."""
    fig = go.Figure()
    rows = [f"#{i + 1}" for i in range(len(res.requests))]
    shown: set[str] = set()
    for i, r in enumerate(res.requests):
        for a, b, ph in r.timeline.segments:
            color, name = PHASE_COLOR[ph], t(f"ph_{ph}")
            fig.add_bar(
                y=[rows[i]],
                x=[b - a],
                base=[a],
                orientation="h",
                name=name,
                legendgroup=ph,
                showlegend=ph not in shown,
                marker={"color": color, "line": {"width": 2 if i == sel else 0, "color": "black"}},
                opacity=1.0 if i == sel else 0.55,
                hovertemplate=_hover(t("h_span", n=i + 1, ph=t(f"phs_{ph}"), a=a, b=b, k=b - a)),
            )
            shown.add(ph)
    cx = [p for r in res.requests for p in r.timeline.checkpoints]
    cy = [rows[i] for i, r in enumerate(res.requests) for _ in r.timeline.checkpoints]
    fig.add_scatter(
        x=cx,
        y=cy,
        mode="markers",
        name=t("l_ckpt"),
        marker={
            "symbol": "diamond",
            "size": 11,
            "color": COLORS["checkpoint"],
            "line": {"width": 1, "color": "black"},
        },
        hovertemplate=_hover(t("h_ckpt", x="%{x}")),
    )
    mx = [r.timeline.token_match for r in res.requests]
    fig.add_scatter(
        x=mx,
        y=rows,
        mode="markers",
        name=t("l_match"),
        marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": "black"}},
        hovertemplate=_hover(t("h_match", x="%{x}")),
    )
    fig.add_scatter(  # legend entry for the inspected request's darker, outlined bars
        x=[None],
        y=[None],
        mode="markers",
        name=t("l_inspected", row=rows[sel]),
        marker={
            "symbol": "square",
            "size": 12,
            "color": COLORS["neutral"],
            "line": {"width": 2, "color": "black"},
        },
        hoverinfo="skip",
    )
    tl = res.requests[sel].timeline
    if tl.restore_at == tl.token_match:  # one line, one label (no "restore 0match 0")
        key = "v_cold" if tl.token_match == 0 else "v_nothing"
        ui.vline(fig, tl.token_match, t(key, m=tl.token_match))
    else:
        ui.vline(fig, tl.restore_at, t("v_restore", a=tl.restore_at), xanchor="right")
        ui.vline(fig, tl.token_match, t("v_match", m=tl.token_match), xanchor="left")
    title = t(
        "t_timeline",
        n=sel + 1,
        a=tl.restore_at,
        r=tl.token_match - tl.restore_at,
        p=tl.prompt_len - tl.token_match,
    )
    ui.style(fig, title, t("x_tokens"), t("y_request"), height=150 + 42 * len(rows))
    fig.update_layout(barmode="overlay", bargap=0.35)
    fig.update_yaxes(
        type="category", autorange="reversed", categoryorder="array", categoryarray=rows
    )
    return fig, ui.write_csv(f"{NAME}-timeline", exports.columns("replay_timeline", res))


TREE_LABEL_PX = 6.5  # about one Latin character of the 10 px label font
TREE_WIDE_PX = 10.0  # one wide (CJK) character of that font
TREE_PLOT_PX = 680  # the plot area's width at a 1280 px page (2/3 column), a little under
TREE_X_PAD = 0.03  # the x axis runs from -3 % to 103 % of the span


# a node's hover: message h_node's placeholders -> the columns of its customdata
_NODE_COLUMNS = ("node_id", "start", "end", "kv_lock", "state_lock", "kv_age", "state_age")
_NODE_HOVER = {"id": 0, "a": 1, "b": 2, "kl": 3, "sl": 4, "ka": 5, "sa": 6, "d": 7, "c": 8}


def fig_tree(snap: pr.TreeSnapshot, title: str, t: Lang) -> tuple[go.Figure, str]:
    """The radix tree as a tree (``tree_layout.layout``): a point per node at the token where
    its span ends, elbow edges, branch points ringed; colour = checkpoint vs tombstone, a thick
    black outline = locked. Labels sit above each node's edge where they fit; hover has all."""
    lay = tree_layout.layout(snap.node_id, snap.parent, snap.end)
    fig = go.Figure()
    edges = {"color": "#9aa3b2", "width": 1.5}
    fig.add_scatter(
        x=list(lay.edge_x),
        y=list(lay.edge_y),
        mode="lines",
        name=t("l_edge"),
        line=edges,
        hoverinfo="skip",
    )
    _tree_nodes(fig, snap, lay, t)
    span = _tree_labels(fig, snap, lay)
    lane_px = 34 if lay.n_lanes <= 12 else 22
    counts = {
        "a": count("ckpt", snap.states, t),
        "b": count("tomb", snap.tombstones, t),
        "c": count("branch", int(lay.branch.sum()), t),
    }
    head = t("t_tree", title=title, **counts)
    ui.style(fig, head, t("x_tokens"), t("y_branch"), height=200 + lane_px * lay.n_lanes)
    fig.update_xaxes(range=[-TREE_X_PAD * span, span * (1 + TREE_X_PAD)])
    lanes = list(range(lay.n_lanes))
    ticks = [t("lane", r=r) for r in lanes]
    fig.update_yaxes(autorange=False, range=[lay.n_lanes - 0.4, -0.7], showgrid=False)
    fig.update_yaxes(tickmode="array", tickvals=lanes, ticktext=ticks)
    return fig, ui.write_csv(f"{NAME}-tree", exports.columns("replay_tree", snap))


def _tree_nodes(
    fig: go.Figure, snap: pr.TreeSnapshot, lay: tree_layout.TreeLayout, t: Lang
) -> None:
    """The root, checkpoint and tombstone nodes (a thick outline when locked), the branch
    points ringed, and a legend entry for what a thick outline means."""
    locked = (snap.kv_lock > 0) | (snap.state_lock > 0)
    n = snap.node_id.size
    size = 13 if n <= 40 else 10
    columns = [getattr(snap, c) for c in _NODE_COLUMNS]
    custom = np.stack([*columns, snap.depth, lay.children], axis=1)
    fields = {k: f"%{{customdata[{i}]}}" for k, i in _NODE_HOVER.items()}
    hover = _hover(t("h_node", label="%{hovertext}", **fields))
    inner = np.arange(n) > 0
    groups = (
        (t("l_root"), ~inner, "white"),
        (t("l_ckpt_node"), inner & snap.has_state, COLORS["checkpoint"]),
        (t("l_tomb"), inner & ~snap.has_state, COLORS["kv"]),
    )
    for name, mask, color in groups:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        outline = {"color": "black", "width": [3 if locked[i] else 1 for i in idx]}
        fig.add_scatter(
            x=lay.x[idx],
            y=lay.lane[idx],
            mode="markers",
            name=name,
            marker={"color": color, "size": size, "symbol": "circle", "line": outline},
            customdata=custom[idx],
            hovertext=[snap.label[i] for i in idx],
            hovertemplate=hover,
        )
    bp = np.flatnonzero(lay.branch)
    if bp.size:
        ring = {
            "symbol": "circle-open",
            "size": size + 10,
            "color": "black",
            "line": {"width": 1.5},
        }
        fig.add_scatter(
            x=lay.x[bp],
            y=lay.lane[bp],
            mode="markers",
            name=t("l_branch"),
            marker=ring,
            hovertemplate=_hover(t("h_branch", x="%{x}")),
        )
    thick = {
        "symbol": "circle",
        "size": 12,
        "color": "white",
        "line": {"color": "black", "width": 3},
    }
    fig.add_scatter(
        x=[None], y=[None], mode="markers", name=t("l_locked"), marker=thick, hoverinfo="skip"
    )


def _char_px(c: str) -> float:
    return TREE_WIDE_PX if unicodedata.east_asian_width(c) in "WF" else TREE_LABEL_PX


def _fit_label(label: str, room_px: float) -> str:
    """``label``, cut with "…" to ``room_px`` of the label font; "" when under 3 characters
    of it would show."""
    if sum(_char_px(c) for c in label) <= room_px:
        return label
    used, n = _char_px("…"), 0
    while n < len(label) and used + _char_px(label[n]) <= room_px:
        used += _char_px(label[n])
        n += 1
    return label[:n] + "…" if n >= 3 else ""


def _tree_labels(fig: go.Figure, snap: pr.TreeSnapshot, lay: tree_layout.TreeLayout) -> float:
    """Node labels above each node's edge where they fit between its two end markers (a
    branch point's ring is wider) at the page's plot width; returns the x span in tokens."""
    n = snap.node_id.size
    span = float(max(lay.x.max(), 1.0)) if n else 1.0
    px_per_token = TREE_PLOT_PX / (span * (1 + 2 * TREE_X_PAD))
    index = {int(v): i for i, v in enumerate(snap.node_id)}
    radius = (13 if n <= 40 else 10) / 2  # _tree_nodes' marker; the ring is 10 px wider
    lx, ly, lt = [], [], []
    for i in range(1, n):
        ends = (index[int(snap.parent[i])], i)
        clear = max(radius + 5 * bool(lay.branch[j]) for j in ends) + 3
        room = (snap.end[i] - snap.start[i]) * px_per_token - 2 * clear
        text = _fit_label(snap.label[i], room) if lay.n_lanes <= 30 else ""
        if text:
            lx.append((snap.start[i] + snap.end[i]) / 2)
            ly.append(lay.lane[i])
            lt.append(text)
    if lt:
        fig.add_scatter(
            x=lx,
            y=ly,
            mode="text",
            text=lt,
            textposition="top center",
            textfont={"size": 10, "color": "#374151"},
            hoverinfo="skip",
            showlegend=False,
        )
    return span


DRIFT_FLOOR = 1e-17  # exact restores differ by rounding only (~1e-15); keep zeros on a log axis
DRIFT_TICKS = (DRIFT_FLOOR, 1e-15, 1e-12, 1e-9, 1e-6, 1e-3, 1.0, 1e3)
ARM_COLORS = {arm: SERIES[i] for i, arm in enumerate(pr.ARMS)}  # categorical: SERIES in order


def _drift_tick(v: float) -> str:
    if v <= DRIFT_FLOOR:
        return "0"
    return "1" if v == 1 else f"10<sup>{round(np.log10(v))}</sup>"


def can_drift(t: pr.Timeline) -> bool:
    """An inconsistent restore differs from the exact one only when a checkpoint state was
    restored (restore > 0) short of the match (something to replay)."""
    return 0 < t.restore_at < t.token_match


def drifting(res: pr.ScenarioResult) -> tuple[int, ...]:
    """The requests whose restore differs from their match (the ones worth a drift view)."""
    return tuple(r.index for r in res.requests if can_drift(r.timeline))


def fig_no_drift(req: int, tl: pr.Timeline, candidates: tuple[int, ...], t: Lang) -> go.Figure:
    """Nothing can drift for this request: say why, and name the requests that can."""
    key = "why_at_match" if tl.restore_at == tl.token_match else "why_none"
    why = t(key, n=req + 1, m=tl.token_match)
    others = ", ".join(f"#{i + 1}" for i in candidates)
    pick = t("pick", others=others) if others else t("pick_none")
    fig = ui.empty_figure(t("t_drift_plain"), f"{why};<br>{pick}")
    fig.update_layout(height=200)
    return fig


def fig_drift(d: pr.DriftStudy, t: Lang) -> tuple[go.Figure, str]:
    n = np.arange(1, d.exact.size + 1)
    fig = go.Figure()
    for arm, y, key in (
        (
            "inconsistent",
            d.inconsistent,
            "arm_inconsistent8" if d.inconsistent_int8 else "arm_inconsistent",
        ),
        ("int8", d.int8, "arm_int8"),
        ("exact", d.exact, "arm_exact"),
    ):
        fig.add_scatter(
            x=n,
            y=np.maximum(y, DRIFT_FLOOR),
            mode="lines+markers",
            name=t(key),
            line={"color": ARM_COLORS[arm], "width": 2},
            customdata=np.where(d.agree(arm), t("same"), t("different")),
            hovertemplate=_hover(t("h_drift", x="%{x}", y="%{y:.3g}", agree="%{customdata}")),
        )
    settings = settings_label(d.policy, d.spacing, d.checkpoint_slots, d.inconsistent_int8, t)
    title = t(
        "t_drift",
        n=d.request + 1,
        k=d.same_tokens("inconsistent"),
        m=n.size,
        settings=settings,
        a=d.restore_at,
        b=d.token_match,
    )
    ui.style(fig, title, t("x_generated"), t("y_drift"), height=420)
    ui.top_margin(fig, 14)
    ui.log_axis(fig, "y", DRIFT_TICKS, fmt=_drift_tick)
    top = float(np.log10(max(d.inconsistent.max(), d.int8.max(), 1.0)))
    fig.update_yaxes(range=[-17.5, top + 0.4])  # the floor and every curve in view
    return fig, ui.write_csv(f"{NAME}-drift", exports.columns("replay_drift", d))
