"""unified_memory's ratio-calculator panel drawn in the language of ``t``: its two figures
(``kda_core.studies.calculator``; each returns (figure, CSV path)) and its summary."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS
from kda_core.studies import calculator as cc
from words.catalog import T as Lang


def _tokens(v: float) -> str:
    """A tick label for a token count: 2k, 128k for multiples of 1,024, else the number."""
    return f"{int(v) // 1024}k" if v >= 1024 and v % 1024 == 0 else f"{int(v):,}"


_LINES = (
    ("calc_running", "calc_l_promised", COLORS["neutral"], "dash"),
    ("kept_running", "calc_l_kept", COLORS["replay"], "solid"),
    ("live_running", "calc_l_live", COLORS["state"], "solid"),
)


def fig_calc_running(c: cc.CalculatorCheck, t: Lang) -> tuple[go.Figure, str]:
    """Concurrency against the input length: promised, kept at r*, balanced for the states."""
    fig = go.Figure()
    hover = t("calc_h_running", x="%{x:,}", y="%{y:,}") + "<extra></extra>"
    for field, key, color, dash in _LINES:
        fig.add_scatter(
            x=c.input_lens,
            y=getattr(c, field),
            name=t(key),
            mode="lines+markers",
            line={"color": color, "dash": dash},
            hovertemplate=hover,
        )
    ui.style(fig, t("t_calc_running"), t("calc_x_len"), t("calc_y_running"))
    ui.log_axis(fig, "x", c.input_lens, fmt=_tokens)
    fig.update_yaxes(rangemode="tozero")
    csv = ui.write_csv(
        "unified_memory-calculator",
        {
            "input_len": c.input_lens,
            "calc_ratio": c.calc_ratio,
            "calc_slots": c.calc_slots,
            "calc_running": c.calc_running,
            "calc_kv_running": c.calc_kv_running,
            "checkpoints": c.checkpoints,
            "occupied": c.occupied,
            "kept_running": c.kept_running,
            "live_ratio": c.live_ratio,
            "live_running": c.live_running,
        },
    )
    return fig, csv


def fig_calc_slots(c: cc.CalculatorCheck, t: Lang) -> tuple[go.Figure, str]:
    """Slots per request (S vs occupied) and the ratio each asks for."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    x = c.input_lens
    slots = t("calc_h_slots", x="%{x:,}", y="%{y}") + "<extra></extra>"
    ratio = t("calc_h_ratio", x="%{x:,}", y="%{y:.3g}") + "<extra></extra>"
    rows = (
        (1, [c.reserved] * len(x), "calc_l_reserved", COLORS["neutral"], slots),
        (1, c.occupied, "calc_l_occupied", COLORS["state"], slots),
        (2, c.calc_ratio, "calc_l_ratio", COLORS["neutral"], ratio),
        (2, c.live_ratio, "calc_l_ratio_live", COLORS["state"], ratio),
    )
    for row, y, key, color, hover in rows:
        fig.add_scatter(
            x=x,
            y=y,
            name=t(key),
            mode="lines+markers",
            line={
                "color": color,
                "shape": "hv" if row == 1 else "linear",
                "dash": "solid" if row == 1 else "dot",
            },
            row=row,
            col=1,
            hovertemplate=hover,
        )
    ui.style(fig, t("t_calc_slots"), "", "", height=560)
    ui.log_axis(fig, "x", x, row=2, col=1, fmt=_tokens)
    ui.log_axis(fig, "x", x, row=1, col=1, fmt=_tokens)
    ui.log_axis(fig, "y", row=2, col=1)
    fig.update_xaxes(title_text=t("calc_x_len"), row=2, col=1)
    fig.update_yaxes(title_text=t("calc_y_slots"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=t("calc_y_ratio"), row=2, col=1)
    csv = ui.write_csv(
        "unified_memory-calculator-slots",
        {
            "input_len": x,
            "reserved": [c.reserved] * len(x),
            "occupied": c.occupied,
            "calc_ratio": c.calc_ratio,
            "live_ratio": c.live_ratio,
        },
    )
    return fig, csv


def calculator_markdown(c: cc.CalculatorCheck, t: Lang) -> str:
    """The panel's summary: the constants and the per-length table."""
    cap = t("s_calc_nocap") if c.max_states_per_path is None else c.max_states_per_path
    head = t(
        "s_calc_head",
        model=c.model,
        tp=c.tp,
        strategy=c.strategy,
        te=c.token_equiv,
        s=c.reserved,
        held=c.held,
        out=c.output_len,
        chunk=c.chunked_prefill_size,
        cap=cap,
    )
    lines = [head, "", t("s_calc_th"), "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, n in enumerate(c.input_lens):
        lines.append(
            f"| {int(n):,} | {c.calc_ratio[i]:.3g} | {int(c.calc_running[i])} | "
            f"{int(c.checkpoints[i])} | {int(c.occupied[i])} | {int(c.kept_running[i])} | "
            f"{c.live_ratio[i]:.3g} | {int(c.live_running[i])} |"
        )
    return "\n".join([*lines, "", t("s_calc_tail")])
