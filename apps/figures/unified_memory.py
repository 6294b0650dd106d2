"""Unified memory app: the plotly figures (what ``kda_core.studies.memory`` returns)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import memory as mem

NAME = "unified_memory"
GIB = float(1 << 30)


def pool_color(i: int) -> str:
    """Categorical colours of the running/ratio figures: 0 unified (black), 1 best static,
    2.. static tuned for each phase (palette.SERIES in a fixed order, never a semantic colour)."""
    return "black" if i == 0 else SERIES[(i + 1) % len(SERIES)]


def _pools(c: mem.Comparison) -> list[tuple[str, mem.ReplayResult]]:
    rows = [(f"unified ({c.unified.kind})", c.unified)]
    rows += [(f"static r={r:.3g}", res) for r, res in zip(c.ratios.tolist(), c.static)]
    return rows


def buffer_figure(c: mem.Comparison, step: int, state_slot_bytes: int) -> tuple[go.Figure, str]:
    """Every pool's buffer at ``step`` (``memory.buffer_at``): state live | state holes | free |
    KV holes | KV live; a black tick marks each static partition's border."""
    T = c.unified.total_bytes
    b = mem.buffer_at(c, step, state_slot_bytes)
    names = [label for label, _ in _pools(c)]
    cols = {
        k: getattr(b, k)
        for k in (
            "state_live",
            "state_holes",
            "free",
            "kv_holes",
            "kv_live",
            "running",
            "queued",
            "blocked",
        )
    }
    fig = go.Figure()
    base = np.zeros(len(names))
    segs = (
        ("state_live", "KDA state slots (live)", COLORS["state"]),
        ("state_holes", "freed state slots (holes)", "#f4a6a6"),
        ("free", "free", COLORS["free"]),
        ("kv_holes", "freed KV pages (holes)", "#a9c8e8"),
        ("kv_live", "MLA KV pages (live)", COLORS["kv"]),
    )
    for key, label, color in segs:
        w = np.asarray(cols[key], dtype=np.float64) / GIB
        fig.add_bar(
            y=names,
            x=w,
            base=base.copy(),
            orientation="h",
            name=label,
            marker_color=color,
            customdata=np.stack([cols["running"], cols["queued"]], axis=1),
            hovertemplate=f"%{{y}}<br>{label}: %{{x:.2f}} GiB<br>running %{{customdata[0]}}, "
            "queued %{customdata[1]}<extra></extra>",
        )
        base = base + w
    for i, e in enumerate(b.state_edge.tolist()):
        if not np.isfinite(e):
            continue
        edge = e / GIB
        fig.add_shape(
            type="line",
            x0=edge,
            x1=edge,
            y0=i - 0.45,
            y1=i + 0.45,
            line={"color": "black", "width": 2},
        )
    met = [n for n, bl in zip(names, cols["blocked"].tolist()) if bl]
    title = f"The buffer at step {step} of {c.unified.makespan}"
    if met:  # counted here, named on their rows (a list in the title was cut with "…")
        title += f" · {len(met)} of {len(names)} pools full (ends met)"
        fig.update_yaxes(tickvals=names, ticktext=[f"{n} · full" if n in met else n for n in names])
    ui.style(fig, title, "byte offset in the buffer (GiB)", "", height=170 + 34 * len(names))
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(range=[0, T / GIB])
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(f"{NAME}-buffer-step{step}", {"pool": names, **cols})
    return fig, csv


def frontier_figure(c: mem.Comparison, step: int | None = None) -> tuple[go.Figure, str]:
    tl = c.unified.timeline
    t = np.arange(tl.running.shape[0])
    T = c.unified.total_bytes / GIB
    fig = go.Figure()
    fig.add_scatter(
        x=t,
        y=tl.state_frontier / GIB,
        name="state frontier (grows up)",
        line={"color": COLORS["state"], "width": 2},
        hovertemplate="step %{x}<br>state end %{y:.2f} GiB<extra></extra>",
    )
    fig.add_scatter(
        x=t,
        y=tl.kv_frontier / GIB,
        name="KV frontier (grows down)",
        line={"color": COLORS["kv"], "width": 2},
        hovertemplate="step %{x}<br>KV end %{y:.2f} GiB<extra></extra>",
    )
    b = np.flatnonzero(tl.blocked)
    if b.size:
        fig.add_scatter(
            x=b,
            y=tl.state_frontier[b] / GIB,
            mode="markers",
            name=f"ends met: head of queue blocked ({b.size} steps)",
            marker={"color": "black", "symbol": "x", "size": 7},
            hovertemplate="step %{x}: blocked<extra></extra>",
        )
    mv = np.flatnonzero(tl.moves)
    fig.add_bar(
        x=t[mv],
        y=tl.moves[mv],
        name=f"compaction moves ({c.unified.total_moves:,})",
        marker_color=COLORS["neutral"],
        yaxis="y2",
        opacity=0.6,
        hovertemplate="step %{x}<br>%{y:,} moves<extra></extra>",
    )
    if step is not None:
        fig.add_vline(x=step, line={"color": COLORS["neutral"], "dash": "dot"})
    ui.style(
        fig,
        f"Unified pool ({c.unified.kind}): where the two ends are",
        "scheduler step",
        "byte offset (GiB)",
    )
    fig.update_yaxes(range=[0, T])
    fig.update_layout(
        yaxis2={
            "title": "moves per step",
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "rangemode": "tozero",
        }
    )
    csv = ui.write_csv(
        f"{NAME}-frontiers",
        {
            "step": t,
            "state_frontier_bytes": tl.state_frontier,
            "kv_frontier_bytes": tl.kv_frontier,
            "state_bytes": tl.state_bytes,
            "kv_bytes": tl.kv_bytes,
            "blocked": tl.blocked,
            "moves": tl.moves,
        },
    )
    return fig, csv


