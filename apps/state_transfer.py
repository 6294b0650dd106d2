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

from typing import NamedTuple

import gradio as gr

from apps import ui
from apps.figures.state_transfer import (
    NAME,
    _lang,
    anatomy_figure,
    splice_figure,
    tiers_figure,
    timeline_figure,
)
from apps.text.state_transfer import (
    EN,
    LABELS_ZH,
    MIS_PLACEHOLDER,
    SPLICE_PLACEHOLDER,
    TR,
    ZH,
    metadata_markdown,
    pd_markdown,
    refusals_markdown,
)
from apps.ui import guard
from kda_core.studies import transfer as st


def _text(value: object, name: str = "prompt") -> str:
    if not isinstance(value, str) or not value.strip():  # a cleared field, named as such
        raise gr.Error(
            f"{name} must be 1 to {st.MAX_TEXT:,} characters (at least 4 UTF-8 bytes), "
            "got an empty field",
            print_exception=False,
        )
    try:
        st.check_text(value, name)
    except ValueError as e:
        raise gr.Error(str(e), print_exception=False) from None
    return value


def _tp(value: object) -> int:
    tp = ui.check_int("TP", value, 1, 96)
    if 96 % tp:
        raise gr.Error(f"tp must divide K3's 96 KDA heads, got {tp}", print_exception=False)
    return tp


def _new(value: object) -> int:
    return ui.check_int("new tokens", value, 1, st.MAX_NEW)


SPLICE_NAMES = ("the prompt", "prompt B")


def _splice_pair(text_a: object, text_b: object, *_: object) -> tuple[int, str] | None:
    try:
        st.check_splice(text_a, text_b if isinstance(text_b, str) else "", SPLICE_NAMES)
    except ValueError as e:
        return 1, str(e)
    return None


# one check per input (the language radio last: nothing to check); a rejected input leaves the
# page as it was (apps.ui.guard)
PD_CHECKS = guard.validator(_text, _new, _tp, None)
MISMATCH_CHECKS = guard.validator(_text, None)
SPLICE_CHECKS = guard.validator(_text, None, _new, None, cross=_splice_pair)
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
    text = _text(text)
    n, tp_i = _new(n_new), _tp(tp)
    a = st.anatomy(tp=tp_i, text=text)
    r = st.prefill_decode(text, n)
    return (*draw_pd(a, r, _lang(language)), (a, r))


@ui.study_errors
def run_mismatch(text: str = st.DEFAULT_TEXT, language: str = "English"):
    m = st.mismatches(_text(text))
    return refusals_markdown(m, _lang(language)), m


@ui.study_errors
def run_splice(
    text_a: str = st.DEFAULT_TEXT, text_b: str = "", n_new: float = 16, language: str = "English"
):
    a = _text(text_a)
    b = text_b if isinstance(text_b, str) else ""
    st.check_splice(a, b, SPLICE_NAMES)  # the messages name the page's fields
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


class Controls(NamedTuple):
    """The left column's components (`_controls`), by name."""

    text: gr.Textbox
    pd_btn: gr.Button
    mis_btn: gr.Button
    text_b: gr.Textbox
    spl_btn: gr.Button
    n_new: gr.Number
    tp: gr.Number
    acc: gr.Accordion
    n_req: gr.Number
    dev: gr.Number
    ratio: gr.Number
    tier_btn: gr.Button


def _controls() -> Controls:
    """The left column: the prompt, the four actions and the tier inputs."""
    text = gr.Textbox(
        st.DEFAULT_TEXT,
        lines=5,
        elem_id=f"{NAME}-text",
        label=f"Prompt (1-{st.MAX_TEXT:,} characters)",
    )
    with gr.Row():
        n_new = gr.Number(16, label=f"New tokens (1-{st.MAX_NEW})", elem_id=f"{NAME}-new")
        tp = gr.Number(8, label="K3 TP (divides 96)", elem_id=f"{NAME}-tp")
    pd_btn = gr.Button("Prefill → decode", variant="primary", elem_id=f"{NAME}-run")
    mis_btn = gr.Button("Offer to mismatched instances", elem_id=f"{NAME}-mismatch")
    text_b = gr.Textbox(
        "",
        lines=2,
        elem_id=f"{NAME}-text-b",
        label="Splice: prompt B (empty = the prompt reversed)",
    )
    spl_btn = gr.Button("Force a splice", elem_id=f"{NAME}-splice-run")
    with gr.Accordion("Tiers on the Mooncake trace", open=True) as acc:
        n_req = gr.Number(1000, label="Trace requests (100-12031)", elem_id=f"{NAME}-req")
        dev = gr.Number(16, label="Device checkpoints (1-4096)", elem_id=f"{NAME}-dev")
        ratio = gr.Number(2.0, label="Host / device ratio (0.1-64)", elem_id=f"{NAME}-ratio")
        tier_btn = gr.Button("Simulate tiers", elem_id=f"{NAME}-tiers-run")
    return Controls(
        text=text,
        pd_btn=pd_btn,
        mis_btn=mis_btn,
        text_b=text_b,
        spl_btn=spl_btn,
        n_new=n_new,
        tp=tp,
        acc=acc,
        n_req=n_req,
        dev=dev,
        ratio=ratio,
        tier_btn=tier_btn,
    )


def build() -> gr.Blocks:
    with gr.Blocks(title="State transfer · KDA State Lab") as demo:
        lang = ui.header(NAME, "State transfer · 跨实例状态传输", EN, ZH)
        pd_state, mis_state, spl_state, tier_state = (gr.State(None) for _ in range(4))
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                ctl = _controls()
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
        pd_in = [ctl.text, ctl.n_new, ctl.tp, lang.radio]
        ctl.pd_btn.click(run_pd, pd_in, pd_out, api_name=f"{NAME}_pd", validator=PD_CHECKS)
        ctl.mis_btn.click(
            run_mismatch,
            [ctl.text, lang.radio],
            [mis_md, mis_state],
            api_name=f"{NAME}_mismatch",
            validator=MISMATCH_CHECKS,
        )
        spl_in = [ctl.text, ctl.text_b, ctl.n_new, lang.radio]
        spl_out = [*s_sp.outputs, spl_state]
        ctl.spl_btn.click(
            run_splice, spl_in, spl_out, api_name=f"{NAME}_splice", validator=SPLICE_CHECKS
        )
        tier_in = [ctl.n_req, ctl.dev, ctl.ratio, lang.radio]
        tier_out = [*s_ti.outputs, tier_state]
        ctl.tier_btn.click(
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
        labels: dict = {getattr(ctl, k): zh for k, zh in LABELS_ZH.items()}
        lang.labels({**labels, **{s.csv: ui.CSV_ZH for s in (s_an, s_tl, s_sp, s_ti)}}, tr=TR)
    return demo


if __name__ == "__main__":
    ui.main(build)
