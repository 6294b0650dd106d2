"""INT8 checkpoint app: the plotly figures (what ``kda_core.studies.int8`` returns)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import exports
from kda_core.studies import int8 as st

NAME = "int8_checkpoint"

# categorical colours (palette rule: SERIES in a fixed order, never a semantic colour)
RUN_COLORS = {run: SERIES[i] for i, run in enumerate(st.RUNS)}  # park once, every step
OTHER, SELECTED = SERIES[0], SERIES[1]  # the formats chart: other formats vs the selected one


def ticks_125(lo: float, hi: float) -> list[float]:
    """1-2-5 tick values covering [lo, hi] (> 0): readable log ticks over a narrow range."""
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    vals = [m * 10.0**k for k in range(k0, k1 + 1) for m in (1, 2, 5)]
    inside = [v for v in vals if lo <= v <= hi]
    below = [v for v in vals if v < lo][-1:]
    above = [v for v in vals if v > hi][:1]
    return below + inside + above


def _tick(v: float) -> str:
    return f"{v:g}"


def fig_error_map(e: st.ErrorMap) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.16,
        subplot_titles=(f"parked state S (KDA layer {e.layer}, head {e.head})",
                        f"restored − S ({e.label})"),
    )  # fmt: skip
    zs = float(np.abs(e.state).max()) or 1.0
    ze = float(np.abs(e.error).max()) or 1.0
    fig.add_heatmap(
        z=e.state, zmin=-zs, zmax=zs, colorscale="RdBu_r", row=1, col=1,
        colorbar={"title": {"text": "S"}, "x": 0.41, "len": 0.8, "thickness": 12},
        hovertemplate="key k=%{y}, value v=%{x}<br>S %{z:.4f}<extra></extra>",
    )  # fmt: skip
    fig.add_heatmap(
        z=e.error, zmin=-ze, zmax=ze, colorscale="RdBu_r", row=1, col=2,
        colorbar={"title": {"text": "error"}, "x": 1.0, "len": 0.8, "thickness": 12},
        customdata=e.bound,
        hovertemplate="key k=%{y}, value v=%{x}<br>error %{z:.2e}<br>bound %{customdata:.2e}"
        "<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        f"Error map of {e.label}: max |error| {e.max_abs_error:.2e}, "
        f"max error / bound {e.max_bound_ratio:.4g} (≤ 1: within the bound)",
        "value channel v",
        "key channel k",
        height=420,
        legend=False,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_yaxes(autorange="reversed", showline=False)
    fig.update_xaxes(showline=False)
    csv = ui.write_csv(f"{NAME}-error_map", exports.int8_error_map_columns(e))
    return fig, csv


def fig_histograms(e: st.ErrorMap) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("signed error, all KDA layers", "state values, all KDA layers"),
    )  # fmt: skip
    ec = 0.5 * (e.err_edges[1:] + e.err_edges[:-1])
    vc = 0.5 * (e.value_edges[1:] + e.value_edges[:-1])
    fig.add_bar(
        x=ec,
        y=e.err_counts,
        width=np.diff(e.err_edges),
        row=1,
        col=1,
        name=f"error ({e.label})",
        marker_color=OTHER,
        hovertemplate="error %{x:.2e}<br>%{y} elements<extra></extra>",
    )
    fig.add_bar(
        x=vc,
        y=e.value_counts,
        width=np.diff(e.value_edges),
        row=1,
        col=2,
        name="state value",
        marker_color=COLORS["state"],
        hovertemplate="value %{x:.3f}<br>%{y} elements<extra></extra>",
    )
    ui.style(
        fig,
        "Histograms: where the rounding error and the values fall",
        "",
        "elements (count, log scale)",
        height=380,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_xaxes(title_text="restored − S", row=1, col=1)
    fig.update_xaxes(title_text="state value", row=1, col=2)
    for c in (1, 2):  # decade ticks only (no stray minor "2" / "5" labels)
        ui.log_axis(fig, "y", row=1, col=c)
    fig.update_layout(bargap=0.02)
    csv = ui.series_csv(
        f"{NAME}-histograms",
        {"error": (ec, e.err_counts), "state_value": (vc, e.value_counts)},
        "bin_center",
        "count",
    )
    return fig, csv


def fig_divergence(d: st.Divergence) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("state distance to the exact run", "max |logit − exact logit|"),
    )  # fmt: skip
    runs = (
        ("quantized once at parking", RUN_COLORS["park_once"], d.park_once_state_dist,
         d.park_once_logit_diff, d.park_once_agree),
        ("re-quantized at every step", RUN_COLORS["every_step"], d.every_step_state_dist,
         d.every_step_logit_diff, d.every_step_agree),
    )  # fmt: skip
    for name, color, sd, ld, agree in runs:
        fig.add_scatter(
            x=d.steps,
            y=sd,
            mode="lines+markers",
            name=name,
            legendgroup=name,
            line={"color": color, "width": 2},
            row=1,
            col=1,
            hovertemplate=f"{name}<br>after %{{x}} tokens<br>relative distance "
            "%{y:.3g}<extra></extra>",
        )
        fig.add_scatter(
            x=d.steps[1:],
            y=ld[1:],
            mode="lines+markers",
            name=name,
            legendgroup=name,
            showlegend=False,
            line={"color": color, "width": 2},
            row=1,
            col=2,
            hovertemplate=f"{name}<br>token %{{x}}<br>max |Δlogit| %{{y:.3g}}<extra></extra>",
        )
        bad = ~agree
        if bad.any():
            fig.add_scatter(
                x=d.steps[bad],
                y=ld[bad],
                mode="markers",
                row=1,
                col=2,
                name=f"{name}: different greedy token",
                marker={"symbol": "x", "size": 12, "color": color},
                hovertemplate="token %{x}: greedy token differs<extra></extra>",
            )
    same = d.park_once_same, d.every_step_same
    n = d.decoded
    ui.style(
        fig,
        f"Decoding {n} tokens after the restore ({d.label}); same greedy token: "
        f"park once {same[0]}/{n}, every step {same[1]}/{n}",
        "tokens decoded after parking",
        "",
        height=400,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_yaxes(title_text="relative Frobenius distance", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="max |Δlogit| (logit units)", row=1, col=2, rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-divergence",
        {
            "step": d.steps,
            "park_once_state_dist": d.park_once_state_dist,
            "every_step_state_dist": d.every_step_state_dist,
            "park_once_logit_diff": d.park_once_logit_diff,
            "every_step_logit_diff": d.every_step_logit_diff,
            "park_once_agree": d.park_once_agree,
            "every_step_agree": d.every_step_agree,
        },
    )
    return fig, csv


def fig_variants(t: st.VariantTable, chosen: str) -> tuple[go.Figure, str]:
    labels = list(t.labels)
    fig = go.Figure()
    sel = np.array([x == chosen for x in labels])
    for mask, name, color in (
        (~sel, "measured ‖error‖ / ‖S‖, other formats", OTHER),
        (sel, f"measured ‖error‖ / ‖S‖, selected: {chosen}", SELECTED),
    ):
        if mask.any():
            fig.add_bar(
                x=[x for x, m in zip(labels, mask) if m], y=t.rel_fro[mask], name=name,
                marker_color=color,
                hovertemplate="%{x}<br>relative error %{y:.3g}<extra></extra>",
            )  # fmt: skip
    fig.add_scatter(
        x=labels, y=t.bound_rel_fro, mode="markers", name="theoretical ceiling",
        marker={"symbol": "line-ew", "size": 34, "line": {"width": 3, "color": "black"}},
        hovertemplate="%{x}<br>ceiling %{y:.3g}<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        "Every format on the same parked state (all KDA layers)",
        "format / scale granularity",
        "relative Frobenius error (log scale)",
        height=380,
    )
    vals = np.concatenate([t.rel_fro, t.bound_rel_fro])
    ui.log_axis(fig, "y", ticks_125(float(vals.min()), float(vals.max())), fmt=_tick)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    csv = ui.write_csv(
        f"{NAME}-variants",
        {
            "variant": labels,
            "max_abs": t.max_abs,
            "mean_abs": t.mean_abs,
            "rel_fro": t.rel_fro,
            "bound_rel_fro": t.bound_rel_fro,
            "max_bound_ratio": t.max_bound_ratio,
            "bound_holds": t.bound_holds,
            "state_bytes": t.state_bytes,
        },
    )
    return fig, csv


def fig_capacity(
    tiny: st.Capacity, k3: st.Capacity, chosen: str | None = None
) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.1,
        subplot_titles=(f"{k3.model} TP{k3.tp}, {k3.budget_bytes / (1 << 30):g} GiB",
                        f"{tiny.model} (tiny), {tiny.budget_bytes / (1 << 20):g} MiB"),
    )  # fmt: skip
    for col, c in ((1, k3), (2, tiny)):
        sel = np.array([x == chosen for x in c.labels])
        cd = np.stack([c.state_bytes, c.conv_bytes, c.total_bytes], axis=1)
        for mask, name, color in (
            (~sel, "checkpoints that fit", COLORS["checkpoint"]),
            (sel, f"checkpoints that fit, selected: {chosen}", SELECTED),
        ):
            if not mask.any():
                continue
            fig.add_bar(
                x=[x for x, m in zip(c.labels, mask) if m], y=c.capacity[mask], row=1, col=col,
                showlegend=col == 1, name=name, legendgroup=name, marker_color=color,
                text=[f"×{g:.2f}" for g in c.gain[mask]], textposition="outside",
                customdata=cd[mask],
                hovertemplate="%{x}<br>%{y:,} checkpoints<br>state %{customdata[0]:,} B + conv "
                "%{customdata[1]:,} B = %{customdata[2]:,} B each<extra></extra>",
            )  # fmt: skip
        fig.update_xaxes(
            type="category", categoryorder="array", categoryarray=list(c.labels), row=1, col=col
        )
    ui.style(
        fig,
        f"Checkpoint capacity per format (native pool {k3.native_dtype}; ×gain vs native)",
        "",
        "checkpoints in the budget (count)",
        height=400,
    )
    fig.update_layout(margin={"t": 86}, barmode="overlay")  # room for the subplot titles
    fig.update_xaxes(tickangle=-25)
    for col, c in ((1, k3), (2, tiny)):  # headroom for the "×gain" labels above the bars
        fig.update_yaxes(range=[0, 1.18 * max(int(c.capacity.max()), 1)], row=1, col=col)
    return fig, ui.write_csv(f"{NAME}-capacity", exports.int8_capacity_columns(k3, tiny))
