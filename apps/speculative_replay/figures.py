"""speculative_replay's plotly figures (what ``kda_core.studies.speculative`` returns)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from apps.ui.catalog import T as Lang
from kda_core.model import tokenizer
from kda_core.studies import exports
from kda_core.studies import speculative as sp

NAME = "speculative_replay"
FLOOR = 1e-17  # exact zeros on a log axis
SLOT_KIND = sp.SLOT_KINDS

# categorical colours (palette rule: SERIES in a fixed order): accepted first, rejected second
ACCEPTED, REJECTED = SERIES[0], SERIES[1]
SLOT_COLOR = {-1: COLORS["free"], 0: COLORS["neutral"], 1: ACCEPTED, 2: REJECTED}
EXACT_TICKS = (FLOOR, 1e-15, 1e-12, 1e-9, 1e-6, 1e-3, 1.0)


def _power(v: float, t: Lang) -> str:
    """Tick label of the exactness axis: FLOOR is an exact 0, the rest powers of ten."""
    return t("exact_zero") if v <= FLOOR else f"10<sup>{round(np.log10(v))}</sup>"


def _mib(v: float) -> str:
    return f"{v:g}"


def _tok(t: int) -> str:
    """A token as decoded text (`kda_core.model.tokenizer`: escaped only outside valid UTF-8)."""
    return tokenizer.display([int(t)])


def fig_verify(v: sp.VerifyStudy, t: Lang) -> tuple[go.Figure, str]:
    """Ring field norms per draft step (heatmap) over the verified / target tokens."""
    n = v.inputs.size
    steps = np.arange(n)
    acc = v.committed
    fig = make_subplots(
        rows=2, cols=1, row_heights=[0.32, 0.68], shared_xaxes=True, vertical_spacing=0.08
    )

    # bar text by width: "id byte → id byte" up to 8 steps, the input id up to 24, none
    # beyond (a 16-step strip of two-line labels was unreadable); the hover always has both
    def strip_text(a: int, b: int) -> str:
        if n <= 8:
            return f"{_tok(a)}<br>→ {_tok(b)}"
        return str(int(a)) if n <= 24 else ""

    for mask, name, color in (
        (acc, t("l_committed"), ACCEPTED),
        (~acc, t("l_rejected"), REJECTED),
    ):
        if mask.any():
            fig.add_bar(
                x=steps[mask],
                y=np.ones(mask.sum()),
                name=name,
                marker_color=color,
                text=[strip_text(a, b) for a, b in zip(v.inputs[mask], v.targets[mask])],
                textposition="inside",
                textangle=0,
                insidetextanchor="middle",
                row=1,
                col=1,
                textfont={"size": 11 if n <= 8 else 10},
                constraintext="none",
                customdata=np.stack(
                    [[_tok(a) for a in v.inputs[mask]], [_tok(b) for b in v.targets[mask]]],
                    axis=1,
                ),
                hovertemplate=t("h_strip", x="%{x}", a="%{customdata[0]}", b="%{customdata[1]}")
                + "<extra></extra>",
            )
    fig.add_heatmap(
        z=np.log10(np.maximum(v.ring_norms, FLOOR)),
        x=steps,
        y=list(sp.FIELDS),
        row=2,
        col=1,
        colorscale="Viridis",
        colorbar={"title": {"text": "log10 ‖·‖"}, "len": 0.6, "y": 0.3},
        customdata=v.ring_norms,
        hovertemplate=t("h_norm", x="%{x}", y="%{y}", v="%{customdata:.3g}") + "<extra></extra>",
    )
    fig.add_vline(x=v.n_accept - 0.5, line={"color": "black", "dash": "dash", "width": 2})
    title = t("t_verify", d=v.draft_tokens, a=v.n_accept, g=v.natural_accept, layer=v.layer)
    ui.style(fig, title, "", "", height=440)
    fig.update_yaxes(visible=False, row=1, col=1)
    fig.update_yaxes(title_text=t("y_field"), row=2, col=1, autorange="reversed")
    fig.update_xaxes(
        title_text=t("x_draft_step"),
        row=2,
        col=1,
        tickmode="linear",
        dtick=1,
    )
    fig.update_layout(barmode="overlay", bargap=0.05)
    cols = {"step": steps, "input": v.inputs, "target": v.targets, "committed": acc}
    for f, row in zip(sp.FIELDS, v.ring_norms):
        cols[f"norm_{f}"] = row
    return fig, ui.write_csv(f"{NAME}-verify", cols)


def fig_ring(v: sp.VerifyStudy, t: Lang) -> tuple[go.Figure, str]:
    """The L ring slots after verify and after commit: which position each holds."""
    L = v.ring_len
    rows = (t("stage_verify"), t("stage_commit"))
    fig = go.Figure()
    shown: set[int] = set()
    for r, pos, kind in zip(
        rows, (v.pos_after_verify, v.pos_after_commit), (v.kind_after_verify, v.kind_after_commit)
    ):
        for k in (1, 2, 0, -1):
            m = kind == k
            if not m.any():
                continue
            fig.add_bar(
                x=np.ones(int(m.sum())),
                base=np.arange(L)[m] - 0.5,
                y=[r] * int(m.sum()),
                orientation="h",
                width=0.6,
                name=t(f"slot_{k}"),
                legendgroup=SLOT_KIND[k],
                showlegend=k not in shown,
                marker={"color": SLOT_COLOR[k], "line": {"width": 1, "color": "white"}},
                text=[str(p) if p >= 0 else "" for p in pos[m]],
                textposition="inside",
                insidetextanchor="middle",
                customdata=np.stack([np.arange(L)[m], pos[m]], 1),
                hovertemplate=t(
                    "h_slot",
                    stage=r,
                    s="%{customdata[0]}",
                    p="%{customdata[1]}",
                    kind=t(f"slot_{k}"),
                )
                + "<extra></extra>",
            )
            shown.add(k)
    title = (
        t("t_ring", L=L, a=v.n_accept, d=v.draft_tokens, w=v.committed_window)
        if v.committed_window >= 0
        else t("t_ring_none", L=L)
    )
    ui.style(fig, title, t("x_ring_slot"), "", height=300)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(range=[-0.5, L - 0.5], tickmode="linear", dtick=1 if L <= 32 else 8)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=list(rows))
    cols = exports.columns("spec_ring", v, ("after verify", "after commit"))  # data names
    return fig, ui.write_csv(f"{NAME}-ring", cols)


def fig_exactness(v: sp.VerifyStudy, t: Lang) -> tuple[go.Figure, str]:
    m = np.arange(v.draft_tokens + 1)
    fig = go.Figure()
    for y, name, color in (
        (v.fold_bf16_error, t("l_fold_bf16"), SERIES[0]),
        (v.fold_error, t("l_fold"), SERIES[1]),
        (v.commit_error, t("l_commit"), SERIES[2]),
    ):
        fig.add_scatter(
            x=m,
            y=np.maximum(y, FLOOR),
            mode="lines+markers",
            name=name,
            line={"color": color, "width": 2},
            customdata=y,
            hovertemplate=t("h_exact", x="%{x}", v="%{customdata:.3g}") + "<extra></extra>",
        )
    ui.vline(fig, v.n_accept, t("this_commit", a=v.n_accept), color="black", xanchor="right")
    title = t("t_exact", le=v.logits_error, re=v.reconstruct_error)
    ui.style(fig, title, t("x_accepted"), t("y_state_err"), height=380)
    ui.log_axis(fig, "y", EXACT_TICKS, fmt=lambda x: _power(x, t))
    fig.update_xaxes(tickmode="linear", dtick=1 if v.draft_tokens <= 16 else 4)
    csv = ui.write_csv(
        f"{NAME}-exactness",
        {
            "accepted": m,
            "commit_error": v.commit_error,
            "fold_error": v.fold_error,
            "fold_bf16_error": v.fold_bf16_error,
        },
    )
    return fig, csv


def fig_memory(mem: sp.MemoryOverD, d: int, t: Lang) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(
            t("st_tiny", model=mem.models[0]),
            t("st_k3", model=mem.models[1], tp=mem.tp),
        ),
    )
    mib = float(1 << 20)
    for col in (0, 1):
        for y, name, color in (
            (mem.per_draft_state_bytes[col], t("l_per_draft"), COLORS["state"]),
            (mem.ring_bytes[col], t("l_rings"), COLORS["replay"]),
            (mem.conv_window_bytes[col], t("l_conv"), COLORS["conv"]),
        ):
            fig.add_scatter(
                x=mem.d_values,
                y=y / mib,
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=col == 0,
                line={"color": color, "width": 2},
                row=1,
                col=col + 1,
                customdata=mem.ring_len,
                hovertemplate=t("h_mem", name=name, x="%{x}", L="%{customdata}", y="%{y:,.3f}")
                + "<extra></extra>",
            )
    for c in (1, 2):
        fig.add_vline(x=d, line={"color": "black", "dash": "dot"}, row=1, col=c)
    title = (
        t("t_memory", dtype=mem.dtype, r=mem.ratio[1][list(mem.d_values).index(d)], d=d)
        if d in mem.d_values
        else t("t_memory_plain")
    )
    ui.style(fig, title, t("x_D"), "", height=400)
    ui.top_margin(fig, 56)  # room for the subplot titles
    for c in (1, 2):  # decade ticks only (no stray minor "2" / "5" labels)
        ui.log_axis(fig, "y", row=1, col=c, fmt=_mib)
    fig.update_yaxes(title_text=t("y_mib"), row=1, col=1)
    return fig, ui.write_csv(f"{NAME}-memory", exports.columns("spec_memory", mem))


def fig_generation(g: sp.GenerationStudy, t: Lang) -> tuple[go.Figure, str]:
    steps = np.arange(1, g.start.size + 1)
    fig = go.Figure()
    fig.add_bar(
        x=steps,
        y=g.committed,
        name=t("l_gen_committed"),
        marker_color=ACCEPTED,
        customdata=np.stack([g.start, g.drafted], axis=1),
        hovertemplate=t("h_gen", x="%{x}", p="%{customdata[0]}", y="%{y}", d="%{customdata[1]}")
        + "<extra></extra>",
    )
    fig.add_scatter(
        x=steps,
        y=g.drafted + 1,
        mode="markers",
        name=t("l_gen_verified"),
        marker={"symbol": "line-ew", "size": 18, "line": {"width": 2, "color": "black"}},
        hovertemplate=t("h_gen_verified", x="%{x}", y="%{y}") + "<extra></extra>",
    )
    eq = t("yes") if g.equals_greedy else t("no")
    title = t(
        "t_generation",
        n=g.tokens.size,
        v=g.verify_passes,
        g=g.greedy_passes,
        eq=eq,
        le=g.logits_error,
    )
    ui.style(fig, title, t("x_verify_step"), t("y_per_verify"), height=360)
    fig.update_yaxes(rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-generation",
        {
            "verify_step": steps,
            "start": g.start,
            "drafted": g.drafted,
            "accepted": g.accepted,
            "committed": g.committed,
        },
    )
    return fig, csv


def fig_acceptance(a: sp.AcceptanceCurve, d: int, t: Lang) -> tuple[go.Figure, str]:
    fig = go.Figure()
    fig.add_scatter(
        x=a.noise,
        y=a.acceptance_rate,
        mode="lines+markers",
        name=t("l_acc_rate"),
        line={"color": SERIES[0], "width": 2},
        hovertemplate=t("h_acc", x="%{x}", y="%{y:.2f}") + "<extra></extra>",
    )
    fig.add_scatter(
        x=a.noise,
        y=a.tokens_per_step / d,
        mode="lines+markers",
        line={"dash": "dot", "color": SERIES[1], "width": 2},
        name=t("l_per_D", d=d),
        customdata=a.tokens_per_step,
        hovertemplate=t("h_per_D", x="%{x}", y="%{customdata:.2f}") + "<extra></extra>",
    )
    eq = t("yes") if a.all_equal_greedy else t("no")
    ui.style(fig, t("t_acceptance", eq=eq), t("x_noise"), t("y_fraction"), height=340)
    fig.update_yaxes(range=[0, 1.05])
    csv = ui.write_csv(
        f"{NAME}-acceptance",
        {
            "noise": a.noise,
            "acceptance_rate": a.acceptance_rate,
            "tokens_per_step": a.tokens_per_step,
        },
    )
    return fig, csv
