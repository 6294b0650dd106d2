"""checkpoint_density's SWA-vs-KDA panel drawn in the language of ``t``: its two figures
(``kda_core.studies.swa_vs_kda``; each returns (figure, CSV path)) and its summary."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS
from kda_core.studies import swa_vs_kda as sk
from words.catalog import T as Lang

NAME = "checkpoint_density"
GIB = float(1 << 30)
TIB = float(1 << 40)


def fig_swa_cost(c: sk.CheckpointCosts, t: Lang) -> tuple[go.Figure, str]:
    """Bytes of one checkpoint against W: the SWA window grows, the KDA state does not."""
    fig = go.Figure()
    swa = c.swa_window_bytes / GIB
    kda = np.full(len(c.windows), c.kda_checkpoint_bytes / GIB)
    fig.add_scatter(
        x=c.windows,
        y=swa,
        name=t("l_swa_window"),
        mode="lines+markers",
        line={"color": COLORS["kv"]},
        hovertemplate=t("h_swa_cost", x="%{x:,}", y="%{y:.3g}"),
    )
    fig.add_scatter(
        x=c.windows,
        y=kda,
        name=t("swa_l_kda_ckpt"),
        mode="lines",
        line={"color": COLORS["state"], "width": 3},
        hovertemplate=t("h_swa_cost", x="%{x:,}", y="%{y:.3g}"),
    )
    ui.style(
        fig, t("t_swa_cost", model=c.model, layers=c.layers), t("x_swa_window"), t("swa_y_gib")
    )
    ui.log_axis(fig, "x", c.windows)
    lo = min(float(swa.min()), float(kda[0]))
    ui.log_axis(fig, "y", ui.log_ticks(lo, max(float(swa.max()), float(kda[0]))))
    ui.vline(
        fig,
        c.crossover_window,
        t("swa_a_crossover", w=c.crossover_window),
        log=True,
        y=0.98,
        xanchor="right",
    )
    csv = ui.write_csv(
        "checkpoint_density-swa-cost",
        {
            "window_tokens": c.windows,
            "swa_window_bytes": c.swa_window_bytes,
            "kda_checkpoint_bytes": [c.kda_checkpoint_bytes] * len(c.windows),
        },
    )
    return fig, csv


def fig_swa_resume(r: sk.WorkloadResume, trace: str, t: Lang) -> tuple[go.Figure, str]:
    """Per interval k: tokens replayed (SWA, SWA with a rebuilt window, KDA) and bytes held;
    ``trace`` names the requests in ``t``'s language."""
    k = [f"{int(v):,}" for v in r.intervals]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    bars = (
        (r.swa_replay, "l_swa_replay", COLORS["kv"]),
        (r.swa_rebuild_replay, "l_swa_rebuilt", COLORS["conv"]),
        (r.kda_replay, "swa_l_kda_replay", COLORS["state"]),
    )
    for y, key, color in bars:
        fig.add_bar(
            x=k,
            y=y,
            name=t(key),
            marker_color=color,
            row=1,
            col=1,
            hovertemplate=t("swa_h_tokens", x="%{x}", y="%{y:,}") + "<extra></extra>",
        )
    for y, key, color in (
        (r.swa_bytes, "l_swa_bytes", COLORS["kv"]),
        (r.kda_bytes, "swa_l_kda_bytes", COLORS["state"]),
    ):
        fig.add_bar(
            x=k,
            y=y / TIB,
            name=t(key),
            marker_color=color,
            marker_pattern_shape="/",
            row=2,
            col=1,
            hovertemplate=t("swa_h_tib", x="%{x}", y="%{y:.3g}") + "<extra></extra>",
        )
    title = t("t_swa_resume", n=r.requests, trace=trace, m=r.token_match, w=r.window)
    ui.style(fig, title, "", "", height=620)
    fig.update_layout(barmode="group")
    fig.update_xaxes(type="category")
    fig.update_xaxes(title_text=t("swa_x_interval"), row=2, col=1)
    fig.update_yaxes(title_text=t("swa_y_replay"), row=1, col=1)
    fig.update_yaxes(title_text=t("swa_y_tib"), row=2, col=1)
    csv = ui.write_csv(
        "checkpoint_density-swa-resume",
        {
            "interval": r.intervals,
            "swa_resume": r.swa_resume,
            "kda_resume": r.kda_resume,
            "swa_replay": r.swa_replay,
            "swa_rebuild_replay": r.swa_rebuild_replay,
            "kda_replay": r.kda_replay,
            "swa_bytes": r.swa_bytes,
            "kda_bytes": r.kda_bytes,
        },
    )
    return fig, csv


def swa_markdown(c: sk.CheckpointCosts, r: sk.WorkloadResume, t: Lang) -> str:
    """The panel's summary: the two checkpoint costs and the resume table."""
    lines = [
        t(
            "s_swa_head",
            model=c.model,
            tok=c.swa_bytes_per_token / (1 << 20),
            kda=c.kda_checkpoint_bytes / (1 << 20),
            cross=c.crossover_window,
        ),
        "",
        t("s_swa_th"),
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for i, k in enumerate(r.intervals):
        lines.append(
            f"| {int(k):,} | {int(r.swa_resume[i]):,} | {int(r.kda_resume[i]):,} | "
            f"{int(r.swa_replay[i]):,} | {int(r.swa_rebuild_replay[i]):,} | "
            f"{int(r.kda_replay[i]):,} |"
        )
    return "\n".join([*lines, "", t("s_swa_tail")])
