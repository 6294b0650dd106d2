"""chunk_scan's plotly figures (what ``kda_core.studies.chunk_scan`` returns), drawn in the
language of ``t``; each returns (figure, CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import SERIES
from kda_core.studies import chunk_scan as cs
from kda_core.studies import exports
from words import phrases
from words.catalog import T as Lang

NAME = "chunk_scan"
FLOOR = 1e-18  # zero differences are drawn at this floor on log axes


def _your_c(fig: go.Figure, C: int, ys: np.ndarray, t: Lang, **where: int) -> None:
    """Open rings at the reader's chunk size on every curve (also when C was already swept)."""
    name = t("l_yours", C=C)
    fig.add_scatter(
        x=[C] * len(ys),
        y=ys,
        mode="markers",
        name=name,
        marker={"symbol": "circle-open", "size": 14, "color": "black", "line": {"width": 2}},
        hovertemplate=f"{name}<extra></extra>",
        **where,
    )


def fig_agreement(a: cs.Agreement, chunk_size: int, t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    for i, T in enumerate(a.T_values.tolist()):
        c = SERIES[i % len(SERIES)]
        fig.add_scatter(
            x=a.chunk_sizes,
            y=np.maximum(a.o_max_abs[i], FLOOR),
            name=t("l_output", T=T),
            mode="lines+markers",
            line={"color": c, "width": 2},
            customdata=a.o_max_abs[i],
            hovertemplate=f"T={T}, C=%{{x}}<br>max |Δo| %{{customdata:.2e}}<extra></extra>",
        )
        fig.add_scatter(
            x=a.chunk_sizes,
            y=np.maximum(a.S_max_abs[i], FLOOR),
            name=t("l_state", T=T),
            mode="lines+markers",
            line={"color": c, "width": 1, "dash": "dot"},
            customdata=a.S_max_abs[i],
            hovertemplate=f"T={T}, C=%{{x}}<br>max |ΔS| %{{customdata:.2e}}<extra></extra>",
        )
    eps = float(np.finfo(np.float64).eps)
    fig.add_scatter(  # a legend entry, not a label box: nothing sits over the curves
        x=[float(a.chunk_sizes.min()), float(a.chunk_sizes.max())],
        y=[eps, eps],
        mode="lines",
        name=t("l_eps", eps=eps),
        line={"color": ui.COLORS["neutral"], "dash": "dash", "width": 1.5},
        hovertemplate=t("l_eps", eps=eps) + "<extra></extra>",
    )
    j = int(np.flatnonzero(a.chunk_sizes == chunk_size)[0])
    _your_c(fig, chunk_size, np.maximum(np.r_[a.o_max_abs[:, j], a.S_max_abs[:, j]], FLOOR), t)
    ui.style(
        fig,
        t("t_agreement", source=phrases.input_source(a.source, t)),
        t("x_chunk_log"),
        t("y_diff_log"),
    )
    ui.log_axis(fig, "x", a.chunk_sizes, fmt=lambda v: f"{v:g}")
    ui.log_axis(fig, "y")
    fig.update_yaxes(range=[-18, -10], exponentformat="power")
    return fig, ui.write_csv(f"{NAME}-agreement", exports.columns("chunk_agreement", a))


def fig_cost(c: cs.Cost, chunk_size: int, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=(t("st_steps"), t("st_flops")),
    )
    for i, T in enumerate(c.T_values.tolist()):
        col = SERIES[i % len(SERIES)]
        fig.add_scatter(
            x=c.chunk_sizes,
            y=c.chunked_steps[i],
            name=f"T={T:,}",
            mode="lines+markers",
            line={"color": col},
            legendgroup=str(T),
            row=1,
            col=1,
            hovertemplate=f"T={T:,}, C=%{{x}}<br>"
            + t("h_steps", steps="%{y:,}", T=f"{T:,}")
            + "<extra></extra>",
        )
        fig.add_scatter(
            x=c.chunk_sizes,
            y=c.flops_ratio[i],
            name=f"T={T:,}",
            mode="lines+markers",
            line={"color": col},
            legendgroup=str(T),
            showlegend=False,
            row=1,
            col=2,
            hovertemplate=f"T={T:,}, C=%{{x}}<br>"
            + t("h_flops", ratio="%{y:.2f}")
            + "<extra></extra>",
        )
    j = int(np.flatnonzero(c.chunk_sizes == chunk_size)[0])
    _your_c(fig, chunk_size, c.chunked_steps[:, j], t, row=1, col=1)
    _your_c(fig, chunk_size, c.flops_ratio[:, j], t, row=1, col=2)
    fig.data[-1].showlegend = False
    ui.style(fig, t("t_cost", H=c.H, K=c.K, V=c.V), t("x_chunk"), "")
    fig.update_yaxes(title_text=t("y_steps_log"), row=1, col=1)
    ui.log_axis(fig, "y", row=1, col=1)
    fig.update_yaxes(title_text=t("y_flops"), rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text=t("x_chunk_log"))
    for col in (1, 2):
        ui.log_axis(fig, "x", c.chunk_sizes, row=1, col=col, fmt=lambda v: f"{v:g}")
    ui.top_margin(fig, 50)
    return fig, ui.write_csv(f"{NAME}-cost", exports.columns("chunk_cost", c))


def _grouping(label: str, t: Lang) -> str:
    """A grouping of the study ("(A->B)->C", "token by token") as the page writes it."""
    try:
        return t(f"g_{label}")
    except KeyError:  # a bracketing of the segment names: no words in it
        return label.replace("->", "→")


def fig_groupings(m: cs.Composition, t: Lang) -> tuple[go.Figure, str]:
    labels = [_grouping(g, t) for g in m.grouping_labels]
    fig = go.Figure()
    for key, name, color in (  # categorical: palette.SERIES in its fixed order
        ("grouping_M_diff", t("l_dM"), SERIES[0]),
        ("grouping_b_diff", t("l_db"), SERIES[1]),
        ("grouping_S_diff", t("l_dS"), SERIES[2]),
    ):
        v = getattr(m, key)
        fig.add_bar(
            y=labels,
            x=np.maximum(v, FLOOR),
            orientation="h",
            name=name,
            marker_color=color,
            customdata=v,
            hovertemplate="%{y}<br>" + name + ": %{customdata:.2e}<extra></extra>",
        )
    eps = float(np.finfo(np.float64).eps)
    ui.vline(fig, eps, log=True, dash="dash")
    fig.add_scatter(  # the line's name in the legend (a label box would cover bars)
        x=[None],
        y=[None],
        mode="lines",
        name=t("l_eps_dashed", eps=eps),
        line={"color": ui.COLORS["neutral"], "dash": "dash", "width": 1.5},
        hoverinfo="skip",
    )
    seg = ", ".join(f"{a}={n}" for a, n in zip(m.labels, m.lengths.tolist()))
    ui.style(fig, t("t_groupings", seg=seg), t("x_maxdiff"), "", height=420)
    top = max(float(np.max([m.grouping_M_diff, m.grouping_b_diff, m.grouping_S_diff])), eps)
    ui.log_axis(fig, "x")
    fig.update_xaxes(range=[-18.5, np.log10(top) + 0.8], exponentformat="power")
    ui.top_margin(fig, 34)
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(
        f"{NAME}-groupings",
        {
            "grouping": list(m.grouping_labels),
            "M_max_abs": m.grouping_M_diff,
            "b_max_abs": m.grouping_b_diff,
            "S_max_abs": m.grouping_S_diff,
        },
    )
    return fig, csv


ORDER_LABELS_MAX = 12  # more orders than this (5 segments: 120) are drawn sorted, unlabelled


def fig_orders(m: cs.Composition, t: Lang) -> tuple[go.Figure, str]:
    """Relative state distance of every order of the segment maps; the true order is 0. With
    more than ORDER_LABELS_MAX orders the bars are sorted by distance and the order itself is
    in the hover (120 rotated labels are unreadable)."""
    labels = [s.replace("->", "→") for s in m.order_labels]
    many = len(labels) > ORDER_LABELS_MAX
    idx = np.argsort(m.order_S_rel, kind="stable") if many else np.arange(len(labels))
    x = list(range(1, len(labels) + 1)) if many else labels
    true_pos = int(np.flatnonzero(idx == 0)[0])
    colors = [SERIES[2] if i == 0 else SERIES[1] for i in idx]  # categorical: true vs others
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=m.order_S_rel[idx],
        marker_color=colors,
        name=t("l_distance"),
        customdata=np.stack(
            [np.array(labels, dtype=object)[idx], m.order_M_diff[idx], m.order_b_diff[idx]],
            axis=1,
        ),
        hovertemplate="%{customdata[0]}<br>‖S − S_true‖/‖S_true‖ = %{y:.3g}<br>max |ΔM| "
        "%{customdata[1]:.3g}, max |Δb| %{customdata[2]:.3g}<extra></extra>",
    )
    top = float(np.max(m.order_S_rel)) or 1.0
    for name, color in (
        (t("l_true", order=x[true_pos] if not many else labels[0]), SERIES[2]),
        (t("l_other"), SERIES[1]),
    ):  # the colours' legend (a text box over the bars would hide them)
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            hoverinfo="skip",
            marker={"symbol": "square", "size": 12, "color": color},
        )
    ui.style(
        fig,
        t("t_orders_many", n=len(labels)) if many else t("t_orders"),
        t("x_orders_sorted") if many else t("x_orders"),
        "‖S − S_true‖ / ‖S_true‖",
    )
    fig.data[0].showlegend = False
    fig.update_yaxes(range=[0, top * 1.15])
    if many:
        fig.update_xaxes(showticklabels=False, ticks="")
    csv = ui.write_csv(
        f"{NAME}-orders",
        {
            "order": list(m.order_labels),
            "M_max_abs": m.order_M_diff,
            "b_max_abs": m.order_b_diff,
            "S_rel": m.order_S_rel,
        },
    )
    return fig, csv


