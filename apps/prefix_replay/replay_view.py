"""prefix_replay's replay step drawn in the language of ``t``: the state heatmap of one (layer,
head) at a step next to the distance to the uncached state (``fig_replay``: figure, CSV path),
and the step's line of text. A step only swaps the heatmap, the marker and the title of a figure
styled once per (replay, layer, head, view): the step budget is 150 ms."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS
from kda_core.studies import exports
from kda_core.studies import prefix_replay as pr
from words.catalog import T as Lang

NAME = "prefix_replay"


def _hover(text: str) -> str:
    return text + "<extra></extra>"


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
        rows=1,
        cols=2,
        column_widths=[0.42, 0.58],
        horizontal_spacing=0.21,
        subplot_titles=(
            t("st_S", what=t("st_S_delta") if delta else t("st_S_state"), layer=layer, head=head),
            t("st_dist"),  # S_match vs uncached: in the step text below the figure
        ),
    )
    fig.add_heatmap(
        z=ref[0],
        zmin=-zmax,
        zmax=zmax,
        colorscale="RdBu_r",
        row=1,
        col=1,
        colorbar={"title": {"text": t("cb_value")}, "x": 0.345, "len": 0.8, "thickness": 10},
        hovertemplate=_hover(t("h_cell", y="%{y}", x="%{x}", z="%{z:.4f}")),
        showlegend=False,
    )
    fig.add_scatter(
        x=replay_steps.positions,
        y=replay_steps.dist,
        mode="lines+markers",
        row=1,
        col=2,
        name=t("l_dist"),
        line={"color": COLORS["replay"], "width": 2},
        marker={"size": 5},
        customdata=np.array(replay_steps.token_text, dtype=object),
        hovertemplate=_hover(t("h_dist", x="%{x}", tok="%{customdata}", y="%{y:.3g}")),
    )
    fig.add_scatter(
        x=[0],
        y=[0.0],
        mode="markers",
        row=1,
        col=2,
        name=t("l_this_step"),
        marker={"size": 14, "color": "black", "line": {"width": 2, "color": "white"}},
        hovertemplate=_hover(t("h_this_step", x="%{x}", y="%{y:.3g}")),
    )
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
    data = [dict(trace) for trace in base["data"]]
    data[0]["z"] = S
    data[1]["x"], data[1]["y"] = replay_steps.positions, replay_steps.dist  # arrays, not base64
    data[2]["x"], data[2]["y"] = [pos], [d]
    layout = dict(base["layout"])
    layout["title"] = {
        **layout["title"],
        "text": t("t_replay", s=step, n=n - 1, pos=pos, tok=tok, at=at, d=d),
    }
    fig = go.Figure({"data": data, "layout": layout})
    table = exports.columns("replay_steps", replay_steps, step, layer, head, delta)
    return fig, ui.write_csv(f"{NAME}-replay", table)


def step_markdown(replay_steps: pr.ReplaySteps, step: int, t: Lang) -> str:
    n = int(replay_steps.positions.size)
    if n == 0:
        return t("step_none")
    return t(
        "step_md",
        s=step,
        n=n - 1,
        pos=int(replay_steps.positions[step]),
        d=float(replay_steps.dist[step]),
        e=replay_steps.uncached_error,
    )
