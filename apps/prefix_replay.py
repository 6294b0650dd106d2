"""prefix_replay: a token prefix hit is not a state hit; watch the replay close the gap.

Draws ``kda_core.studies.prefix_replay``: requests (a built-in scenario or the reader's own
texts, Chinese included) served one by one through the real caching engine on TinyHybrid. Per
request: the token timeline (reused prefix vs replay span vs fresh prefill vs decode), the radix
tree (checkpoint nodes vs KV-only tombstones, locks, LRU ages), the pools, and the replay stepped
token by token with the KDA state heatmap and its distance to the uncached state (exactly 0 at
the token match). The inconsistent restore (MLA KV at the match, KDA state at the checkpoint,
no replay) shows how far the logits drift.

Per-session data: ``Session`` in ``gr.State`` holds this tab's request texts, settings, the
study's ``prefix_replay.Session`` (the engine that served them) and its result; two tabs never
see each other's requests. **Send** forks that engine (a deep copy, ~10 ms) and serves only
the new request, so its cost does not grow with the session; **Load** and **Apply settings**
re-serve the texts on a fresh engine (settings change the engine; deterministic, cached).
Callbacks never mutate a session they were given: they return a new one.

Public actions (api_name): ``prefix_replay_load`` (a built-in scenario), ``prefix_replay_send``
(one more request), ``prefix_replay_apply`` (re-serve with new settings),
``prefix_replay_inspect`` (request / layer / head / view), ``prefix_replay_step`` (go to a
replay step), ``prefix_replay_prev`` / ``prefix_replay_next``. The play timer is private.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import common, guard, i18n
from apps.common import COLORS, SERIES
from apps.i18n_tables import PREFIX_REPLAY as TR
from kda_core.model import encode
from kda_core.studies import prefix_replay as pr
from kda_core.studies import tree_layout

NAME = "prefix_replay"
POLICIES = pr.POLICIES
SCENARIOS = pr.SCENARIO_NAMES
STAGES = ("while the request holds its restore lock", "after the request (inserted)")
N_LAYERS = 6  # KDA layers of TinyHybrid (3 KDA : 1 MLA, 8 layers)
N_HEADS = 4
PLAY_INTERVAL_S = 0.4
PHASE_STYLE = {
    "restore": (COLORS["hit"], "reused: KV + state from the checkpoint"),
    "replay": (COLORS["replay"], "replayed: KV cached, state recomputed"),
    "prefill": (COLORS["prefill"], "fresh prefill (no token match)"),
    "decode": (COLORS["decode"], "decode (generated tokens)"),
}

EN = """**A prefix hit is not a state hit.** The radix cache matches your prompt token by token,
but a KDA layer can only resume where its *recurrent state and conv window* were saved together
with the MLA KV: at a checkpoint. The engine restores the deepest checkpoint on the matched
path and **replays** the tokens from there up to the token match (violet), then prefills the
rest (green). **Look at:** the gap between the checkpoint diamond and the match line on the
timeline; the tree (pink nodes hold a checkpoint, blue ones are MLA-KV-only tombstones, black
outlines are locked; hover a node for its locks and LRU ages); then press **Play**: the state
heatmap converges and its distance to the uncached state falls to **exactly 0** at the match.
Tick *inconsistent restore* to see what skipping the replay does to the logits.
*TinyHybrid is trained on Python's docstrings: its output is shown as decoded text.*"""

ZH = (
    "**前缀命中不等于状态命中。** radix 缓存逐 token 匹配你的提示词，但 KDA 层只能从*递推状态"
    "与卷积窗口*和 MLA KV 一起保存的位置——检查点——继续。引擎恢复匹配路径上最深的检查点，然后"
    "从那里**重放**到 token 匹配点（紫色），再预填充剩余部分（绿色）。**请看：** 时间线上检查"
    "点菱形与匹配线之间的距离；radix 树（粉色节点带检查点，蓝色是只有 MLA KV 的墓碑节点，黑框表示被"
    "锁定；悬停查看锁与 LRU 年龄）；然后按**Play**：状态热图逐步收敛，"
    "它与不走缓存的状态之间的距离在匹配点**精确降为"
    " 0**。勾选*不一致恢复* 看跳过重放会让 logits 偏离多远。"
    "*TinyHybrid 在 Python 文档字符串上训练过：输出以解码后的文本显示。*"
)


# ---------------------------------------------------------------------------------------------
# Session (gr.State)
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Session:
    """One browser tab: its request texts, settings, the served result and the view."""

    prompts: tuple[str, ...]
    scenario: str  # a built-in name, or "custom" once the reader sent own texts
    policy: str = "interval"
    spacing: int = 32
    slots: int | None = None
    int8: bool = False
    result: pr.ScenarioResult | None = None
    study: pr.Session | None = None  # the engine that served `prompts` (fork before sending)
    req: int = 0
    step: int = 0
    layer: int = 0
    head: int = 0
    delta: bool = True
    stage: int = 0

    @property
    def request(self) -> pr.RequestView:
        assert self.result is not None
        return self.result.requests[self.req]

    @property
    def n_steps(self) -> int:
        return int(self.request.trace.positions.size)