def fig_maps(m: cs.Composition, t: Lang) -> tuple[go.Figure, str]:
    d = m.M_swapped - m.M_true
    lim = float(np.abs(d).max()) or 1.0
    swapped = m.order_labels[1].replace("->", "→")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.2,
        subplot_titles=(
            t("st_M", order=m.order_labels[0].replace("->", "→"), head=m.head),
            t("st_dM", order=swapped),
        ),
    )
    fig.add_heatmap(
        z=m.M_true,
        colorscale="Viridis",
        coloraxis="coloraxis",
        row=1,
        col=1,
        hovertemplate=t("h_map", row="%{y}", col="%{x}") + "<br>M = %{z:.4f}<extra></extra>",
    )
    fig.add_heatmap(
        z=d,
        colorscale="RdBu_r",  # the suite's diverging orientation: negative blue, positive red
        zmid=0,
        zmin=-lim,
        zmax=lim,
        row=1,
        col=2,
        colorbar={"title": "Δ", "x": 1.02},
        hovertemplate=t("h_map", row="%{y}", col="%{x}") + "<br>ΔM = %{z:.2e}<extra></extra>",
    )
    ui.style(fig, t("t_maps"), t("x_col"), t("y_row"), height=420, legend=False)
    fig.update_layout(
        coloraxis={"colorscale": "Viridis", "colorbar": {"x": 0.41, "title": "M"}},
    )
    ui.top_margin(fig, 50)
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="", row=1, col=2)
    csv = ui.write_csv(f"{NAME}-maps", exports.columns("chunk_maps", m))
    return fig, csv


