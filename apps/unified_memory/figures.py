"""unified_memory's plotly figures (what ``kda_core.studies.memory`` returns), drawn in the
language of ``t``; each returns (figure, CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import memory as mem
from words.catalog import T as Lang

NAME = "unified_memory"
GIB = float(1 << 30)
_SEGMENTS = (  # the buffer from the state end to the KV end
    ("state_live", COLORS["state"]),
    ("state_holes", "#f4a6a6"),
    ("free", COLORS["free"]),
    ("kv_holes", "#a9c8e8"),
    ("kv_live", COLORS["kv"]),
)


def pool_color(i: int) -> str:
    """Categorical colours of the running/ratio figures: 0 unified (black), 1 best static,
    2.. static tuned for each phase (palette.SERIES in a fixed order, never a semantic colour)."""
    return "black" if i == 0 else SERIES[(i + 1) % len(SERIES)]


def _pools(c: mem.Comparison, t: Lang) -> list[tuple[str, mem.ReplayResult]]:
    rows = [(t("pool_unified", mode=t(f"mode_{c.unified.kind}")), c.unified)]
    rows += [(t("pool_static", r=r), res) for r, res in zip(c.ratios.tolist(), c.static)]
    return rows


def buffer_figure(
    c: mem.Comparison, step: int, state_slot_bytes: int, t: Lang
) -> tuple[go.Figure, str]:
    """Every pool's buffer at ``step`` (``memory.buffer_at``): state live | state holes | free |
    KV holes | KV live; a black tick marks each static partition's border."""
    T = c.unified.total_bytes
    b = mem.buffer_at(c, step, state_slot_bytes)
    names = [label for label, _ in _pools(c, t)]
    keys = (
        "state_live",
        "state_holes",
        "free",
        "kv_holes",
        "kv_live",
        "running",
        "queued",
        "blocked",
    )
    cols = {k: getattr(b, k) for k in keys}
    fig = go.Figure()
    base = np.zeros(len(names))
    for key, color in _SEGMENTS:
        label = t(f"seg_{key}")
        w = np.asarray(cols[key], dtype=np.float64) / GIB
        fig.add_bar(
            y=names,
            x=w,
            base=base.copy(),
            orientation="h",
            name=label,
            marker_color=color,
            customdata=np.stack([cols["running"], cols["queued"]], axis=1),
            hovertemplate="%{y}<br>"
            + t(
                "h_segment",
                seg=label,
                gib="%{x:.2f}",
                run="%{customdata[0]}",
                queued="%{customdata[1]}",
            )
            + "<extra></extra>",
        )
        base = base + w
    for i, e in enumerate(b.state_edge.tolist()):
        if np.isfinite(e):
            fig.add_shape(
                type="line",
                x0=e / GIB,
                x1=e / GIB,
                y0=i - 0.45,
                y1=i + 0.45,
                line={"color": "black", "width": 2},
            )
    met = [n for n, bl in zip(names, cols["blocked"].tolist()) if bl]
    title = t("t_buffer", step=step, n=c.unified.makespan)
    if met:  # counted here, named on their rows (a list in the title was cut with "…")
        title = t("t_buffer_full", step=step, n=c.unified.makespan, k=len(met), m=len(names))
        ticks = [t("row_full", pool=n) if n in met else n for n in names]
        fig.update_yaxes(tickvals=names, ticktext=ticks)
    ui.style(fig, title, t("x_offset_gib"), "", height=170 + 34 * len(names))
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(range=[0, T / GIB])
    fig.update_yaxes(autorange="reversed")
    pools = [f"unified ({c.unified.kind})"] + [f"static r={r:.3g}" for r in c.ratios.tolist()]
    csv = ui.write_csv(f"{NAME}-buffer-step{step}", {"pool": pools, **cols})
    return fig, csv


def frontier_figure(c: mem.Comparison, t: Lang) -> tuple[go.Figure, str]:
    tl = c.unified.timeline
    x = np.arange(tl.running.shape[0])
    T = c.unified.total_bytes / GIB
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=tl.state_frontier / GIB,
        name=t("l_state_front"),
        line={"color": COLORS["state"], "width": 2},
        hovertemplate=t("h_state_end", x="%{x}", y="%{y:.2f}") + "<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=tl.kv_frontier / GIB,
        name=t("l_kv_front"),
        line={"color": COLORS["kv"], "width": 2},
        hovertemplate=t("h_kv_end", x="%{x}", y="%{y:.2f}") + "<extra></extra>",
    )
    b = np.flatnonzero(tl.blocked)
    if b.size:
        fig.add_scatter(
            x=b,
            y=tl.state_frontier[b] / GIB,
            mode="markers",
            name=t("l_blocked", n=b.size),
            marker={"color": "black", "symbol": "x", "size": 7},
            hovertemplate=t("h_blocked", x="%{x}") + "<extra></extra>",
        )
    mv = np.flatnonzero(tl.moves)
    fig.add_bar(
        x=x[mv],
        y=tl.moves[mv],
        name=t("l_moves", n=c.unified.total_moves),
        marker_color=COLORS["neutral"],
        yaxis="y2",
        opacity=0.6,
        hovertemplate=t("h_moves", x="%{x}", y="%{y:,}") + "<extra></extra>",
    )
    mode = t(f"mode_{c.unified.kind}")
    ui.style(fig, t("t_frontiers", mode=mode), t("x_step"), t("y_offset"))
    fig.update_yaxes(range=[0, T])
    fig.update_layout(
        yaxis2={
            "title": t("y_moves"),
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "rangemode": "tozero",
        }
    )
    cols = {
        "step": x,
        "state_frontier_bytes": tl.state_frontier,
        "kv_frontier_bytes": tl.kv_frontier,
        "state_bytes": tl.state_bytes,
        "kv_bytes": tl.kv_bytes,
        "blocked": tl.blocked,
        "moves": tl.moves,
    }
    return fig, ui.write_csv(f"{NAME}-frontiers", cols)


