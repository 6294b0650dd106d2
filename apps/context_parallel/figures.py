"""context_parallel's plotly figures (what ``kda_core.studies.context_parallel`` returns), drawn
in the language of ``t``; each returns (figure, CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core import cp
from kda_core.studies import context_parallel as cps
from kda_core.studies import exports
from words.catalog import T as Lang

NAME = "context_parallel"
SCANS = cp.SCANS
KIND_COLORS = {"map": SERIES[0], "state": COLORS["state"]}


def fig_steps(d: cps.Demo, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(rows=2, cols=1, row_heights=[0.3, 0.7], vertical_spacing=0.22)
    for r in range(d.P):
        a, b = int(d.bounds[r]), int(d.bounds[r + 1])
        fig.add_bar(
            x=[b - a],
            base=[a],
            y=[t("rank_n", r=r)],
            orientation="h",
            marker_color=SERIES[r % len(SERIES)],
            showlegend=False,
            row=1,
            col=1,
            hovertemplate=t("h_segment", r=r, a=a, b=b) + "<extra></extra>",
        )
    for c in d.cu_seqlens[1:-1].tolist():
        fig.add_vline(x=c, line={"color": COLORS["neutral"], "dash": "dot"}, row=1, col=1)
    n_steps = int(d.msg_step.max()) + 1 if d.msg_step.size else 0
    ys = [t("local")] + [t("step_n", n=i + 1) for i in range(n_steps)] + [t("finish")]
    fig.add_scatter(
        x=list(range(d.P)) * 2,
        y=[ys[0]] * d.P + [ys[-1]] * d.P,
        mode="markers",
        marker={"color": COLORS["neutral"], "size": 9},
        showlegend=False,
        row=2,
        col=1,
        hoverinfo="skip",
    )
    shown = set()
    for i in range(d.msg_src.size):
        kind = str(d.msg_kind[i])
        s, e = int(d.msg_step[i]), int(d.msg_step[i]) + 1
        fig.add_scatter(
            x=[d.msg_src[i], d.msg_dst[i]],
            y=[ys[s], ys[e]],
            mode="lines+markers",
            line={"color": KIND_COLORS[kind], "width": 2},
            marker={"size": 7, "symbol": "circle"},
            name=t(f"kind_{kind}"),
            legendgroup=kind,
            showlegend=kind not in shown,
            row=2,
            col=1,
            hovertemplate=t(
                "h_msg",
                src=d.msg_src[i],
                dst=d.msg_dst[i],
                kind=t(f"kind_{kind}"),
                n=int(d.msg_bytes[i]),
            )
            + "<extra></extra>",
        )
        shown.add(kind)
    ui.style(fig, t("t_steps", scan=t(f"scan_{d.scan}"), P=d.P, T=d.T), "", "", height=500)
    fig.update_xaxes(title_text=t("x_tokens"), row=1, col=1)
    fig.update_xaxes(title_text=t("x_rank"), dtick=1, row=2, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=ys[::-1], row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    cols = {
        "step": d.msg_step,
        "src": d.msg_src,
        "dst": d.msg_dst,
        "kind": [str(k) for k in d.msg_kind],
        "bytes": d.msg_bytes,
    }
    return fig, ui.write_csv(f"{NAME}-messages", cols)


def fig_state(d: cps.Demo, rank: int, t: Lang) -> tuple[go.Figure, str]:
    S, diff = d.S_in[rank], d.S_in[rank] - d.S_true[rank]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.16,
        subplot_titles=(t("st_received"), t("st_diff", d=float(np.abs(diff).max()))),
    )
    lim = float(np.abs(S).max()) or 1.0
    fig.add_heatmap(
        z=S,
        zmin=-lim,
        zmax=lim,
        colorscale="RdBu_r",
        row=1,
        col=1,
        colorbar={"x": 0.43, "len": 0.9, "thickness": 14},
        hovertemplate="k %{y}, v %{x}: %{z:.4f}<extra></extra>",
    )
    dl = float(np.abs(diff).max()) or 1e-18
    fig.add_heatmap(
        z=diff,
        zmin=-dl,
        zmax=dl,
        colorscale="RdBu_r",
        row=1,
        col=2,
        colorbar={"x": 1.0, "len": 0.9, "thickness": 14, "exponentformat": "e"},
        hovertemplate="k %{y}, v %{x}: %{z:.2e}<extra></extra>",
    )
    ui.style(fig, t("t_state", r=rank), t("x_value"), t("y_key"), height=380, legend=False)
    fig.update_yaxes(autorange="reversed")
    # one key-channel axis for both panels: the right one repeats no title, so the left
    # panel's colour bar has the gap to itself (it covered that title)
    fig.update_yaxes(title_text="", matches="y", row=1, col=2)
    ui.top_margin(fig, 42)  # room for the subplot titles under the figure title
    return fig, ui.write_csv(f"{NAME}-state", exports.columns("cp_state", d, rank))


def fig_exact(d: cps.Demo, t: Lang) -> tuple[go.Figure, str]:
    floor = 1e-18
    fig = go.Figure()
    fig.add_bar(
        x=list(range(d.P)),
        y=np.maximum(d.o_rel, floor),
        customdata=d.o_rel,
        marker_color=SERIES[0],
        name="o",
        showlegend=False,
        textposition="outside",
        text=[f"{v:.1e}" if v else "0" for v in d.o_rel.tolist()],
        hovertemplate=t("rank_n", r="%{x}") + ": %{customdata:.2e}<extra></extra>",
    )
    ui.hline(fig, 1e-10, t("bound"), log=True, dash="dash")
    ui.style(fig, t("t_exact"), t("x_rank"), t("y_rel"), height=340, legend=False)
    ui.log_axis(fig, "y")
    fig.update_yaxes(range=[-18, -8], exponentformat="power")
    fig.update_xaxes(dtick=1)
    cols = {"rank": np.arange(d.P), "o_rel": d.o_rel, "S_in_rel": d.S_in_rel}
    return fig, ui.write_csv(f"{NAME}-exactness", cols)


def fig_bytes(d: cps.Demo, t: Lang) -> tuple[go.Figure, str]:
    """Both scans for this demo's layer, then for one K3 layer next to its MLA KV all-gather
    (the demo layer has no MLA layer: no KV bar there)."""
    fig = go.Figure()
    groups = [t("g_demo"), t("g_k3")]
    other = "allgather" if d.scan == "logdepth" else "logdepth"
    demo_b = {d.scan: int(d.bytes_sent.max()), other: int(d.bytes_other.max())}
    for i, scan in enumerate(SCANS):
        fig.add_bar(
            x=groups,
            y=[demo_b[scan], d.k3_scan_bytes[scan]],
            name=t(f"scan_{scan}"),
            marker_color=SERIES[i],
            hovertemplate="%{x}: %{y:,} B<extra></extra>",
        )
    fig.add_bar(
        x=groups[1:],
        y=[d.kv_bytes],
        name=t("l_kv"),
        marker_color=COLORS["kv"],
        hovertemplate="%{x}: %{y:,} B<extra></extra>",
    )
    ui.style(fig, t("t_bytes", T=d.T, P=d.P), "", t("y_bytes"), height=360)
    ui.log_axis(fig, "y")
    fig.update_layout(barmode="group")
    cols = exports.columns("cp_bytes", d, ("demo_layer", "k3_layer"))  # data names, any language
    return fig, ui.write_csv(f"{NAME}-bytes", cols)


SPEEDUP_T = (8192, 32768, 131072, 1 << 20)


def _k(T: int) -> str:
    return f"{T >> 20}M" if T >= 1 << 20 else f"{T >> 10}k"


def fig_speedup(models: dict[int, cps.CostModel], t: Lang) -> tuple[go.Figure, str]:
    """Log-depth at every context of SPEEDUP_T; all-gather at 32k (dotted) for contrast."""
    fig = go.Figure()
    P = next(iter(models.values())).P
    fig.add_scatter(
        x=P, y=P, mode="lines", name=t("l_ideal"), line={"color": COLORS["neutral"], "dash": "dash"}
    )
    for i, (T, m) in enumerate(models.items()):
        for scan in SCANS:
            if scan == "allgather" and T != 32768:
                continue
            fig.add_scatter(
                x=P,
                y=m.speedup[scan],
                mode="lines+markers",
                name=t("l_ctx", scan=t(f"scan_{scan}"), T=_k(T)),
                line={"color": SERIES[i], "dash": "dot" if scan == "allgather" else "solid"},
                hovertemplate=f"T={_k(T)}, P=%{{x}}: ×%{{y:.2f}}<extra></extra>",
            )
    ui.style(fig, t("t_speedup"), t("x_P"), t("y_speedup"), height=400)
    ui.log_axis(fig, "x", P, fmt=lambda v: f"{v:g}")
    ui.log_axis(fig, "y", [1, 2, 4, 8, 16, 32, 64], fmt=lambda v: f"{v:g}")
    return fig, ui.write_csv(f"{NAME}-speedup", exports.columns("cp_speedup", models))
