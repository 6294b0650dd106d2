"""prefix_replay's figures of one session: token timeline, radix tree, replay step, logit drift.

Pure: study views in, ``(plotly figure, CSV path)`` out; the CSV rows come from
``kda_core.studies.prefix_replay.tables``. The batch view's figures and the pools panel are in
``apps.figures.prefix_replay_batch``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.text.prefix_replay import count, settings_label
from apps.ui import COLORS, SERIES
from apps.ui.catalog import T as Lang
from kda_core.studies import prefix_replay as pr
from kda_core.studies import tree_layout

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
        x=cx, y=cy, mode="markers", name=t("l_ckpt"),
        marker={"symbol": "diamond", "size": 11, "color": COLORS["checkpoint"],
                "line": {"width": 1, "color": "black"}},
        hovertemplate=_hover(t("h_ckpt", x="%{x}")),
    )  # fmt: skip
    mx = [r.timeline.token_match for r in res.requests]
    fig.add_scatter(
        x=mx, y=rows, mode="markers", name=t("l_match"),
        marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": "black"}},
        hovertemplate=_hover(t("h_match", x="%{x}")),
    )  # fmt: skip
    fig.add_scatter(  # legend entry for the inspected request's darker, outlined bars
        x=[None], y=[None], mode="markers",
        name=t("l_inspected", row=rows[sel]),
        marker={"symbol": "square", "size": 12, "color": COLORS["neutral"],
                "line": {"width": 2, "color": "black"}},
        hoverinfo="skip",
    )  # fmt: skip
    tl = res.requests[sel].timeline
    if tl.restore_at == tl.token_match:  # one line, one label (no "restore 0match 0")
        key = "v_cold" if tl.token_match == 0 else "v_nothing"
        ui.vline(fig, tl.token_match, t(key, m=tl.token_match))
    else:
        ui.vline(fig, tl.restore_at, t("v_restore", a=tl.restore_at), xanchor="right")
        ui.vline(fig, tl.token_match, t("v_match", m=tl.token_match), xanchor="left")
    title = t("t_timeline", n=sel + 1, a=tl.restore_at, r=tl.token_match - tl.restore_at,
              p=tl.prompt_len - tl.token_match)  # fmt: skip
    ui.style(fig, title, t("x_tokens"), t("y_request"), height=150 + 42 * len(rows))
    fig.update_layout(barmode="overlay", bargap=0.35)
    fig.update_yaxes(
        type="category", autorange="reversed", categoryorder="array", categoryarray=rows
    )
    return fig, ui.write_csv(f"{NAME}-timeline", pr.timeline_table(res))


TREE_LABEL_PX = 6.5  # about one character of the 11 px label font
TREE_PLOT_PX = 720  # the plot area's width at the suite's 1280 px page (2/3 column)


def fig_tree(snap: pr.TreeSnapshot, title: str, t: Lang) -> tuple[go.Figure, str]:
    """The radix tree as a tree (``tree_layout.layout``): a point per node at the token where
    its span ends, elbow edges, branch points ringed; colour = checkpoint vs tombstone, a thick
    black outline = locked. Labels sit above each node's edge where they fit; hover has all."""
    lay = tree_layout.layout(snap.node_id, snap.parent, snap.end)
    fig = go.Figure()
    fig.add_scatter(
        x=list(lay.edge_x), y=list(lay.edge_y), mode="lines", name=t("l_edge"),
        line={"color": "#9aa3b2", "width": 1.5}, hoverinfo="skip",
    )  # fmt: skip
    locked = (snap.kv_lock > 0) | (snap.state_lock > 0)
    n = snap.node_id.size
    size = 13 if n <= 40 else 10
    custom = np.stack(
        [snap.node_id, snap.start, snap.end, snap.kv_lock, snap.state_lock, snap.kv_age,
         snap.state_age, snap.depth, lay.children], axis=1,
    )  # fmt: skip
    hover = _hover(
        t("h_node", id="%{customdata[0]}", label="%{hovertext}", a="%{customdata[1]}",
          b="%{customdata[2]}", d="%{customdata[7]}", c="%{customdata[8]}",
          kl="%{customdata[3]}", sl="%{customdata[4]}", ka="%{customdata[5]}",
          sa="%{customdata[6]}")
    )  # fmt: skip
    groups = (
        (t("l_root"), np.arange(n) == 0, "white"),
        (t("l_ckpt_node"), (np.arange(n) > 0) & snap.has_state, COLORS["checkpoint"]),
        (t("l_tomb"), (np.arange(n) > 0) & ~snap.has_state, COLORS["kv"]),
    )
    for name, mask, color in groups:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        fig.add_scatter(
            x=lay.x[idx], y=lay.lane[idx], mode="markers", name=name,
            marker={"color": color, "size": size, "symbol": "circle",
                    "line": {"color": "black", "width": [3 if locked[i] else 1 for i in idx]}},
            customdata=custom[idx], hovertext=[snap.label[i] for i in idx],
            hovertemplate=hover,
        )  # fmt: skip
    bp = np.flatnonzero(lay.branch)
    if bp.size:
        fig.add_scatter(
            x=lay.x[bp], y=lay.lane[bp], mode="markers", name=t("l_branch"),
            marker={"symbol": "circle-open", "size": size + 10, "color": "black",
                    "line": {"width": 1.5}},
            hovertemplate=_hover(t("h_branch", x="%{x}")),
        )  # fmt: skip
    fig.add_scatter(  # legend entry only: what a thick outline means
        x=[None], y=[None], mode="markers", name=t("l_locked"),
        marker={"symbol": "circle", "size": 12, "color": "white",
                "line": {"color": "black", "width": 3}},
        hoverinfo="skip",
    )  # fmt: skip
    span = _tree_labels(fig, snap, lay)
    lane_px = 34 if lay.n_lanes <= 12 else 22
    head = t(
        "t_tree",
        title=title,
        a=count("ckpt", snap.states, t),
        b=count("tomb", snap.tombstones, t),
        c=count("branch", int(lay.branch.sum()), t),
    )
    ui.style(fig, head, t("x_tokens"), t("y_branch"), height=200 + lane_px * lay.n_lanes)
    fig.update_xaxes(range=[-0.03 * span, span * 1.03])
    fig.update_yaxes(
        autorange=False, range=[lay.n_lanes - 0.4, -0.7], tickmode="array",
        tickvals=list(range(lay.n_lanes)), ticktext=[t("lane", r=r) for r in range(lay.n_lanes)],
        showgrid=False,
    )  # fmt: skip
    return fig, ui.write_csv(f"{NAME}-tree", pr.tree_table(snap))


