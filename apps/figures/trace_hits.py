"""The trace panel's two figures (``studies.hit_reasons``, ``studies.host_coverage``), drawn
in the language of ``t``; each returns (figure, CSV path). ``name`` prefixes the CSV stem
(the panel sits in two apps)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from apps.ui.catalog import T as Lang
from kda_core.studies.hit_reasons import ENGINES, REASONS, HitReasons
from kda_core.studies.host_coverage import HostCoverage

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
REASON_COLORS = dict(zip(REASONS, (COLORS["hit"], COLORS["free"], *SERIES), strict=True))
GIB = float(1 << 30)


def fig_reasons(r: HitReasons, name: str, t: Lang) -> tuple[go.Figure, str]:
    """Per engine, the share of requests (left) and of uncached tokens (right) per reason, as
    stacked bars: SGLang and vLLM side by side on the same trace."""
    req, tok = r.share_arrays()
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=(t("hits_requests"), t("hits_tokens")),
    )
    engines = [ENGINE_NAMES[e] for e in ENGINES]
    present = [k for k in range(len(REASONS)) if req[:, k].any() or tok[:, k].any()]
    for k in present:
        reason = t(f"r_{REASONS[k]}")
        for col, shares in ((1, req), (2, tok)):
            fig.add_bar(
                x=shares[:, k],
                y=engines,
                orientation="h",
                name=reason,
                marker_color=REASON_COLORS[REASONS[k]],
                legendgroup=REASONS[k],
                showlegend=col == 1,
                row=1,
                col=col,
                hovertemplate=t("h_hits_share", engine="%{y}", reason=reason, y="%{x:.1%}")
                + "<extra></extra>",
            )
    ui.style(fig, t("t_hits_reasons", n=len(r.input_len)), "", "", height=380)
    fig.update_layout(barmode="stack", margin={"b": 140})  # the panel titles below the title
    ui.top_margin(fig, 62)
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(
        f"{name}-hit-reasons",
        {
            "reason": list(REASONS),
            **{f"{e}_request_share": req[j] for j, e in enumerate(ENGINES)},
            **{f"{e}_uncached_token_share": tok[j] for j, e in enumerate(ENGINES)},
        },
    )
    return fig, csv


def fig_coverage(c: HostCoverage, name: str, t: Lang) -> tuple[go.Figure, str]:
    """Against the HiCache host ratio: the share of resident KV pages whose prefix ends on a
    state held on the device, the host, or either."""
    fig = go.Figure()
    gib = [f"{n * c.checkpoint_bytes / GIB:.2f}" for n in c.host_states.tolist()]
    lines = (  # "either" first, under the others: a line it equals stays visible
        (c.any_share, "l_cov_any", COLORS["hit"], "solid"),
        (c.host_share, "l_cov_host", SERIES[0], "dash"),
        (c.device_share, "l_cov_device", COLORS["state"], "dot"),
    )
    for y, key, color, dash in lines:
        fig.add_scatter(
            x=[f"{s:g}" for s in c.sizes.tolist()],
            y=y,
            name=t(key),
            mode="lines+markers",
            line={"color": color, "dash": dash, "width": 3 if dash == "solid" else 2},
            customdata=list(zip(c.host_states.tolist(), gib, strict=True)),
            hovertemplate=t(
                "h_cov",
                name=t(key),
                x="%{x}",
                slots="%{customdata[0]:,}",
                gib="%{customdata[1]}",
                y="%{y:.2%}",
                pages=f"{c.resident_pages:,}",
            )
            + "<extra></extra>",
        )
    ui.style(fig, t("t_cov", d=c.device_states), t("x_cov"), t("y_cov"), height=380)
    fig.update_xaxes(type="category")  # evenly spaced: the ratios double from 0.5 on
    fig.update_yaxes(tickformat=".1%", rangemode="tozero")
    csv = ui.write_csv(
        f"{name}-kv-page-coverage",
        {
            "hicache_ratio": c.sizes,
            "host_state_slots": c.host_states,
            "resident_kv_pages": [c.resident_pages] * len(c.sizes),
            "share_state_on_device": c.device_share,
            "share_state_on_host": c.host_share,
            "share_state_either": c.any_share,
            "state_hit_rate": c.state_hit_rate,
        },
    )
    return fig, csv