def _serve(s: Session, progress: gr.Progress | None = None) -> Session:
    if progress is not None:
        progress(0.0, desc=f"serving {len(s.prompts)} request(s) through the engine")
    study = pr.serve(
        s.scenario if s.scenario in SCENARIOS else "custom",
        prompts=None if s.scenario in SCENARIOS else s.prompts,
        policy=s.policy,
        spacing=s.spacing,
        int8=s.int8,
        checkpoint_slots=s.slots,
    )
    res = study.result()
    return replace(s, result=res, study=study, req=len(res.requests) - 1, step=0)


def _send_one(base: Session, text: str, s: Session, progress: gr.Progress | None) -> Session:
    """``s`` (= base + text) served incrementally: fork base's engine, serve only ``text``."""
    assert base.study is not None
    if progress is not None:
        progress(0.0, desc=f"serving request #{len(s.prompts)} through the engine")
    study = base.study.fork("custom")
    study.send(text)
    res = study.result()
    return replace(s, result=res, study=study, req=len(res.requests) - 1, step=0)


def _settings(policy: object, spacing: object, slots: object, int8: object) -> dict:
    return {
        "policy": common.check_choice("policy", policy, POLICIES),
        "spacing": common.check_int("checkpoint spacing (tokens)", spacing, 1, 1024),
        "slots": common.check_int("checkpoint slots (0 = default 256)", slots, 0, 4096) or None,
        "int8": bool(int8),
    }


def _view(layer: object, head: object, delta: object, stage: object) -> dict:
    return {
        "layer": common.check_int("KDA layer", layer, 0, N_LAYERS - 1),
        "head": common.check_int("head", head, 0, N_HEADS - 1),
        "delta": bool(delta),
        "stage": STAGES.index(common.check_choice("tree snapshot", stage, STAGES)),
    }


# ---------------------------------------------------------------------------------------------
# Figures (pure: study data -> figure, csv path)
# ---------------------------------------------------------------------------------------------


def _n(k: int, noun: str) -> str:
    """'1 tombstone', '2 tombstones'."""
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


def _short(text: str, n: int = 28) -> str:
    t = text.replace("\n", "⏎")
    return t if len(t) <= n else "…" + t[-(n - 1) :]


