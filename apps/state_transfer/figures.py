"""state_transfer's plotly figures (what ``kda_core.studies.transfer`` returns), drawn in the
language of ``t`` (a study's names worded by prefix); each returns (figure, CSV path)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies import exports
from kda_core.studies import transfer as st
from words.catalog import T as Lang

NAME = "state_transfer"
KIND_COLORS = {
    "publish": COLORS["prefill"],
    "fetch": COLORS["kv"],
    "lookup": COLORS["neutral"],
    "restore": COLORS["checkpoint"],
    "refuse": COLORS["state"],
    "serve": COLORS["decode"],
    "host_load": COLORS["hit"],
    "offload": COLORS["conv"],
}


def anatomy_figure(a: st.Anatomy, t: Lang) -> tuple[go.Figure, str]:
    names = [t.word("part", p) for p in a.parts]
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=a.k3_bytes,
        name=t("l_k3"),
        marker_color=SERIES[0],
        text=[ui.compact(v) + "B" for v in a.k3_bytes.tolist()],
    )
    fig.add_bar(
        x=names,
        y=a.tiny_bytes,
        name=t("l_tiny", n=a.tiny_tokens),
        marker_color=SERIES[1],
        text=[ui.compact(v) + "B" for v in a.tiny_bytes.tolist()],
    )
    ui.style(fig, t("t_anat", tp=a.tp, tokens=a.tokens), t("x_part"), t("y_bytes"), height=380)
    sizes = np.concatenate([a.k3_bytes, a.tiny_bytes]).astype(np.float64)
    lo, hi = int(np.floor(np.log10(sizes.min()))), int(np.ceil(np.log10(sizes.max())))
    decades = [10.0**e for e in range(lo, hi + 1)]  # tick labels with their unit
    ui.log_axis(fig, "y", decades, fmt=lambda v: ui.compact(v) + "B")
    csv = ui.write_csv(
        f"{NAME}-anatomy",
        {"part": list(a.parts), "k3_bytes_per_gpu": a.k3_bytes, "tiny_bytes": a.tiny_bytes},
    )
    return fig, csv


def _boundary_labels(xs: list[float], bounds: list[int], near: float) -> tuple[list, list]:
    """One label per marker, except that markers closer than ``near`` (ms) share one label
    written to the right of the first ("64, 128, 160"): their labels would print over each
    other."""
    text, where = [""] * len(xs), ["top center"] * len(xs)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] - xs[i] < near:
            j += 1
        text[i] = ", ".join(str(b) for b in bounds[i : j + 1])
        where[i] = "top right" if j > i else "top center"
        i = j + 1
    return text, where


def timeline_figure(r: st.PDRun, t: Lang) -> tuple[go.Figure, str]:
    """One lane per event kind (in order of first occurrence), time on x: prefill circles,
    decode diamonds, the boundary (tokens) written at each marker. Lookup, fetch and restore
    happen at one boundary within a millisecond: in lanes none covers another."""
    fig = go.Figure()
    t0 = r.events[0].t if r.events else 0.0
    symbols = {"prefill": "circle", "decode": "diamond"}
    order = list(dict.fromkeys(e.kind for e in r.events))
    span = 1e3 * (r.events[-1].t - t0) if r.events else 0.0
    for kind in order:
        ev = [e for e in r.events if e.kind == kind]
        name = t.word("kind", kind)
        xs = [1e3 * (e.t - t0) for e in ev]
        text, where = _boundary_labels(xs, [e.boundary for e in ev], 0.06 * span)
        fig.add_scatter(
            x=xs,
            y=[name] * len(ev),
            mode="markers+text",
            text=text,
            textposition=where,
            textfont={"size": 10},
            name=name,
            marker={
                "color": KIND_COLORS.get(kind, COLORS["neutral"]),
                "size": 12,
                "symbol": [symbols.get(e.instance, "square") for e in ev],
                "line": {"color": "white", "width": 1},
            },
            customdata=[[e.instance, e.nbytes, e.detail, e.boundary] for e in ev],
            hovertemplate=t(
                "h_event",
                inst=t.word("inst", ev[0].instance),
                kind=name,
                b="%{customdata[3]}",
                nbytes="%{customdata[1]:,}",
                detail="%{customdata[2]}",
                x="%{x:.1f}",
            )
            + "<extra></extra>",
        )
    ui.style(fig, t("t_tl"), t("x_time"), "", height=120 + 44 * max(len(order), 1), legend=False)
    names = [t.word("kind", k) for k in order]
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=names[::-1])
    csv = ui.write_csv(f"{NAME}-timeline", exports.columns("transfer_timeline", r))
    return fig, csv


def splice_figure(d: st.SpliceDrift, t: Lang) -> tuple[go.Figure, str]:
    floor = 1e-17  # exact restores differ by rounding only; keep them visible on a log axis
    fig = go.Figure()
    for key, y, color in (
        ("l_clean", d.drift_clean, SERIES[0]),  # two runs: categorical colours
        ("l_splice", d.drift_splice, SERIES[2]),
    ):
        fig.add_scatter(
            x=d.steps,
            y=np.maximum(y, floor),
            name=t(key),
            mode="lines+markers",
            line={"color": color, "width": 2},
        )
    ui.style(fig, t("t_spl", n=d.boundary), t("x_step"), t("y_drift"), height=340)
    ui.log_axis(fig, "y", [10.0**e for e in range(-18, 1, 3)])  # 1e-18 ... 1
    csv = ui.write_csv(
        f"{NAME}-splice",
        {"step": d.steps, "drift_clean": d.drift_clean, "drift_splice": d.drift_splice},
    )
    return fig, csv


def tiers_figure(r: st.TierRates, t: Lang) -> tuple[go.Figure, str]:
    names = [t.word("setup", s) for s in r.setups]
    titles = (t("st_hit"), t("st_ttft"), t("st_moved"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=titles)
    colors = [SERIES[i] for i in range(len(names))]
    fig.add_bar(
        x=names,
        y=r.state_hit_rate,
        marker_color=colors,
        showlegend=False,
        row=1,
        col=1,
        text=[f"{v:.1%}" for v in r.state_hit_rate.tolist()],
    )
    fig.add_bar(
        x=names,
        y=r.ttft_mean_s,
        marker_color=colors,
        showlegend=False,
        row=1,
        col=2,
        text=[f"{v:.2f}" for v in r.ttft_mean_s.tolist()],
    )
    for j, (tier, color) in enumerate((("host", COLORS["hit"]), ("remote", COLORS["kv"]))):
        fig.add_bar(
            x=names,
            y=r.bytes_loaded[:, j] / 1e9,
            name=t(f"tier_{tier}"),
            marker_color=color,
            row=1,
            col=3,
        )
    fig.update_layout(barmode="stack")
    title = t("t_tiers", n=r.n_requests, d=r.device_ckpts, h=r.host_ckpts)
    ui.style(fig, title, "", "", height=400)
    ui.top_margin(fig, 50)
    fig.update_annotations(yshift=4)
    csv = ui.write_csv(
        f"{NAME}-tiers",
        {
            "setup": list(r.setups),
            "state_hit_rate": r.state_hit_rate,
            "ttft_mean_s": r.ttft_mean_s,
            "ttft_p95_s": r.ttft_p95_s,
            "hits_device": r.hits[:, 0],
            "hits_host": r.hits[:, 1],
            "hits_remote": r.hits[:, 2],
            "bytes_loaded_host": r.bytes_loaded[:, 0],
            "bytes_loaded_remote": r.bytes_loaded[:, 1],
            "bytes_written_host": r.bytes_written[:, 0],
            "bytes_written_remote": r.bytes_written[:, 1],
        },
    )
    return fig, csv