def _tree_labels(fig: go.Figure, snap: pr.TreeSnapshot, lay: tree_layout.TreeLayout) -> float:
    """Node labels above each node's edge where they fit (about one character per 6.5 px at
    the page's plot width); returns the x span in tokens."""
    n = snap.node_id.size
    span = float(max(lay.x.max(), 1.0)) if n else 1.0
    px_per_token = TREE_PLOT_PX / span
    lx, ly, lt = [], [], []
    for i in range(1, n):
        room = (snap.end[i] - snap.start[i]) * px_per_token
        chars = int(room / TREE_LABEL_PX) - 1
        if chars >= 4 and lay.n_lanes <= 30:
            text = (
                snap.label[i] if len(snap.label[i]) <= chars else snap.label[i][: chars - 1] + "…"
            )
            lx.append((snap.start[i] + snap.end[i]) / 2)
            ly.append(lay.lane[i])
            lt.append(text)
    if lt:
        fig.add_scatter(
            x=lx, y=ly, mode="text", text=lt, textposition="top center",
            textfont={"size": 10, "color": "#374151"}, hoverinfo="skip", showlegend=False,
        )  # fmt: skip
    return span


_REPLAY_BASE: dict[tuple, tuple[pr.ReplaySteps, dict]] = {}
_REPLAY_BASE_MAX = 64


