"""int8_checkpoint's plotly figures (what ``kda_core.studies.int8`` returns), drawn in the
language of ``t`` (a format's code in words: ``t.word("var", label)``); each returns (figure,
CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.int8_checkpoint.tables import bound_ratio
from apps.ui import COLORS, SERIES
from kda_core.studies import exports
from kda_core.studies import int8 as st
from words.catalog import T as Lang

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


def fig_error_map(e: st.ErrorMap, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.16,
        subplot_titles=(
            t("st_state", layer=e.layer, head=e.head),
            t("st_error", v=t.word("var", e.label)),
        ),
    )
    zs = float(np.abs(e.state).max()) or 1.0
    ze = float(np.abs(e.error).max()) or 1.0
    fig.add_heatmap(
        z=e.state,
        zmin=-zs,
        zmax=zs,
        colorscale="RdBu_r",
        row=1,
        col=1,
        colorbar={"title": {"text": "S"}, "x": 0.41, "len": 0.8, "thickness": 12},
        hovertemplate=t("h_state", y="%{y}", x="%{x}", z="%{z:.4f}") + "<extra></extra>",
    )
    fig.add_heatmap(
        z=e.error,
        zmin=-ze,
        zmax=ze,
        colorscale="RdBu_r",
        row=1,
        col=2,
        colorbar={"title": {"text": t("cb_error")}, "x": 1.0, "len": 0.8, "thickness": 12},
        customdata=e.bound,
        hovertemplate=t("h_error", y="%{y}", x="%{x}", z="%{z:.2e}", b="%{customdata:.2e}")
        + "<extra></extra>",
    )
    title = t(
        "t_errmap", v=t.word("var", e.label), e=e.max_abs_error, r=bound_ratio(e.max_bound_ratio)
    )
    ui.style(fig, title, t("x_value"), t("y_key"), height=420, legend=False)
    ui.top_margin(fig, 56)  # room for the subplot titles
    fig.update_yaxes(autorange="reversed", showline=False)
    fig.update_xaxes(showline=False)
    csv = ui.write_csv(f"{NAME}-error_map", exports.columns("int8_error_map", e))
    return fig, csv


def fig_histograms(e: st.ErrorMap, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(t("st_err_hist"), t("st_val_hist")),
    )
    ec = 0.5 * (e.err_edges[1:] + e.err_edges[:-1])
    vc = 0.5 * (e.value_edges[1:] + e.value_edges[:-1])
    fig.add_bar(
        x=ec,
        y=e.err_counts,
        width=np.diff(e.err_edges),
        row=1,
        col=1,
        name=t("l_err_hist", v=t.word("var", e.label)),
        marker_color=OTHER,
        hovertemplate=t("h_err_hist", x="%{x:.2e}", y="%{y}") + "<extra></extra>",
    )
    fig.add_bar(
        x=vc,
        y=e.value_counts,
        width=np.diff(e.value_edges),
        row=1,
        col=2,
        name=t("l_val_hist"),
        marker_color=COLORS["state"],
        hovertemplate=t("h_val_hist", x="%{x:.3f}", y="%{y}") + "<extra></extra>",
    )
    ui.style(fig, t("t_hist"), "", t("y_count"), height=380)
    ui.top_margin(fig, 56)  # room for the subplot titles
    fig.update_xaxes(title_text=t("x_err"), row=1, col=1)
    fig.update_xaxes(title_text=t("l_val_hist"), row=1, col=2)
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


def fig_divergence(d: st.Divergence, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(t("st_dist"), t("st_logit")),
    )
    runs = (
        (
            t("run_park_once"),
            RUN_COLORS["park_once"],
            d.park_once_state_dist,
            d.park_once_logit_diff,
            d.park_once_agree,
        ),
        (
            t("run_every_step"),
            RUN_COLORS["every_step"],
            d.every_step_state_dist,
            d.every_step_logit_diff,
            d.every_step_agree,
        ),
    )
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
            hovertemplate=t("h_dist", run=name, x="%{x}", y="%{y:.3g}") + "<extra></extra>",
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
            hovertemplate=t("h_logit", run=name, x="%{x}", y="%{y:.3g}") + "<extra></extra>",
        )
        bad = ~agree
        if bad.any():
            fig.add_scatter(
                x=d.steps[bad],
                y=ld[bad],
                mode="markers",
                row=1,
                col=2,
                name=t("l_differs", run=name),
                marker={"symbol": "x", "size": 12, "color": color},
                hovertemplate=t("h_differs", x="%{x}") + "<extra></extra>",
            )
    same = d.park_once_same, d.every_step_same
    n = d.decoded
    title = t("t_div", n=n, v=t.word("var", d.label), a=same[0], b=same[1])
    ui.style(fig, title, t("x_decoded"), "", height=400)
    ui.top_margin(fig, 56)  # room for the subplot titles
    fig.update_yaxes(title_text=t("y_dist"), row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text=t("y_logit"), row=1, col=2, rangemode="tozero")
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


def fig_variants(tb: st.VariantTable, chosen: str, t: Lang) -> tuple[go.Figure, str]:
    labels = list(tb.labels)
    names = [t.word("var", x) for x in labels]  # the categories in the page's language
    fig = go.Figure()
    sel = np.array([x == chosen for x in labels])
    for mask, name, color in (
        (~sel, t("l_other"), OTHER),
        (sel, t("l_selected", v=t.word("var", chosen)), SELECTED),
    ):
        if mask.any():
            fig.add_bar(
                x=[x for x, m in zip(names, mask) if m],
                y=tb.rel_fro[mask],
                name=name,
                marker_color=color,
                hovertemplate=t("h_rel", x="%{x}", y="%{y:.3g}") + "<extra></extra>",
            )
    fig.add_scatter(
        x=names,
        y=tb.bound_rel_fro,
        mode="markers",
        name=t("l_ceiling"),
        marker={"symbol": "line-ew", "size": 34, "line": {"width": 3, "color": "black"}},
        hovertemplate=t("h_ceiling", x="%{x}", y="%{y:.3g}") + "<extra></extra>",
    )
    ui.style(fig, t("t_variants"), t("x_format"), t("y_rel_log"), height=380)
    vals = np.concatenate([tb.rel_fro, tb.bound_rel_fro])
    ui.log_axis(fig, "y", ticks_125(float(vals.min()), float(vals.max())), fmt=_tick)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=names)
    csv = ui.write_csv(
        f"{NAME}-variants",
        {
            "variant": labels,
            "max_abs": tb.max_abs,
            "mean_abs": tb.mean_abs,
            "rel_fro": tb.rel_fro,
            "bound_rel_fro": tb.bound_rel_fro,
            "max_bound_ratio": tb.max_bound_ratio,
            "bound_holds": tb.bound_holds,
            "state_bytes": tb.state_bytes,
        },
    )
    return fig, csv


def fig_capacity(
    tiny: st.Capacity, k3: st.Capacity, chosen: str | None, t: Lang
) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=(
            t("st_k3", model=k3.model, tp=k3.tp, gib=k3.budget_bytes / (1 << 30)),
            t("st_tiny", model=tiny.model, mib=tiny.budget_bytes / (1 << 20)),
        ),
    )
    for col, c in ((1, k3), (2, tiny)):
        sel = np.array([x == chosen for x in c.labels])
        names = [t.word("var", x) for x in c.labels]
        cd = np.stack([c.state_bytes, c.conv_bytes, c.total_bytes], axis=1)
        for mask, name, color in (
            (~sel, t("l_fit"), COLORS["checkpoint"]),
            (sel, t("l_fit_sel", v=t.word("var", str(chosen))), SELECTED),
        ):
            if not mask.any():
                continue
            fig.add_bar(
                x=[x for x, m in zip(names, mask) if m],
                y=c.capacity[mask],
                row=1,
                col=col,
                showlegend=col == 1,
                name=name,
                legendgroup=name,
                marker_color=color,
                text=[f"×{g:.2f}" for g in c.gain[mask]],
                textposition="outside",
                customdata=cd[mask],
                hovertemplate=t(
                    "h_fit",
                    x="%{x}",
                    y="%{y:,}",
                    s="%{customdata[0]:,}",
                    c="%{customdata[1]:,}",
                    t="%{customdata[2]:,}",
                )
                + "<extra></extra>",
            )
        fig.update_xaxes(
            type="category", categoryorder="array", categoryarray=names, row=1, col=col
        )
    ui.style(fig, t("t_capacity", dtype=k3.native_dtype), "", t("y_capacity"), height=400)
    fig.update_layout(barmode="overlay")
    ui.top_margin(fig, 56)  # room for the subplot titles
    fig.update_xaxes(tickangle=-25)
    for col, c in ((1, k3), (2, tiny)):  # headroom for the "×gain" labels above the bars
        fig.update_yaxes(range=[0, 1.18 * max(int(c.capacity.max()), 1)], row=1, col=col)
    return fig, ui.write_csv(f"{NAME}-capacity", exports.columns("int8_capacity", k3, tiny))