def fig_timing(runs: list[cs.Timing], t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    series: dict[str, tuple] = {}
    for n, run in enumerate(runs, 1):
        dash = "solid" if n == len(runs) else "dot"
        fig.add_scatter(
            x=run.T_values,
            y=run.recurrent_s * 1e3,
            name=t("l_run_rec", n=n),
            mode="lines+markers",
            line={"color": SERIES[0], "dash": dash},
            hovertemplate="T=%{x}<br>" + t("h_rec", ms="%{y:.2f}") + "<extra></extra>",
        )
        series[f"run{n} recurrent"] = (run.T_values, run.recurrent_s)
        for j, C in enumerate(run.chunk_sizes.tolist()):
            fig.add_scatter(
                x=run.T_values,
                y=run.chunked_s[:, j] * 1e3,
                name=t("l_run_chunk", n=n, C=C),
                mode="lines+markers",
                line={"color": SERIES[(j + 1) % len(SERIES)], "dash": dash},
                customdata=run.speedup[:, j],
                hovertemplate=f"T=%{{x}}, C={C}<br>"
                + t("h_chunk", ms="%{y:.2f}", x="%{customdata:.2f}")
                + "<extra></extra>",
            )
            series[f"run{n} chunked C={C}"] = (run.T_values, run.chunked_s[:, j])
    last = runs[-1]
    ui.style(fig, t("t_timing", H=last.H, K=last.K, V=last.V, r=last.repeats), t("x_T"), t("y_ms"))
    ui.log_axis(fig, "x", last.T_values, fmt=lambda v: f"{v:,.0f}")
    ms = np.concatenate([np.r_[r.recurrent_s, r.chunked_s.ravel()] * 1e3 for r in runs])
    ui.log_axis(fig, "y", ui.log_ticks(float(ms.min()), float(ms.max())))
    return fig, ui.series_csv(f"{NAME}-timing", series, "T", "seconds")