def running_figure(c: mem.Comparison) -> tuple[go.Figure, str]:
    fig = go.Figure()
    series = {}
    pools = [(f"unified ({c.unified.kind})", c.unified)]
    pools.append((f"best static r={c.best_ratio:.3g}", c.best_static))
    for name, r, res in zip(c.phase_names, c.phase_ratios, c.phase_static):
        pools.append((f"static tuned for {name} r={r:.3g}", res))
    # the x axis shows the unified pool's and the best static split's runs; a slower split
    # (one tuned for a single phase can take 10x longer) would squeeze both phases to the left
    base = max(c.unified.makespan, c.best_static.makespan)
    x_end = 1.05 * max(r.makespan for _, r in pools if r.makespan <= 2 * base)
    for i, (label, res) in enumerate(pools):
        tl = res.timeline
        t = np.arange(tl.running.shape[0])
        color = pool_color(i)
        if res.makespan > x_end:
            label = f"{label} (ends at step {res.makespan:,}, off the axis)"
        fig.add_scatter(
            x=t,
            y=tl.running,
            name=label,
            line={"color": color, "width": 3 if i == 0 else 2},
            hovertemplate=f"{label}<br>step %{{x}}<br>running %{{y}}<extra></extra>",
        )
        series[f"{label} running"] = (t, tl.running)
        series[f"{label} queued"] = (t, tl.queued)
    tl = c.unified.timeline
    fig.add_scatter(
        x=np.arange(tl.queued.shape[0]),
        y=tl.queued,
        name="queued (unified)",
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate="step %{x}<br>queued %{y}<extra></extra>",
    )
    ui.style(
        fig,
        "Running requests over time (chat phase, then long-context)",
        "scheduler step",
        "requests",
    )
    fig.update_xaxes(range=[0, x_end])
    csv = ui.series_csv(f"{NAME}-running", series, "step", "requests")
    return fig, csv


def ratio_figure(c: mem.Comparison) -> tuple[go.Figure, str]:
    fig = go.Figure()
    fig.add_scatter(
        x=c.ratios,
        y=c.static_mean_concurrency,
        mode="lines+markers",
        name="static partition",
        line={"color": SERIES[2], "width": 2},
        hovertemplate="ratio %{x:.3g}<br>mean running %{y:.1f}<extra></extra>",
    )
    lo = float(min(c.ratios.min(), min(c.phase_ratios))) / 1.3
    hi = float(max(c.ratios.max(), max(c.phase_ratios))) * 1.3
    top = float(max(c.static_mean_concurrency.max(), c.unified.mean_concurrency)) * 1.08
    fig.add_scatter(  # lines with legend names: a label box would cover another line
        x=[lo, hi], y=[c.unified.mean_concurrency] * 2, mode="lines",
        name=f"unified pool {c.unified.mean_concurrency:.1f}",
        line={"color": pool_color(0), "width": 3},
        hovertemplate=f"unified pool<br>mean running {c.unified.mean_concurrency:.1f}"
        "<extra></extra>",
    )  # fmt: skip
    for j, (name, r) in enumerate(zip(c.phase_names, c.phase_ratios)):
        fig.add_scatter(
            x=[float(r), float(r)], y=[0, top], mode="lines",
            name=f"static tuned for {name} (r={float(r):.3g})",
            line={"color": pool_color(2 + j), "dash": "dash", "width": 1.5},
            hovertemplate=f"tuned for {name}<br>ratio {float(r):.3g}<extra></extra>",
        )  # fmt: skip
    fig.add_scatter(
        x=[c.best_ratio],
        y=[c.best_static.mean_concurrency],
        mode="markers",
        name=f"best static in hindsight (r={c.best_ratio:.3g})",
        marker={"color": "black", "size": 11, "symbol": "diamond"},
        hovertemplate="best static<br>ratio %{x:.3g}<br>%{y:.1f}<extra></extra>",
    )
    ui.style(
        fig,
        "Mean running requests: unified pool vs static ratios",
        "static ratio state : KV (log scale)",
        "mean running requests",
    )
    ticks = np.concatenate([c.ratios, np.asarray(c.phase_ratios)])
    ui.log_axis(fig, "x", ticks, fmt=lambda v: f"{v:.3g}")
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[0, top], rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-ratios",
        {
            "ratio": c.ratios,
            "static_mean_concurrency": c.static_mean_concurrency,
            "static_queue_delay_steps": c.static_queue_delay,
            "static_makespan": c.static_makespan,
            "unified_mean_concurrency": np.full(c.ratios.shape, c.unified.mean_concurrency),
        },
    )
    return fig, csv