def fig_timeline(res: pr.ScenarioResult, sel: int) -> tuple[go.Figure, str]:
    """One row per request: reused / replay / prefill / decode spans, checkpoints, match."""
    fig = go.Figure()
    rows = [f"#{i + 1}" for i in range(len(res.requests))]
    shown: set[str] = set()
    csv: dict[str, list] = {"request": [], "phase": [], "start": [], "end": []}
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
            for k, v in zip(csv, (i + 1, ph, a, b)):
                csv[k].append(v)
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
        common.vline(fig, t.token_match, f"restore = match = {t.token_match}{what}")
    else:
        common.vline(fig, t.restore_at, f"restore {t.restore_at}", xanchor="right")
        common.vline(fig, t.token_match, f"match {t.token_match}", xanchor="left")
    common.style(
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
    for i, p in enumerate(cx):
        csv["request"].append(int(cy[i][1:]))
        csv["phase"].append("checkpoint")
        csv["start"].append(p)
        csv["end"].append(p)
    return fig, common.write_csv(f"{NAME}-timeline", csv)


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
    lane_px = 34 if lay.n_lanes <= 12 else 22
    common.style(
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
    csv = common.write_csv(
        f"{NAME}-tree",
        {
            "node_id": snap.node_id,
            "parent": snap.parent,
            "depth": snap.depth,
            "start": snap.start,
            "end": snap.end,
            "has_state": snap.has_state,
            "kv_lock": snap.kv_lock,
            "state_lock": snap.state_lock,
            "kv_lru_age": snap.kv_age,
            "state_lru_age": snap.state_age,
            "lane": lay.lane,
            "children": lay.children,
            "label": list(snap.label),
        },
    )
    return fig, csv


_REPLAY_BASE: dict[tuple, tuple[pr.ReplayTrace, dict]] = {}
_REPLAY_BASE_MAX = 64


def _replay_base(trace: pr.ReplayTrace, layer: int, head: int, delta: bool) -> dict:
    """The styled replay figure of one (trace, layer, head, view) as a plain dict, built once:
    a step only swaps the heatmap, the marker and the title (plotly's object model costs ~50 ms
    per styled figure, a dict -> Figure ~5 ms; the step budget is 150 ms)."""
    key = (id(trace), layer, head, delta)
    hit = _REPLAY_BASE.get(key)
    if hit is not None and hit[0] is trace:
        return hit[1]
    ref = trace.states[:, layer, head]
    zmax = float(np.abs(ref - ref[-1] if delta else ref).max()) or 1.0
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.17,
        subplot_titles=(
            f"{'S − S_match' if delta else 'state S'} (KDA layer {layer}, head {head})",
            f"distance to S_match (S_match vs uncached {trace.uncached_error:.0e})",
        ),
    )  # fmt: skip
    fig.add_heatmap(
        z=ref[0], zmin=-zmax, zmax=zmax, colorscale="RdBu_r", row=1, col=1,
        colorbar={"title": {"text": "value"}, "x": 0.37, "len": 0.8, "thickness": 12},
        hovertemplate="key k=%{y}, value v=%{x}<br>%{z:.4f}<extra></extra>", showlegend=False,
    )  # fmt: skip
    fig.add_scatter(
        x=trace.positions, y=trace.dist, mode="lines+markers", row=1, col=2,
        name="‖S − S_match‖ / ‖S_match‖ (all KDA layers)",
        line={"color": COLORS["replay"], "width": 2}, marker={"size": 5},
        customdata=np.array(trace.token_text, dtype=object),
        hovertemplate="position %{x} (token '%{customdata}')<br>distance %{y:.3g}<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(
        x=[0], y=[0.0], mode="markers", row=1, col=2, name="this step",
        marker={"size": 14, "color": "black", "line": {"width": 2, "color": "white"}},
        hovertemplate="step position %{x}<br>distance %{y:.3g}<extra></extra>",
    )  # fmt: skip
    common.style(fig, "Replay step", "", "", height=430)
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
    _REPLAY_BASE[key] = (trace, base)
    return base


def fig_replay(
    trace: pr.ReplayTrace, step: int, layer: int, head: int, delta: bool, req: int
) -> tuple[go.Figure, str]:
    """Heatmap of one (layer, head) state at ``step`` + the distance to the uncached state."""
    n = trace.positions.size
    if n == 0:
        fig = common.empty_figure(
            f"Replay of request #{req + 1}",
            "nothing restored: no checkpoint on this request's path (cold prefill)",
        )
        return fig, common.write_csv(f"{NAME}-replay", {"position": [], "distance": []})
    S = pr.heatmap(trace, step, layer, head, delta=delta)
    pos = int(trace.positions[step])
    d = float(trace.dist[step])
    tok = trace.token_text[step] if trace.tokens[step] >= 0 else "-"
    at = "= the token match" if step == n - 1 else f"{n - 1 - step} tokens before the match"
    base = _replay_base(trace, layer, head, delta)
    data = [dict(t) for t in base["data"]]
    data[0]["z"] = S
    data[1]["x"], data[1]["y"] = trace.positions, trace.dist  # arrays, not base64 (tests)
    data[2]["x"], data[2]["y"] = [pos], [d]
    layout = dict(base["layout"])
    layout["title"] = {
        **layout["title"],
        "text": f"Replay step {step}/{n - 1}: position {pos} (token '{tok}'), {at}; "
        f"distance {d:.3g}",
    }
    fig = go.Figure({"data": data, "layout": layout})
    kk, vv = np.meshgrid(np.arange(S.shape[0]), np.arange(S.shape[1]), indexing="ij")
    rows = S.size + n
    csv = common.write_csv(
        f"{NAME}-replay",
        {
            "kind": ["state"] * S.size + ["distance"] * n,
            "key_channel_or_position": np.concatenate([kk.ravel(), trace.positions]),
            "value_channel": np.concatenate([vv.ravel(), np.full(n, -1)]),
            "value": np.concatenate([S.ravel(), trace.dist]),
            "step": [step] * rows,
        },
    )
    return fig, csv


def fig_pools(res: pr.ScenarioResult, capped: bool = True) -> tuple[go.Figure, str]:
    """Cumulative pool counters after each request; ``capped``: draw the checkpoint pool
    capacity (the reader set a budget; the engine default of 256 would dwarf the bars)."""
    x = [f"#{i + 1}" for i in range(len(res.requests))]
    cols = {
        "checkpoint slots used": ([r.pools.checkpoint_used for r in res.requests],
                                  COLORS["checkpoint"]),
        "COW copies (restores)": ([r.pools.copies for r in res.requests], COLORS["hit"]),
        "donations (track slot -> pool)": ([r.pools.donations for r in res.requests],
                                           SERIES[0]),
        "evicted states": ([r.pools.evicted_states for r in res.requests], COLORS["neutral"]),
        "active slots (peak)": ([r.pools.active_peak for r in res.requests], COLORS["state"]),
    }  # fmt: skip
    fig = go.Figure()
    for name, (ys, color) in cols.items():
        fig.add_bar(
            x=x,
            y=ys,
            name=name,
            marker_color=color,
            hovertemplate=f"after request %{{x}}<br>{name}: %{{y}}<extra></extra>",
        )
    cap = res.requests[-1].pools.checkpoint_capacity
    if capped:
        fig.add_hline(
            y=cap,
            line={"color": COLORS["checkpoint"], "dash": "dash"},
            annotation_text=f"checkpoint pool capacity {cap}",
            annotation_position="top left",
        )
    common.style(
        fig,
        "Pools after each request (cumulative)",
        "request",
        "count (slots / events)",
        height=360,
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    data = {"request": list(range(1, len(x) + 1))}
    data.update({k: v for k, (v, _) in cols.items()})
    data["checkpoint bytes"] = [r.pools.checkpoint_bytes for r in res.requests]
    data["evicted KV tokens"] = [r.pools.evicted_kv_tokens for r in res.requests]
    return fig, common.write_csv(f"{NAME}-pools", data)


def settings_label(policy: str, spacing: int, slots: int | None, int8: bool) -> str:
    """'interval 32', 'sglang grid 32', 'vllm block 32', 'marconi' + slots + INT8."""
    what = {"interval": "interval", "sglang": "sglang grid", "vllm": "vllm block"}
    text = f"{what[policy]} {spacing}" if policy in what else policy
    if slots is not None:
        text += f", {slots} slots"
    return text + (", INT8" if int8 else "")


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
    fig = common.empty_figure(DRIFT_TITLE, f"{why};<br>{pick}")
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
    common.style(
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
    common.log_axis(fig, "y", DRIFT_TICKS, fmt=_drift_tick)
    top = float(np.log10(max(d.inconsistent.max(), d.int8.max(), 1.0)))
    fig.update_yaxes(range=[-17.5, top + 0.4])  # the floor and every curve in view
    csv = common.write_csv(
        f"{NAME}-drift",
        {
            "token": n,
            "exact": d.exact,
            "int8": d.int8,
            "inconsistent": d.inconsistent,
            "uncached_token": list(d.uncached_tokens),
            "inconsistent_token": list(d.inconsistent_tokens),
        },
    )
    return fig, csv


# ---------------------------------------------------------------------------------------------
# Text panels
# ---------------------------------------------------------------------------------------------


def _esc(text: str) -> str:
    t = html.escape(text.replace("\n", "⏎"))
    return t.replace("|", "&#124;").replace("*", "&#42;").replace("_", "&#95;")


def _code(text: str) -> str:
    """Readable bytes as inline code inside a markdown table cell."""
    return "`" + text.replace("`", "'").replace("|", "¦") + "`"


def summary_markdown(s: Session) -> str:
    res, r = s.result, s.request
    assert res is not None
    t, p = r.timeline, r.pools
    cap = str(p.checkpoint_capacity) + ("" if s.slots else " (default)")
    rows = [
        ("prompt", f"{t.prompt_len} tokens", i18n.verbatim(_esc(_short(r.prompt, 60)))),
        ("token match", f"{t.token_match}", "longest cached token prefix"),
        ("**restore point**", f"**{t.restore_at}**", "deepest checkpoint on that path"),
        ("**replayed**", f"**{t.token_match - t.restore_at}**", f"tokens [{t.restore_at}, "
                                                               f"{t.token_match})"),
        ("prefilled / decoded", f"{t.prompt_len - t.token_match} / {t.decode[1] - t.decode[0]}",
         f"output {_code(r.output_readable)} ({len(r.output_tokens)} byte tokens)"),
        ("checkpoints parked", f"{len(t.checkpoints)}", ", ".join(map(str, t.checkpoints))),
        ("state at match vs uncached", f"{r.trace.uncached_error:.1e}", "relative, all layers"),
        ("pools: active slots", f"peak {p.active_peak} / {p.active_capacity}", s.policy),
        ("pools: checkpoint slots", f"{p.checkpoint_used} / {cap}",
         f"{p.checkpoint_bytes / 1024:.0f} KiB{' INT8' if p.int8 else ''}"),
        ("pools: COW copies / donations", f"{p.copies} / {p.donations}",
         f"track writes {p.track_writes}"),
        ("pools: evictions", f"{p.evicted_states} states", f"{p.evicted_kv_tokens} KV tokens"),
        ("session", f"{len(res.requests)} requests",
         f"state hits {res.state_hits}, replayed {res.replayed_tokens}, prefill saved "
         f"{res.saved_fraction:.0%}"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return f"**Request #{s.req + 1}**\n\n| quantity | value |\n|---|---|\n" + body


def step_markdown(s: Session) -> str:
    n = s.n_steps
    if n == 0:
        return "No replay for this request (it restored nothing)."
    tr = s.request.trace
    return (
        f"Step **{s.step} / {n - 1}** · position {int(tr.positions[s.step])} · "
        f"distance {float(tr.dist[s.step]):.3g} · state at match vs uncached prefill "
        f"{tr.uncached_error:.1e}"
    )


# ---------------------------------------------------------------------------------------------
# Callbacks
# ---------------------------------------------------------------------------------------------


def _request_choices(s: Session) -> list[tuple[str, int]]:
    return [(f"#{i + 1} {i18n.verbatim(_short(p, 22))}", i) for i, p in enumerate(s.prompts)]


def _step_slider(s: Session) -> dict:
    n = s.n_steps
    return gr.update(maximum=max(n - 1, 1), value=s.step, interactive=n > 1)


def _replay_outputs(s: Session) -> tuple:
    """(figure, CSV button, step text, slider); the CSV button hides when there is no replay."""
    fig, csv = fig_replay(s.request.trace, s.step, s.layer, s.head, s.delta, s.req)
    has = s.n_steps > 0
    btn = gr.update(value=csv if has else None, visible=has)
    return fig, btn, step_markdown(s), _step_slider(s)


def _drift_outputs(s: Session, inconsistent: bool) -> tuple:
    """The drift panel (plot, CSV button): hidden until 'Inconsistent restore' is ticked; a note
    instead of curves when the inspected request replayed nothing (item: never suggest that a
    wrong restore is harmless)."""
    if not inconsistent or s.result is None:
        return gr.update(value=None, visible=False), gr.update(value=None, visible=False)
    t = s.request.timeline
    if not can_drift(t):
        fig = fig_no_drift(s.req, t, drifting(s.result))
        return gr.update(value=fig, visible=True), gr.update(value=None, visible=False)
    d = _drift(s)
    if not 0 < d.restore_at < d.token_match:  # the drift study's own serving differed
        fig = fig_no_drift(s.req, t, drifting(s.result))
        return gr.update(value=fig, visible=True), gr.update(value=None, visible=False)
    fig, csv = fig_drift(d)
    return gr.update(value=fig, visible=True), gr.update(value=csv, visible=True)


def _drift(s: Session) -> pr.DriftStudy:
    return pr.restore_drift(
        s.scenario if s.scenario in SCENARIOS else "custom",
        s.req,
        prompts=None if s.scenario in SCENARIOS else s.prompts,
        policy=s.policy,
        spacing=s.spacing,
        checkpoint_slots=s.slots,
        int8=s.int8,
    )


def _inspect_outputs(s: Session, inconsistent: bool) -> tuple:
    assert s.result is not None
    r = s.request
    snap = (r.tree_during, r.tree_after)[s.stage]
    title = (
        f"Radix tree while request #{s.req + 1} holds its lock",
        f"Radix tree after request #{s.req + 1}",
    )[s.stage]
    return (
        summary_markdown(s),
        *fig_timeline(s.result, s.req),
        *fig_tree(snap, title),
        *_replay_outputs(s),
        *_drift_outputs(s, inconsistent),
        gr.update(choices=_request_choices(s), value=s.req),
        s,
    )


def _all_outputs(s: Session, inconsistent: bool) -> tuple:
    out = _inspect_outputs(s, inconsistent)
    assert s.result is not None
    return (*out[:-1], *fig_pools(s.result, s.slots is not None), out[-1])


@common.study_errors
def load_scenario(
    scenario: str = "system_tools_branches",
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: Session | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """A fresh session with the built-in scenario's prompts, served under the settings."""
    name = common.check_choice("scenario", scenario, SCENARIOS)
    s = Session(
        pr.SCENARIOS[name].prompts,
        name,
        **_settings(policy, spacing, slots, int8),
        **_view(layer, head, delta, stage),
    )
    return _all_outputs(_serve(s, progress), bool(inconsistent))


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise gr.Error(
            "request text must be non-empty (1 to 1024 UTF-8 bytes)", print_exception=False
        )
    nbytes = len(encode(text))
    if nbytes > pr.MAX_PROMPT_TOKENS:
        raise gr.Error(
            f"request text must be 1 to {pr.MAX_PROMPT_TOKENS} UTF-8 bytes (tokens), got {nbytes}",
            print_exception=False,
        )
    return text


def _check_room(session: Session | None) -> None:
    if session is not None and len(session.prompts) >= pr.MAX_PROMPTS:
        raise gr.Error(
            f"a session holds at most {pr.MAX_PROMPTS} requests; load a scenario "
            "or press Reset to start over",
            print_exception=False,
        )


@common.study_errors
def send_request(
    text: str,
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: Session | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Append one request (free text) to this session and serve it on the session's engine
    (incremental: one request's cost); with changed settings, re-serve every text."""
    _check_text(text)
    prompts = session.prompts if session is not None else ()
    _check_room(session)
    settings = _settings(policy, spacing, slots, int8)
    s = Session(prompts + (text,), "custom", **settings, **_view(layer, head, delta, stage))
    if (
        session is not None
        and session.study is not None
        and session.study.prompts == prompts
        and all(getattr(session, k) == v for k, v in settings.items())
    ):  # same engine settings: serve the new request only
        s = _send_one(session, text, s, progress)
    else:  # first request, or new settings: a fresh engine serves every text
        s = _serve(s, progress)
    return _all_outputs(s, bool(inconsistent))


@common.study_errors
def apply_settings(
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: Session | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Re-serve this session's requests under new settings (keeps the selected request)."""
    base = session or Session(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
    if not base.prompts:
        raise gr.Error(
            "the session is empty: send a request or load a scenario first", print_exception=False
        )
    s = replace(base, **_settings(policy, spacing, slots, int8), **_view(layer, head, delta, stage))
    keep = base.req
    s = _serve(s, progress)
    s.req = min(keep, len(s.prompts) - 1) if session is not None else s.req
    return _all_outputs(s, bool(inconsistent))


def reset_session() -> tuple:
    """An empty session: placeholders until a request is sent."""
    msg = "empty session: send a request or load a scenario"
    figs = [
        common.empty_figure(t, msg)
        for t in ("Token timeline", "Radix tree", "Replay", "Logit drift", "Pools")
    ]
    return (
        "*(empty session)*",
        figs[0],
        None,
        figs[1],
        None,
        figs[2],
        gr.update(value=None, visible=False),
        "",
        gr.update(maximum=1, value=0, interactive=False),
        gr.update(value=None, visible=False),
        gr.update(value=None, visible=False),
        gr.update(choices=[], value=None),
        figs[4],
        None,
        Session((), "custom"),
    )


def _need(session: Session | None) -> Session:
    if session is None or session.result is None:
        raise gr.Error(
            "the session is empty: send a request or load a scenario first", print_exception=False
        )
    return session


@common.study_errors
def inspect(
    request: float = -1,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    inconsistent: bool = False,
    session: Session | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Choose the request (1-based index shown as #n; value = 0-based), layer, head, view.
    With ``inconsistent`` the drift study of that request runs (~1 s the first time)."""
    s = _need(session)
    if inconsistent and progress is not None:
        progress(0.0, desc="restoring exactly, from INT8 and inconsistently")
    n = len(s.prompts)
    i = common.check_int("request", -1 if request is None else request, -n, n - 1) % n
    s = replace(s, req=i, step=0 if i != s.req else s.step, **_view(layer, head, delta, stage))
    return _inspect_outputs(s, bool(inconsistent))


def go_to_step(step: float, session: Session | None = None) -> tuple:
    """Show replay step ``step`` (0 = the restore point, last = the token match)."""
    s = _need(session)
    n = s.n_steps
    if n == 0:
        raise gr.Error(
            f"request #{s.req + 1} has no replay steps (it restored nothing)", print_exception=False
        )
    s = replace(s, step=common.check_int("step", step, 0, n - 1))
    return (*_replay_outputs(s), s)


def step_by(delta: int, session: Session | None) -> tuple:
    s = _need(session)
    n = s.n_steps
    s = replace(s, step=int(np.clip(s.step + delta, 0, max(n - 1, 0))))
    return (*_replay_outputs(s), s)


def prev_step(session: Session | None = None) -> tuple:
    return step_by(-1, session)


def next_step(session: Session | None = None) -> tuple:
    return step_by(+1, session)


def play_tick(session: Session | None) -> tuple:
    """Timer tick: one step forward; stops the timer at the match."""
    if session is None or session.result is None or session.n_steps == 0:
        return (gr.skip(),) * 5 + (gr.Timer(active=False),)
    s = replace(session, step=min(session.step + 1, session.n_steps - 1))
    done = s.step >= s.n_steps - 1
    return (*_replay_outputs(s), s, gr.Timer(active=not done))


def play(session: Session | None) -> tuple:
    """Start playing (from the restore point if already at the match)."""
    s = _need(session)
    if s.n_steps and s.step >= s.n_steps - 1:
        s = replace(s, step=0)
        return (*_replay_outputs(s), s, gr.Timer(active=True))
    return (gr.skip(),) * 4 + (s, gr.Timer(active=s.n_steps > 1))


def redraw(inconsistent: bool = False, session: Session | None = None) -> tuple:
    """Every output of the current session again (the language switch redraws in 中文)."""
    if session is None or session.result is None:
        return (gr.skip(),) * 15
    return _all_outputs(session, bool(inconsistent))


# ---------------------------------------------------------------------------------------------
# Validators (Gradio's validator=: a rejected input leaves every output as it was)
# ---------------------------------------------------------------------------------------------


def _request_api_info() -> dict:
    return {
        "type": "integer",
        "description": "0-based index of a request of this session (-1 = the last)",
    }


def _scenario_check(v: object) -> None:
    common.check_choice("scenario", v, SCENARIOS)


def _settings_checks() -> list:
    """Checks aligned with ``settings`` = policy, spacing, slots, int8, inconsistent, layer,
    head, delta, stage (the same ranges as ``_settings`` / ``_view``)."""
    return [
        lambda v: common.check_choice("policy", v, POLICIES),
        lambda v: common.check_int("checkpoint spacing (tokens)", v, 1, 1024),
        lambda v: common.check_int("checkpoint slots (0 = default 256)", v, 0, 4096),
        None,
        None,
        lambda v: common.check_int("KDA layer", v, 0, N_LAYERS - 1),
        lambda v: common.check_int("head", v, 0, N_HEADS - 1),
        None,
        lambda v: common.check_choice("tree snapshot", v, STAGES),
    ]


def _room_cross(*values: object) -> tuple[int, str] | None:
    try:
        _check_room(values[-2])  # type: ignore[arg-type]
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


def _nonempty_cross(n_settings: int):  # noqa: ANN202
    def cross(*values: object) -> tuple[int, str] | None:
        session = values[n_settings]
        if isinstance(session, Session) and not session.prompts:
            return 0, "the session is empty: send a request or load a scenario first"
        return None

    return cross


def _request_cross(request: object, *values: object) -> tuple[int, str] | None:
    session = values[-2]
    if not isinstance(session, Session) or session.result is None:
        return 0, "the session is empty: send a request or load a scenario first"
    n = len(session.prompts)
    try:
        common.check_int("request", -1 if request is None else request, -n, n - 1)
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


def _step_cross(step: object, session: object, *_: object) -> tuple[int, str] | None:
    if not isinstance(session, Session) or session.result is None:
        return 0, "the session is empty: send a request or load a scenario first"
    n = session.n_steps
    if n == 0:
        return 0, f"request #{session.req + 1} has no replay steps (it restored nothing)"
    try:
        common.check_int("step", step, 0, n - 1)
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


def build() -> gr.Blocks:
    with gr.Blocks(title="Prefix replay · KDA State Lab") as demo:
        lang = common.header(NAME, "Prefix replay · 前缀命中与重放", EN, ZH)
        session = gr.State(None)
        timer = gr.Timer(PLAY_INTERVAL_S, active=False)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                scenario = gr.Dropdown(
                    [(pr.SCENARIOS[n].title, n) for n in SCENARIOS], value=SCENARIOS[0],
                    label="Example scenario", elem_id=f"{NAME}-scenario",
                )  # fmt: skip
                load = gr.Button("Load scenario", elem_id=f"{NAME}-load")
                text = gr.Textbox(
                    label="Your request (free text, 中文 works; 1-1024 UTF-8 bytes)",
                    lines=3, elem_id=f"{NAME}-text",
                    value=pr.SCENARIOS[SCENARIOS[0]].prompts[0].rsplit("User:", 1)[0]
                    + "User: 明天上海的天气怎么样？\nAssistant:",
                )  # fmt: skip
                with gr.Row():
                    send = gr.Button("Send", variant="primary", elem_id=f"{NAME}-send")
                    reset = gr.Button("Reset session", elem_id=f"{NAME}-reset")
                with gr.Accordion("Cache settings", open=True) as cache_box:
                    policy = gr.Radio(
                        list(POLICIES),
                        value="interval",
                        label="Checkpoint policy",
                        elem_id=f"{NAME}-policy",
                    )
                    with gr.Row():
                        spacing = gr.Number(
                            32,
                            label="Checkpoint spacing (1-1024 tokens)",
                            elem_id=f"{NAME}-spacing",
                        )
                        slots = gr.Number(
                            0,
                            label="Checkpoint slots (0 = default 256, max 4096)",
                            elem_id=f"{NAME}-slots",
                        )
                    with gr.Row():
                        int8 = gr.Checkbox(False, label="INT8 parking", elem_id=f"{NAME}-int8")
                        inconsistent = gr.Checkbox(
                            False, label="Inconsistent restore", elem_id=f"{NAME}-inconsistent"
                        )
                    apply = gr.Button("Apply settings", elem_id=f"{NAME}-apply")
                summary = gr.Markdown(
                    label="Request summary",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
            with gr.Column(scale=2):
                first = Session(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
                request = gr.Dropdown(
                    _request_choices(first), value=len(first.prompts) - 1,
                    label="Request to inspect", elem_id=f"{NAME}-request",
                )  # fmt: skip
                request.api_info = _request_api_info  # an index, not the build-time choices
                s_time = common.figure_slot(f"{NAME}-timeline", "Token timeline")
                with gr.Row():
                    layer = gr.Slider(
                        0, N_LAYERS - 1, value=0, step=1, label="KDA layer", elem_id=f"{NAME}-layer"
                    )
                    head = gr.Slider(
                        0, N_HEADS - 1, value=0, step=1, label="Head", elem_id=f"{NAME}-head"
                    )
                    delta = gr.Checkbox(True, label="show S − S_match (difference)")
                with gr.Row():
                    prev = gr.Button("◀ Prev", elem_id=f"{NAME}-prev", size="sm")
                    play_btn = gr.Button(
                        "▶ Play", elem_id=f"{NAME}-play", size="sm", variant="primary"
                    )
                    pause = gr.Button("❚❚ Pause", elem_id=f"{NAME}-pause", size="sm")
                    nxt = gr.Button("Next ▶", elem_id=f"{NAME}-next", size="sm")
                step = gr.Slider(0, 1, value=0, step=1, label="Replay step", elem_id=f"{NAME}-step")
                step_md = gr.Markdown(label="Replay step details", elem_id=f"{NAME}-step-info")
                s_replay = common.figure_slot(f"{NAME}-replay", "Replay state heatmap")
                stage = gr.Radio(
                    list(STAGES), value=STAGES[0], label="Tree snapshot", elem_id=f"{NAME}-stage"
                )
                s_tree = common.figure_slot(f"{NAME}-tree", "Radix tree")
                s_drift = common.figure_slot(f"{NAME}-drift", "Logit drift")
                s_drift.plot.visible = s_drift.csv.visible = False  # until the toggle is on
                s_pools = common.figure_slot(f"{NAME}-pools", "Pools")

        settings = [policy, spacing, slots, int8, inconsistent, layer, head, delta, stage]
        replay_out = [*s_replay.outputs, step_md, step]
        inspect_out = [
            summary,
            *s_time.outputs,
            *s_tree.outputs,
            *replay_out,
            *s_drift.outputs,
            request,
            session,
        ]
        all_out = [*inspect_out[:-1], *s_pools.outputs, session]
        lr = lang.radio

        def loc(fn):  # noqa: ANN001, ANN202 - the callback with the language input
            return i18n.localized(fn, TR)

        v_settings = _settings_checks()
        load_v = guard.validator(_scenario_check, *v_settings)
        load.click(
            loc(load_scenario), [scenario, *settings, session, lr], all_out,
            api_name=f"{NAME}_load", validator=load_v,
        )  # fmt: skip
        demo.load(
            loc(load_scenario), [scenario, *settings, session, lr], all_out,
            api_visibility="private",
        )  # fmt: skip
        send.click(
            loc(send_request), [text, *settings, session, lr], all_out, api_name=f"{NAME}_send",
            validator=guard.validator(_check_text, *v_settings, cross=_room_cross),
        )  # fmt: skip
        apply_v = guard.validator(*v_settings, cross=_nonempty_cross(len(settings)))
        apply.click(
            loc(apply_settings), [*settings, session, lr], all_out, api_name=f"{NAME}_apply",
            validator=apply_v,
        )  # fmt: skip
        gr.on(
            [policy.input, int8.input, inconsistent.input],
            loc(apply_settings),
            [*settings, session, lr],
            all_out,
            api_visibility="private",
            validator=apply_v,
        )
        reset.click(loc(reset_session), [lr], all_out, api_name=f"{NAME}_reset")
        view_in = [request, layer, head, delta, stage, inconsistent, session, lr]
        inspect_btn_triggers = [
            request.input,
            layer.release,
            head.release,
            delta.input,
            stage.input,
        ]
        gr.on(
            inspect_btn_triggers, loc(inspect), view_in, inspect_out, api_name=f"{NAME}_inspect",
            validator=guard.validator(None, *v_settings[5:7], None, v_settings[8],
                                      cross=_request_cross),
        )  # fmt: skip
        step.release(
            loc(go_to_step), [step, session, lr], [*replay_out, session],
            api_name=f"{NAME}_step", validator=guard.validator(cross=_step_cross),
        )  # fmt: skip
        prev.click(loc(prev_step), [session, lr], [*replay_out, session], api_name=f"{NAME}_prev")
        nxt.click(loc(next_step), [session, lr], [*replay_out, session], api_name=f"{NAME}_next")
        play_btn.click(
            loc(play), [session, lr], [*replay_out, session, timer], api_visibility="private"
        )
        pause.click(lambda: gr.Timer(active=False), None, timer, api_visibility="private")
        timer.tick(
            loc(play_tick),
            [session, lr],
            [*replay_out, session, timer],
            api_visibility="private",
            show_progress="hidden",
        )
        lr.change(
            loc(redraw), [inconsistent, session, lr], all_out, api_visibility="private",
            show_progress="hidden",
        )  # fmt: skip
        lang.labels({
            scenario: "示例场景", text: "你的请求（任意文本，支持中文；1-1024 个 UTF-8 字节）",
            policy: "检查点策略", spacing: "检查点间隔（1-1024 token）",
            slots: "检查点槽位（0 = 默认 256，最多 4096）", int8: "INT8 停放",
            inconsistent: "不一致恢复", request: "查看的请求", layer: "KDA 层", head: "头",
            delta: "显示 S − S_match", step: "重放步", stage: "树快照",
            load: "载入场景", send: "发送", reset: "重置会话", apply: "应用设置",
            prev: "◀ 上一步", play_btn: "▶ 播放", pause: "❚❚ 暂停", nxt: "下一步 ▶",
            cache_box: "缓存设置",
            **{sl.csv: common.CSV_ZH for sl in (s_time, s_replay, s_tree, s_drift, s_pools)},
        }, tr=TR)  # fmt: skip
    return demo


if __name__ == "__main__":
    common.main(build)