def _replay_base(replay_steps: pr.ReplaySteps, layer: int, head: int, delta: bool, t: Lang) -> dict:
    """The styled replay figure of one (replay steps, layer, head, view) as a dict, built once:
    a step only swaps the heatmap, the marker and the title (plotly's object model costs ~50 ms
    per styled figure, a dict -> Figure ~5 ms; the step budget is 150 ms)."""
    key = (id(replay_steps), layer, head, delta, t.code)
    hit = _REPLAY_BASE.get(key)
    if hit is not None and hit[0] is replay_steps:
        return hit[1]
    ref = replay_steps.states[:, layer, head]
    zmax = float(np.abs(ref - ref[-1] if delta else ref).max()) or 1.0
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.21,
        subplot_titles=(
            t("st_S", what=t("st_S_delta") if delta else t("st_S_state"), layer=layer, head=head),
            t("st_dist"),  # S_match vs uncached: in the step text below the figure
        ),
    )  # fmt: skip
    fig.add_heatmap(
        z=ref[0], zmin=-zmax, zmax=zmax, colorscale="RdBu_r", row=1, col=1,
        colorbar={"title": {"text": t("cb_value")}, "x": 0.345, "len": 0.8, "thickness": 10},
        hovertemplate=_hover(t("h_cell", y="%{y}", x="%{x}", z="%{z:.4f}")), showlegend=False,
    )  # fmt: skip
    fig.add_scatter(
        x=replay_steps.positions, y=replay_steps.dist, mode="lines+markers", row=1, col=2,
        name=t("l_dist"),
        line={"color": COLORS["replay"], "width": 2}, marker={"size": 5},
        customdata=np.array(replay_steps.token_text, dtype=object),
        hovertemplate=_hover(t("h_dist", x="%{x}", tok="%{customdata}", y="%{y:.3g}")),
    )  # fmt: skip
    fig.add_scatter(
        x=[0], y=[0.0], mode="markers", row=1, col=2, name=t("l_this_step"),
        marker={"size": 14, "color": "black", "line": {"width": 2, "color": "white"}},
        hovertemplate=_hover(t("h_this_step", x="%{x}", y="%{y:.3g}")),
    )  # fmt: skip
    ui.style(fig, t("t_replay_base"), "", "", height=430)
    ui.top_margin(fig, 56)  # room for the subplot titles
    fig.update_xaxes(title_text=t("x_value"), row=1, col=1, showline=False)
    fig.update_yaxes(title_text=t("y_key"), row=1, col=1, autorange="reversed", showline=False)
    fig.update_xaxes(title_text=t("x_tokens"), row=1, col=2)
    fig.update_yaxes(title_text=t("y_rel"), row=1, col=2, rangemode="tozero")
    base = fig.to_dict()
    if len(_REPLAY_BASE) >= _REPLAY_BASE_MAX:
        _REPLAY_BASE.pop(next(iter(_REPLAY_BASE)))
    _REPLAY_BASE[key] = (replay_steps, base)
    return base


def fig_replay(
    replay_steps: pr.ReplaySteps,
    step: int,
    layer: int,
    head: int,
    delta: bool,
    req: int,
    t: Lang,
) -> tuple[go.Figure, str]:
    """Heatmap of one (layer, head) state at ``step`` + the distance to the uncached state."""
    n = replay_steps.positions.size
    if n == 0:
        fig = ui.empty_figure(t("t_replay_none", n=req + 1), t("replay_none"))
        return fig, ui.write_csv(f"{NAME}-replay", {"position": [], "distance": []})
    S = pr.heatmap(replay_steps, step, layer, head, delta=delta)
    pos = int(replay_steps.positions[step])
    d = float(replay_steps.dist[step])
    tok = replay_steps.token_text[step] if replay_steps.tokens[step] >= 0 else "-"
    at = t("at_match") if step == n - 1 else t("at_before", n=n - 1 - step)
    base = _replay_base(replay_steps, layer, head, delta, t)
    data = [dict(t) for t in base["data"]]
    data[0]["z"] = S
    data[1]["x"], data[1]["y"] = (
        replay_steps.positions,
        replay_steps.dist,
    )  # arrays, not base64 (tests)
    data[2]["x"], data[2]["y"] = [pos], [d]
    layout = dict(base["layout"])
    layout["title"] = {
        **layout["title"],
        "text": t("t_replay", s=step, n=n - 1, pos=pos, tok=tok, at=at, d=d),
    }
    fig = go.Figure({"data": data, "layout": layout})
    table = pr.replay_table(replay_steps, step, layer, head, delta)
    return fig, ui.write_csv(f"{NAME}-replay", table)


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
        ("inconsistent", d.inconsistent,
         "arm_inconsistent8" if d.inconsistent_int8 else "arm_inconsistent"),
        ("int8", d.int8, "arm_int8"),
        ("exact", d.exact, "arm_exact"),
    ):  # fmt: skip
        fig.add_scatter(
            x=n, y=np.maximum(y, DRIFT_FLOOR), mode="lines+markers", name=t(key),
            line={"color": ARM_COLORS[arm], "width": 2},
            customdata=np.where(d.agree(arm), t("same"), t("different")),
            hovertemplate=_hover(t("h_drift", x="%{x}", y="%{y:.3g}", agree="%{customdata}")),
        )  # fmt: skip
    settings = settings_label(d.policy, d.spacing, d.checkpoint_slots, d.inconsistent_int8, t)
    title = t("t_drift", n=d.request + 1, k=d.same_tokens("inconsistent"), m=n.size,
              settings=settings, a=d.restore_at, b=d.token_match)  # fmt: skip
    ui.style(fig, title, t("x_generated"), t("y_drift"), height=420)
    ui.top_margin(fig, 14)
    ui.log_axis(fig, "y", DRIFT_TICKS, fmt=_drift_tick)
    top = float(np.log10(max(d.inconsistent.max(), d.int8.max(), 1.0)))
    fig.update_yaxes(range=[-17.5, top + 0.4])  # the floor and every curve in view
    return fig, ui.write_csv(f"{NAME}-drift", pr.drift_table(d))
