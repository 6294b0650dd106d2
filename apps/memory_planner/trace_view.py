"""memory_planner's trace panel drawn in the language of ``t`` (``kda_core.studies.plan_trace``):
cached tokens against the running cap per chunk size, the Pareto front and the recommended point
(``fig_trace``: figure, CSV path), and the summary with the launch command and start-up lines."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import plan_trace as pt
from words.catalog import T


def fig_trace(p: pt.TracePlan, t: T) -> tuple[go.Figure, str]:
    fig = go.Figure()
    ok = p.max_running >= 0
    for k, c in enumerate(sorted(set(p.chunk.tolist()))):
        sel = ok & (p.chunk == c)
        hover = [
            t("trace_h", r=f"{r:g}", c=c, x=int(x), y=f"{y:,.0f}")
            for r, x, y in zip(p.ratio[sel], p.max_running[sel], p.cached_tokens[sel])
        ]
        fig.add_scatter(
            x=p.max_running[sel],
            y=p.cached_tokens[sel],
            mode="markers",
            name=t("trace_l_chunk", c=c),
            marker={"color": SERIES[k % len(SERIES)], "size": 9},
            hovertext=hover,
            hoverinfo="text",
        )
    front = np.flatnonzero(p.on_front)
    front = front[np.argsort(p.max_running[front], kind="stable")]
    fig.add_scatter(
        x=p.max_running[front],
        y=p.cached_tokens[front],
        mode="lines",
        name=t("trace_l_front"),
        line={"color": COLORS["hit"]},
        hoverinfo="skip",
    )
    if p.best >= 0:
        fig.add_scatter(
            x=[p.max_running[p.best]],
            y=[p.cached_tokens[p.best]],
            mode="markers",
            name=t("trace_l_best"),
            hoverinfo="skip",
            marker={
                "color": "rgba(0,0,0,0)",
                "size": 20,
                "line": {"color": COLORS["state"], "width": 3},
            },
        )
    ui.style(fig, t("t_trace_front"), t("trace_x"), t("trace_y"))
    fig.update_yaxes(rangemode="tozero")
    csv = ui.write_csv(
        "memory_planner-trace-plan",
        {
            "mamba_full_memory_ratio": p.ratio,
            "chunked_prefill_size": p.chunk,
            "max_running": p.max_running,
            "cached_tokens": p.cached_tokens,
            "state_hit_rate": p.state_hit_rate,
            "ttft_p99_s": p.ttft_p99_s,
            "on_pareto_front": p.on_front.astype(int),
        },
    )
    return fig, csv


def trace_markdown(p: pt.TracePlan | None, t: T) -> str:
    """The summary: the trace, the recommendation (or why none), its command and log lines."""
    if p is None:
        return ""
    s = p.sweep
    name = t("bundled_name") if s.trace_name.startswith("mooncake_conv") else f"`{s.trace_name}`"
    lines = [t("trace_summary", name=name, n=s.n_requests, pts=len(s.points), failed=len(s.failed))]
    m = s.min_running or 0
    if p.best < 0:
        top = int(p.max_running.max()) if len(p.max_running) else 0
        lines.append(t("trace_none", m=m, top=top))
        return "\n\n".join(lines)
    b = p.best
    lines.append(
        t(
            "trace_best",
            i=b,
            objective=t(f"obj_{s.objective}"),
            m=m,
            r=f"{p.ratio[b]:g}",
            c=int(p.chunk[b]),
            run=int(p.max_running[b]),
            cached=f"{p.cached_tokens[b]:,.0f}",
            ttft=f"{p.ttft_p99_s[b]:.3g}",
        )
    )
    lines.append(t("trace_cmd") + f"\n\n```\n{s.launch_command}\n```")
    lines.append(t("trace_log") + "\n\n```\n" + "\n".join(s.log_lines) + "\n```")
    return "\n\n".join(lines)
