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
from apps.text.prefix_replay import _n, settings_label
from apps.ui import COLORS, SERIES
from kda_core.studies import prefix_replay as pr
from kda_core.studies import tree_layout

NAME = "prefix_replay"
PHASE_STYLE = {
    "restore": (COLORS["hit"], "reused: KV + state from the checkpoint"),
    "replay": (COLORS["replay"], "replayed: KV cached, state recomputed"),
    "prefill": (COLORS["prefill"], "fresh prefill (no token match)"),
    "decode": (COLORS["decode"], "decode (generated tokens)"),
}


def fig_timeline(res: pr.ScenarioResult, sel: int) -> tuple[go.Figure, str]:
    """One row per request: reused / replay / prefill / decode spans, checkpoints, match."""
    fig = go.Figure()
    rows = [f"#{i + 1}" for i in range(len(res.requests))]
    shown: set[str] = set()
    for i, r in enumerate(res.requests):
        for a, b, ph in r.timeline.segments:
            color, name = PHASE_STYLE[ph]
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
                hovertemplate=(
                    f"request #{i + 1}<br>{ph} [{a}, {b}): {b - a} tokens<extra></extra>"
                ),
            )
            shown.add(ph)
    cx = [p for r in res.requests for p in r.timeline.checkpoints]
    cy = [rows[i] for i, r in enumerate(res.requests) for _ in r.timeline.checkpoints]
    fig.add_scatter(
        x=cx, y=cy, mode="markers", name="checkpoint parked (state + conv)",
        marker={"symbol": "diamond", "size": 11, "color": COLORS["checkpoint"],
                "line": {"width": 1, "color": "black"}},
        hovertemplate="checkpoint at %{x} tokens<extra></extra>",
    )  # fmt: skip
    mx = [r.timeline.token_match for r in res.requests]
    fig.add_scatter(
        x=mx, y=rows, mode="markers", name="token match",
        marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": "black"}},
        hovertemplate="token match at %{x} tokens<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(  # legend entry for the inspected request's darker, outlined bars
        x=[None], y=[None], mode="markers",
        name=f"{rows[sel]} = the inspected request (dark, outlined)",
        marker={"symbol": "square", "size": 12, "color": COLORS["neutral"],
                "line": {"width": 2, "color": "black"}},
        hoverinfo="skip",
    )  # fmt: skip
    t = res.requests[sel].timeline
    if t.restore_at == t.token_match:  # one line, one label (no "restore 0match 0")
        what = " (cold prefill)" if t.token_match == 0 else " (nothing to replay)"
        ui.vline(fig, t.token_match, f"restore = match = {t.token_match}{what}")
    else:
        ui.vline(fig, t.restore_at, f"restore {t.restore_at}", xanchor="right")
        ui.vline(fig, t.token_match, f"match {t.token_match}", xanchor="left")
    ui.style(
        fig,
        f"Token timeline: request #{sel + 1} restores at {t.restore_at}, replays "
        f"{t.token_match - t.restore_at}, prefills {t.prompt_len - t.token_match}",
        "token position (tokens)",
        "request",
        height=150 + 42 * len(rows),
    )
    fig.update_layout(barmode="overlay", bargap=0.35)
    fig.update_yaxes(
        type="category", autorange="reversed", categoryorder="array", categoryarray=rows
    )
    return fig, ui.write_csv(f"{NAME}-timeline", pr.timeline_table(res))


TREE_LABEL_PX = 6.5  # about one character of the 11 px label font
TREE_PLOT_PX = 720  # the plot area's width at the suite's 1280 px page (2/3 column)


