"""state_transfer: the model-state object, prefill -> decode, refusals, the splice drift, tiers.

Draws ``kda_core.studies.transfer``: ``anatomy`` (parts at Kimi K3 scale and on the tiny model,
the safetensors header), ``prefill_decode`` (the transfer timeline of a prefill instance
publishing into the embedded store and a decode instance restoring), ``mismatches`` (objects
refused by instances that differ), ``splice_drift`` (the teaching switch) and ``tier_rates``
(device / + host / + remote on the Mooncake trace).

Main actions: ``state_transfer_pd``, ``state_transfer_mismatch``, ``state_transfer_splice``,
``state_transfer_tiers``. Figures and tables follow the language switch (re-drawn from the
results kept in ``gr.State``). Every action checks its inputs in a Gradio ``validator``
(``apps.ui.guard``) first, so a rejected input leaves the page as it was.
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.state_transfer_text import (
    EN,
    LABELS_ZH,
    MIS_PLACEHOLDER,
    SPLICE_PLACEHOLDER,
    TR,
    ZH,
    T,
    metadata_markdown,
    pd_markdown,
    refusals_markdown,
)
from apps.ui import COLORS, SERIES, guard
from kda_core.studies import transfer as st

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


def _lang(lang: str | None) -> str:
    return "zh" if lang == ui.LANGS[1] else "en"


def anatomy_figure(a: st.Anatomy, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    names = [t["names"][p] for p in a.parts]
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=a.k3_bytes,
        name=t["k3"],
        marker_color=SERIES[0],
        text=[ui._compact(v) + "B" for v in a.k3_bytes.tolist()],
    )
    fig.add_bar(
        x=names,
        y=a.tiny_bytes,
        name=t["tiny"].format(n=a.tiny_tokens),
        marker_color=SERIES[1],
        text=[ui._compact(v) + "B" for v in a.tiny_bytes.tolist()],
    )
    ui.style(fig, t["anat"].format(tp=a.tp, tokens=a.tokens), t["part"], t["bytes"], height=380)
    sizes = np.concatenate([a.k3_bytes, a.tiny_bytes]).astype(np.float64)
    lo, hi = int(np.floor(np.log10(sizes.min()))), int(np.ceil(np.log10(sizes.max())))
    decades = [10.0**e for e in range(lo, hi + 1)]  # tick labels with their unit
    ui.log_axis(fig, "y", decades, fmt=lambda v: ui._compact(v) + "B")
    csv = ui.write_csv(
        f"{NAME}-anatomy",
        {"part": list(a.parts), "k3_bytes_per_gpu": a.k3_bytes, "tiny_bytes": a.tiny_bytes},
    )
    return fig, csv


def timeline_figure(r: st.PDRun, lang: str = "en") -> tuple[go.Figure, str]:
    """Every event at (time, boundary): prefill circles, decode diamonds, colour = kind."""
    t = T[lang]
    fig = go.Figure()
    t0 = r.events[0].t if r.events else 0.0
    symbols = {"prefill": "circle", "decode": "diamond"}
    for kind, color in KIND_COLORS.items():
        ev = [e for e in r.events if e.kind == kind]
        if not ev:
            continue
        fig.add_scatter(
            x=[1e3 * (e.t - t0) for e in ev],
            y=[e.boundary for e in ev],
            mode="markers",
            name=t["kinds"].get(kind, kind),
            marker={
                "color": color,
                "size": 12,
                "symbol": [symbols.get(e.instance, "square") for e in ev],
                "line": {"color": "white", "width": 1},
            },
            customdata=[[e.instance, e.nbytes, e.detail] for e in ev],
            hovertemplate=f"%{{customdata[0]}}: {t['kinds'].get(kind, kind)}<br>"
            f"{t['boundary']} = %{{y}}<br>%{{customdata[1]:,}} B<br>%{{customdata[2]}}<br>"
            "%{x:.1f} ms<extra></extra>",
        )
    ui.style(fig, t["tl"], t["time"], t["boundary"], height=360)
    csv = ui.write_csv(
        f"{NAME}-timeline",
        {
            "t_ms": [1e3 * (e.t - t0) for e in r.events],
            "instance": [e.instance for e in r.events],
            "kind": [e.kind for e in r.events],
            "boundary": [e.boundary for e in r.events],
            "bytes": [e.nbytes for e in r.events],
        },
    )
    return fig, csv


def splice_figure(d: st.SpliceDrift, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    floor = 1e-17  # exact restores differ by rounding only; keep them visible on a log axis
    fig = go.Figure()
    for key, y, color in (
        ("clean", d.drift_clean, SERIES[0]),  # two runs: categorical colours
        ("splice", d.drift_splice, SERIES[2]),
    ):
        fig.add_scatter(
            x=d.steps,
            y=np.maximum(y, floor),
            name=t[key],
            mode="lines+markers",
            line={"color": color, "width": 2},
        )
    ui.style(fig, t["spl"].format(n=d.boundary), t["step"], t["drift"], height=340)
    ui.log_axis(fig, "y", [10.0**e for e in range(-18, 1, 3)])  # 1e-18 ... 1
    csv = ui.write_csv(
        f"{NAME}-splice",
        {"step": d.steps, "drift_clean": d.drift_clean, "drift_splice": d.drift_splice},
    )
    return fig, csv


def tiers_figure(r: st.TierRates, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    names = [t["setups"][s] for s in r.setups]
    fig = make_subplots(rows=1, cols=3, subplot_titles=(t["hit"], t["ttft"], t["moved"]))
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
            name=t["tiers_names"][tier],
            marker_color=color,
            row=1,
            col=3,
        )
    fig.update_layout(barmode="stack")
    title = t["tiers"].format(n=r.n_requests, d=r.device_ckpts, h=r.host_ckpts)
    ui.style(fig, title, "", "", height=400)
    fig.update_layout(margin={"t": 80})
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


# ---------------------------------------------------------------------------------------------
# Callbacks (validate, call the study, draw)
# ---------------------------------------------------------------------------------------------


def _text(value: object, name: str) -> str:
    try:
        st.check_text(value, name)
    except ValueError as e:
        raise gr.Error(str(e), print_exception=False) from None
    return str(value)


def _tp(value: object) -> int:
    tp = ui.check_int("TP", value, 1, 96)
    if 96 % tp:
        raise gr.Error(f"tp must divide K3's 96 KDA heads, got {tp}", print_exception=False)
    return tp


def _new(value: object) -> int:
    return ui.check_int("new tokens", value, 1, st.MAX_NEW)


def _splice_pair(text_a: object, text_b: object, *_: object) -> tuple[int, str] | None:
    try:
        st.check_splice(text_a, text_b if isinstance(text_b, str) else "")
    except ValueError as e:
        return 1, str(e)
    return None


# one check per input (the language radio last: nothing to check); a rejected input leaves the
# page as it was (apps.ui.guard)
PD_CHECKS = guard.validator(lambda v: _text(v, "text"), _new, _tp, None)
MISMATCH_CHECKS = guard.validator(lambda v: _text(v, "text"), None)
SPLICE_CHECKS = guard.validator(lambda v: _text(v, "text A"), None, _new, None, cross=_splice_pair)
TIER_CHECKS = guard.validator(
    lambda v: ui.check_int("trace requests", v, 100, 12031),
    lambda v: ui.check_int("device checkpoints", v, 1, 4096),
    lambda v: ui.check_float("host / device ratio", v, 0.1, 64),
    None,
)


def draw_pd(a: st.Anatomy, r: st.PDRun, lang: str) -> tuple:
    return (
        *anatomy_figure(a, lang),
        metadata_markdown(a, lang),
        *timeline_figure(r, lang),
        pd_markdown(r, lang),
    )


@ui.study_errors
def run_pd(
    text: str = st.DEFAULT_TEXT, n_new: float = 16, tp: float = 8, language: str = "English"
):
    text = _text(text, "text")
    n, tp_i = _new(n_new), _tp(tp)
    a = st.anatomy(tp=tp_i, text=text)
    r = st.prefill_decode(text, n)
    return (*draw_pd(a, r, _lang(language)), (a, r))


@ui.study_errors
def run_mismatch(text: str = st.DEFAULT_TEXT, language: str = "English"):
    m = st.mismatches(_text(text, "text"))
    return refusals_markdown(m, _lang(language)), m


@ui.study_errors
def run_splice(
    text_a: str = st.DEFAULT_TEXT, text_b: str = "", n_new: float = 16, language: str = "English"
):
    a = _text(text_a, "text A")
    b = text_b if isinstance(text_b, str) else ""
    d = st.splice_drift(a, b, _new(n_new))
    return (*splice_figure(d, _lang(language)), d)


@ui.study_errors
def run_tiers(
    n_requests: float = 1000,
    device_ckpts: float = 16,
    host_ratio: float = 2.0,
    language: str = "English",
):
    n = ui.check_int("trace requests", n_requests, 100, 12031)
    d = ui.check_int("device checkpoints", device_ckpts, 1, 4096)
    h = ui.check_float("host / device ratio", host_ratio, 0.1, 64)
    r = st.tier_rates(n, d, h)
    return (*tiers_figure(r, _lang(language)), r)


def redraw(language: str, pd_state, mis_state, spl_state, tier_state) -> list:
    """The language switch: re-draw every figure and table from the kept results (the
    placeholders of actions not yet run switch too)."""
    lang = _lang(language)
    out: list = []
    out += list(draw_pd(*pd_state, lang)) if pd_state else [gr.skip()] * 6
    out += [refusals_markdown(mis_state, lang) if mis_state else MIS_PLACEHOLDER[lang]]
    if spl_state:
        out += list(splice_figure(spl_state, lang))
    else:
        out += [ui.empty_figure(*SPLICE_PLACEHOLDER[lang]), gr.skip()]
    out += list(tiers_figure(tier_state, lang)) if tier_state else [gr.skip()] * 2
    return out


def build() -> gr.Blocks:
    with gr.Blocks(title="State transfer · KDA State Lab") as demo:
        lang = ui.header(NAME, "State transfer · 跨实例状态传输", EN, ZH)
        pd_state, mis_state, spl_state, tier_state = (gr.State(None) for _ in range(4))
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                text = gr.Textbox(
                    st.DEFAULT_TEXT,
                    lines=5,
                    elem_id=f"{NAME}-text",
                    label=f"Prompt (1-{st.MAX_TEXT} chars)",
                )
                with gr.Row():
                    n_new = gr.Number(
                        16, label=f"New tokens (1-{st.MAX_NEW})", elem_id=f"{NAME}-new"
                    )
                    tp = gr.Number(8, label="K3 TP (divides 96)", elem_id=f"{NAME}-tp")
                pd_btn = gr.Button("Prefill → decode", variant="primary", elem_id=f"{NAME}-run")
                mis_btn = gr.Button("Offer to mismatched instances", elem_id=f"{NAME}-mismatch")
                text_b = gr.Textbox(
                    "",
                    lines=2,
                    elem_id=f"{NAME}-text-b",
                    label="Splice: prompt B (empty = prompt A reversed)",
                )
                spl_btn = gr.Button("Force a splice", elem_id=f"{NAME}-splice-run")
                with gr.Accordion("Tiers on the Mooncake trace", open=True) as acc:
                    n_req = gr.Number(
                        1000, label="Trace requests (100-12031)", elem_id=f"{NAME}-req"
                    )
                    dev = gr.Number(16, label="Device checkpoints (1-4096)", elem_id=f"{NAME}-dev")
                    ratio = gr.Number(
                        2.0, label="Host / device ratio (0.1-64)", elem_id=f"{NAME}-ratio"
                    )
                    tier_btn = gr.Button("Simulate tiers", elem_id=f"{NAME}-tiers-run")
            with gr.Column(scale=2):
                s_an = ui.figure_slot(f"{NAME}-anatomy", "Object anatomy")
                meta_md = gr.Markdown(
                    label="Object header",
                    elem_id=f"{NAME}-metadata",
                    elem_classes=["kda-metrics"],
                )
                pd_md = gr.Markdown(
                    label="Prefill to decode summary",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
                s_tl = ui.figure_slot(f"{NAME}-timeline", "Transfer timeline")
                mis_md = gr.Markdown(
                    MIS_PLACEHOLDER["en"],
                    label="Refusals",
                    elem_id=f"{NAME}-refusals",
                    elem_classes=["kda-metrics"],
                )
                s_sp = ui.figure_slot(
                    f"{NAME}-splice",
                    "Splice drift",
                    ui.empty_figure(*SPLICE_PLACEHOLDER["en"]),
                )
                s_ti = ui.figure_slot(f"{NAME}-tiers", "Tiers")
        pd_out = [*s_an.outputs, meta_md, *s_tl.outputs, pd_md, pd_state]
        pd_in = [text, n_new, tp, lang.radio]
        pd_btn.click(run_pd, pd_in, pd_out, api_name=f"{NAME}_pd", validator=PD_CHECKS)
        mis_btn.click(
            run_mismatch,
            [text, lang.radio],
            [mis_md, mis_state],
            api_name=f"{NAME}_mismatch",
            validator=MISMATCH_CHECKS,
        )
        spl_in = [text, text_b, n_new, lang.radio]
        spl_out = [*s_sp.outputs, spl_state]
        spl_btn.click(
            run_splice, spl_in, spl_out, api_name=f"{NAME}_splice", validator=SPLICE_CHECKS
        )
        tier_in = [n_req, dev, ratio, lang.radio]
        tier_out = [*s_ti.outputs, tier_state]
        tier_btn.click(
            run_tiers, tier_in, tier_out, api_name=f"{NAME}_tiers", validator=TIER_CHECKS
        )
        demo.load(run_pd, pd_in, pd_out, api_visibility="private")
        demo.load(run_tiers, tier_in, [*s_ti.outputs, tier_state], api_visibility="private")
        lang.radio.change(
            redraw,
            [lang.radio, pd_state, mis_state, spl_state, tier_state],
            [*s_an.outputs, meta_md, *s_tl.outputs, pd_md, mis_md, *s_sp.outputs, *s_ti.outputs],
            api_visibility="private",
            show_progress="hidden",
        )
        named = {"text": text, "n_new": n_new, "tp": tp, "pd_btn": pd_btn, "mis_btn": mis_btn,
                 "text_b": text_b, "spl_btn": spl_btn, "n_req": n_req, "dev": dev,
                 "ratio": ratio, "tier_btn": tier_btn, "acc": acc}  # fmt: skip
        labels: dict = {named[k]: zh for k, zh in LABELS_ZH.items()}
        lang.labels({**labels, **{s.csv: ui.CSV_ZH for s in (s_an, s_tl, s_sp, s_ti)}}, tr=TR)
    return demo


if __name__ == "__main__":
    ui.main(build)