def running_figure(c: mem.Comparison, t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    series = {}
    pools = [(t("pool_unified", mode=t(f"mode_{c.unified.kind}")), "unified", c.unified)]
    pools.append((t("pool_best", r=c.best_ratio), "best static", c.best_static))
    for name, r, res in zip(c.phase_names, c.phase_ratios, c.phase_static):
        pools.append((t("pool_tuned", phase=t.word("phase", name), r=r), f"static for {name}", res))
    # the x axis shows the unified pool's and the best static split's runs; a slower split
    # (one tuned for a single phase can take 10x longer) would squeeze both phases to the left
    base = max(c.unified.makespan, c.best_static.makespan)
    x_end = 1.05 * max(r.makespan for _, _, r in pools if r.makespan <= 2 * base)
    for i, (label, key, res) in enumerate(pools):
        tl = res.timeline
        x = np.arange(tl.running.shape[0])
        if res.makespan > x_end:
            label = t("l_off_axis", pool=label, n=res.makespan)
        fig.add_scatter(
            x=x,
            y=tl.running,
            name=label,
            line={"color": pool_color(i), "width": 3 if i == 0 else 2},
            hovertemplate=t("h_running", pool=label, x="%{x}", y="%{y}") + "<extra></extra>",
        )
        series[f"{key} running"] = (x, tl.running)
        series[f"{key} queued"] = (x, tl.queued)
    tl = c.unified.timeline
    fig.add_scatter(
        x=np.arange(tl.queued.shape[0]),
        y=tl.queued,
        name=t("l_queued"),
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate=t("h_queued", x="%{x}", y="%{y}") + "<extra></extra>",
    )
    ui.style(fig, t("t_running"), t("x_step"), t("y_requests"))
    fig.update_xaxes(range=[0, x_end])
    return fig, ui.series_csv(f"{NAME}-running", series, "step", "requests")


def ratio_figure(c: mem.Comparison, t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    fig.add_scatter(
        x=c.ratios,
        y=c.static_mean_concurrency,
        mode="lines+markers",
        name=t("l_static"),
        line={"color": SERIES[2], "width": 2},
        hovertemplate=t("h_static", x="%{x:.3g}", y="%{y:.1f}") + "<extra></extra>",
    )
    lo = float(min(c.ratios.min(), min(c.phase_ratios))) / 1.3
    hi = float(max(c.ratios.max(), max(c.phase_ratios))) * 1.3
    top = float(max(c.static_mean_concurrency.max(), c.unified.mean_concurrency)) * 1.08
    u = c.unified.mean_concurrency
    fig.add_scatter(  # lines with legend names: a label box would cover another line
        x=[lo, hi],
        y=[u] * 2,
        mode="lines",
        name=t("l_unified", c=u),
        line={"color": pool_color(0), "width": 3},
        hovertemplate=t("h_unified", c=u) + "<extra></extra>",
    )
    for j, (name, r) in enumerate(zip(c.phase_names, c.phase_ratios)):
        ph = t.word("phase", name)
        fig.add_scatter(
            x=[float(r), float(r)],
            y=[0, top],
            mode="lines",
            name=t("l_tuned", phase=ph, r=r),
            line={"color": pool_color(2 + j), "dash": "dash", "width": 1.5},
            hovertemplate=t("h_tuned", phase=ph, r=r) + "<extra></extra>",
        )
    fig.add_scatter(
        x=[c.best_ratio],
        y=[c.best_static.mean_concurrency],
        mode="markers",
        name=t("l_best", r=c.best_ratio),
        marker={"color": "black", "size": 11, "symbol": "diamond"},
        hovertemplate=t("h_best", x="%{x:.3g}", y="%{y:.1f}") + "<extra></extra>",
    )
    ui.style(fig, t("t_ratio"), t("x_ratio"), t("y_mean_running"))
    ticks = np.concatenate([c.ratios, np.asarray(c.phase_ratios)])
    ui.log_axis(fig, "x", ticks, fmt=lambda v: f"{v:.3g}")
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[0, top], rangemode="tozero")
    cols = {
        "ratio": c.ratios,
        "static_mean_concurrency": c.static_mean_concurrency,
        "static_queue_delay_steps": c.static_queue_delay,
        "static_makespan": c.static_makespan,
        "unified_mean_concurrency": np.full(c.ratios.shape, u),
    }
    return fig, ui.write_csv(f"{NAME}-ratios", cols)