def fig_tree(snap: pr.TreeSnapshot, title: str) -> tuple[go.Figure, str]:
    """The radix tree as a tree (``tree_layout.layout``): a point per node at the token where
    its span ends, elbow edges, branch points ringed; colour = checkpoint vs tombstone, a thick
    black outline = locked. Labels sit above each node's edge where they fit; hover has all."""
    lay = tree_layout.layout(snap.node_id, snap.parent, snap.end)
    fig = go.Figure()
    fig.add_scatter(
        x=list(lay.edge_x), y=list(lay.edge_y), mode="lines", name="edge (parent → child)",
        line={"color": "#9aa3b2", "width": 1.5}, hoverinfo="skip",
    )  # fmt: skip
    locked = (snap.kv_lock > 0) | (snap.state_lock > 0)
    n = snap.node_id.size
    size = 13 if n <= 40 else 10
    custom = np.stack(
        [snap.node_id, snap.start, snap.end, snap.kv_lock, snap.state_lock, snap.kv_age,
         snap.state_age, snap.depth, lay.children], axis=1,
    )  # fmt: skip
    hover = (
        "node %{customdata[0]} '%{hovertext}'<br>tokens [%{customdata[1]}, %{customdata[2]}) "
        "· depth %{customdata[7]} · children %{customdata[8]}<br>locks: KV %{customdata[3]}, "
        "state %{customdata[4]}<br>LRU age: KV %{customdata[5]}, state %{customdata[6]} ticks"
        "<extra></extra>"
    )
    groups = (
        ("root", np.arange(n) == 0, "white"),
        ("checkpoint node (KV + KDA state)", (np.arange(n) > 0) & snap.has_state,
         COLORS["checkpoint"]),
        ("tombstone (MLA KV only, no state)", (np.arange(n) > 0) & ~snap.has_state,
         COLORS["kv"]),
    )  # fmt: skip
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
            x=lay.x[bp], y=lay.lane[bp], mode="markers", name="branch point (prompts diverge)",
            marker={"symbol": "circle-open", "size": size + 10, "color": "black",
                    "line": {"width": 1.5}},
            hovertemplate="branch at %{x} tokens<extra></extra>",
        )  # fmt: skip
    fig.add_scatter(  # legend entry only: what a thick outline means
        x=[None], y=[None], mode="markers", name="locked (thick outline: in use)",
        marker={"symbol": "circle", "size": 12, "color": "white",
                "line": {"color": "black", "width": 3}},
        hoverinfo="skip",
    )  # fmt: skip
    span = _tree_labels(fig, snap, lay)
    lane_px = 34 if lay.n_lanes <= 12 else 22
    ui.style(
        fig,
        f"{title}: {_n(snap.states, 'checkpoint node')}, {_n(snap.tombstones, 'tombstone')}, "
        f"{_n(int(lay.branch.sum()), 'branch point')}",
        "token position (tokens)",
        "branch",
        height=200 + lane_px * lay.n_lanes,
    )
    fig.update_xaxes(range=[-0.03 * span, span * 1.03])
    fig.update_yaxes(
        autorange=False, range=[lay.n_lanes - 0.4, -0.7], tickmode="array",
        tickvals=list(range(lay.n_lanes)), ticktext=[f"b{r}" for r in range(lay.n_lanes)],
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
            x=lx, y=ly, mode="text", text=lt, textposition="top center", name="node labels",
            textfont={"size": 10, "color": "#374151"}, hoverinfo="skip", showlegend=False,
        )  # fmt: skip
    return span


_REPLAY_BASE: dict[tuple, tuple[pr.ReplaySteps, dict]] = {}
_REPLAY_BASE_MAX = 64


def _replay_base(replay_steps: pr.ReplaySteps, layer: int, head: int, delta: bool) -> dict:
    """The styled replay figure of one (replay steps, layer, head, view) as a dict, built once:
    a step only swaps the heatmap, the marker and the title (plotly's object model costs ~50 ms
    per styled figure, a dict -> Figure ~5 ms; the step budget is 150 ms)."""
    key = (id(replay_steps), layer, head, delta)
    hit = _REPLAY_BASE.get(key)
    if hit is not None and hit[0] is replay_steps:
        return hit[1]
    ref = replay_steps.states[:, layer, head]
    zmax = float(np.abs(ref - ref[-1] if delta else ref).max()) or 1.0
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.17,
        subplot_titles=(
            f"{'S − S_match' if delta else 'state S'} (KDA layer {layer}, head {head})",
            f"distance to S_match (S_match vs uncached {replay_steps.uncached_error:.0e})",
        ),
    )  # fmt: skip
    fig.add_heatmap(
        z=ref[0], zmin=-zmax, zmax=zmax, colorscale="RdBu_r", row=1, col=1,
        colorbar={"title": {"text": "value"}, "x": 0.37, "len": 0.8, "thickness": 12},
        hovertemplate="key k=%{y}, value v=%{x}<br>%{z:.4f}<extra></extra>", showlegend=False,
    )  # fmt: skip
    fig.add_scatter(
        x=replay_steps.positions, y=replay_steps.dist, mode="lines+markers", row=1, col=2,
        name="‖S − S_match‖ / ‖S_match‖ (all KDA layers)",
        line={"color": COLORS["replay"], "width": 2}, marker={"size": 5},
        customdata=np.array(replay_steps.token_text, dtype=object),
        hovertemplate="position %{x} (token '%{customdata}')<br>distance %{y:.3g}<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(
        x=[0], y=[0.0], mode="markers", row=1, col=2, name="this step",
        marker={"size": 14, "color": "black", "line": {"width": 2, "color": "white"}},
        hovertemplate="step position %{x}<br>distance %{y:.3g}<extra></extra>",
    )  # fmt: skip
    ui.style(fig, "Replay step", "", "", height=430)
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_xaxes(title_text="value channel v", row=1, col=1, showline=False)
    fig.update_yaxes(title_text="key channel k", row=1, col=1, autorange="reversed", showline=False)
    fig.update_xaxes(title_text="token position (tokens)", row=1, col=2)
    fig.update_yaxes(
        title_text="relative distance (1 = norm of S)", row=1, col=2, rangemode="tozero"
    )
    base = fig.to_dict()
    if len(_REPLAY_BASE) >= _REPLAY_BASE_MAX:
        _REPLAY_BASE.pop(next(iter(_REPLAY_BASE)))
    _REPLAY_BASE[key] = (replay_steps, base)
    return base


def fig_replay(
    replay_steps: pr.ReplaySteps, step: int, layer: int, head: int, delta: bool, req: int
) -> tuple[go.Figure, str]:
    """Heatmap of one (layer, head) state at ``step`` + the distance to the uncached state."""
    n = replay_steps.positions.size
    if n == 0:
        fig = ui.empty_figure(
            f"Replay of request #{req + 1}",
            "nothing restored: no checkpoint on this request's path (cold prefill)",
        )
        return fig, ui.write_csv(f"{NAME}-replay", {"position": [], "distance": []})
    S = pr.heatmap(replay_steps, step, layer, head, delta=delta)
    pos = int(replay_steps.positions[step])
    d = float(replay_steps.dist[step])
    tok = replay_steps.token_text[step] if replay_steps.tokens[step] >= 0 else "-"
    at = "= the token match" if step == n - 1 else f"{n - 1 - step} tokens before the match"
    base = _replay_base(replay_steps, layer, head, delta)
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
        "text": f"Replay step {step}/{n - 1}: position {pos} (token '{tok}'), {at}; "
        f"distance {d:.3g}",
    }
    fig = go.Figure({"data": data, "layout": layout})
    table = pr.replay_table(replay_steps, step, layer, head, delta)
    return fig, ui.write_csv(f"{NAME}-replay", table)


DRIFT_TITLE = "Logit drift of the inconsistent restore"
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


def fig_no_drift(req: int, t: pr.Timeline, candidates: tuple[int, ...]) -> go.Figure:
    """Nothing can drift for this request: say why, and name the requests that can."""
    if t.restore_at == t.token_match:
        why = (
            f"request #{req + 1} restores at its match ({t.token_match} tokens): nothing is "
            "replayed, so the inconsistent restore is the exact one"
        )
    else:
        why = (
            f"request #{req + 1} restores no checkpoint (restore 0, match {t.token_match}): "
            "it recomputes from an empty state, so there is no parked state to misuse"
        )
    others = ", ".join(f"#{i + 1}" for i in candidates)
    pick = (
        f"requests whose restore differs from their match: {others} (Request to inspect)"
        if others
        else "no request of this session restores short of its match: nothing can drift here"
    )
    fig = ui.empty_figure(DRIFT_TITLE, f"{why};<br>{pick}")
    fig.update_layout(height=200)
    return fig


def fig_drift(d: pr.DriftStudy) -> tuple[go.Figure, str]:
    n = np.arange(1, d.exact.size + 1)
    fig = go.Figure()
    for arm, y, name in (
        ("inconsistent", d.inconsistent, "inconsistent: MLA at the match, KDA at the checkpoint"
         f"{' (INT8)' if d.inconsistent_int8 else ''}, no replay"),
        ("int8", d.int8, "INT8 checkpoint + exact replay"),
        ("exact", d.exact, "exact restore + replay"),
    ):  # fmt: skip
        fig.add_scatter(
            x=n, y=np.maximum(y, DRIFT_FLOOR), mode="lines+markers", name=name,
            line={"color": ARM_COLORS[arm], "width": 2},
            customdata=np.where(d.agree(arm), "same token", "different token"),
            hovertemplate="generated token %{x}<br>max |Δlogit| %{y:.3g}<br>"
                          "%{customdata} as the uncached run<extra></extra>",
        )  # fmt: skip
    agree = d.same_tokens("inconsistent")
    ui.style(
        fig,
        f"Request #{d.request + 1}: logit drift vs an uncached run; inconsistent keeps "
        f"{agree}/{n.size} greedy tokens<br><span style='font-size:12px'>"
        f"{settings_label(d.policy, d.spacing, d.checkpoint_slots, d.inconsistent_int8)}; "
        f"restore {d.restore_at}, match {d.token_match}</span>",
        "generated token (index)",
        "max |logit − uncached logit| (log scale)",
        height=380,
    )
    fig.update_layout(margin={"t": 64})  # the two-line title
    ui.log_axis(fig, "y", DRIFT_TICKS, fmt=_drift_tick)
    top = float(np.log10(max(d.inconsistent.max(), d.int8.max(), 1.0)))
    fig.update_yaxes(range=[-17.5, top + 0.4])  # the floor and every curve in view
    return fig, ui.write_csv(f"{NAME}-drift", pr.drift_table(d))
