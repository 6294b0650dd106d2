"""state_transfer: the model-state object, prefill -> decode, refusals, the splice drift, tiers.

Draws ``kda_core.studies.transfer``: ``anatomy`` (parts at Kimi K3 scale and on the tiny model,
the safetensors header), ``prefill_decode`` (the transfer timeline of a prefill instance
publishing into the embedded store and a decode instance restoring), ``mismatches`` (objects
refused by instances that differ), ``splice_drift`` (the teaching switch) and ``tier_rates``
(device / + host / + remote on the Mooncake trace).

Main actions: ``state_transfer_pd``, ``state_transfer_mismatch``, ``state_transfer_splice``,
``state_transfer_tiers``. Figures and tables follow the language switch (re-drawn from the
results kept in ``gr.State``). Every action checks its inputs in a Gradio ``validator``
(``apps.ui.guard``) first, so a rejected input leaves the page as it was. The page (layout,
checks, events); its figures are ``figures``, its tables ``tables``, its trace panel
``apps.panels.trace_hits``; every word is in ``words.state_transfer`` (the page's catalog adds the
trace panel's).
"""

from __future__ import annotations

from typing import NamedTuple

import gradio as gr

from apps import ui
from apps.panels.trace_hits import hits_panel
from apps.state_transfer.figures import (
    NAME,
    anatomy_figure,
    splice_figure,
    tiers_figure,
    timeline_figure,
)
from apps.state_transfer.tables import (
    metadata_markdown,
    pd_markdown,
    refusals_markdown,
    tiers_note,
)
from apps.ui import guard
from apps.ui.catalog import Catalog, UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import transfer as st
from words import state_transfer as words
from words.catalog import T as Lang
from words.trace_hits import HITS

MSG = Catalog(NAME, {}, words.MSG, HITS)  # the page's words: the app's and the trace panel's

SPLICE_NAMES = ("the prompt", "prompt B")  # the core's names; the page says the same


def _text(value: object, name: str = "v_prompt") -> str:
    """A prompt: 1 to MAX_TEXT characters and at least 4 UTF-8 bytes (``st.check_text``'s
    rule, said in the page's language)."""
    rule = {"name": MSG(name), "n": st.MAX_TEXT}
    if not isinstance(value, str) or not value.strip():  # a cleared field, named as such
        raise fail("e_prompt", MSG, **rule, got=MSG("empty_field"))
    if len(value) > st.MAX_TEXT:
        raise fail("e_prompt", MSG, **rule, got=MSG("got_chars", n=len(value)))
    n = len(value.encode("utf-8"))
    if n < 4:
        raise fail("e_prompt", MSG, **rule, got=MSG("got_bytes", n=n))
    st.check_text(value, name)  # the study's own check (the same rule)
    return value


def _tp(value: object) -> int:
    tp = ui.check_int(MSG("v_tp"), value, 1, 96)
    if 96 % tp:
        raise fail("e_tp", MSG, tp=tp)
    return tp


def _new(value: object) -> int:
    return ui.check_int(MSG("v_new"), value, 1, st.MAX_NEW)


def _splice(text_a: object, text_b: object) -> None:
    """B must differ from the prompt within their common length (``st.check_splice``)."""
    try:
        st.check_splice(text_a, text_b if isinstance(text_b, str) else "", SPLICE_NAMES)
    except ValueError:
        raise fail("e_splice", MSG, a=MSG("v_the_prompt"), b=MSG("v_prompt_b")) from None


def _splice_pair(text_a: object, text_b: object, *_: object) -> tuple[int, object] | None:
    try:
        _text(text_b, "v_prompt_b") if isinstance(text_b, str) and text_b else None
        _splice(text_a, text_b)
    except UserError as e:
        return 1, e.msg
    return None


# one check per input (the language radio last: nothing to check); a rejected input leaves the
# page as it was (apps.ui.guard)
PD_CHECKS = guard.validator(_text, _new, _tp, None)
MISMATCH_CHECKS = guard.validator(_text, None)
SPLICE_CHECKS = guard.validator(_text, None, _new, None, cross=_splice_pair)
TIER_CHECKS = guard.validator(
    lambda v: ui.check_int(MSG("v_req"), v, 100, 12031),
    lambda v: ui.check_int(MSG("v_dev"), v, 1, 4096),
    lambda v: ui.check_float(MSG("v_ratio"), v, 0.1, 64),
    None,
)


def compute_pd(text: str = st.DEFAULT_TEXT, n_new: float = 16, tp: float = 8):  # noqa: ANN201
    text = _text(text)
    n, tp_i = _new(n_new), _tp(tp)
    return st.anatomy(tp=tp_i, text=text), st.prefill_decode(text, n)


def draw_pd(view: tuple[st.Anatomy, st.PDRun], t: Lang) -> tuple:
    a, r = view
    return (
        *anatomy_figure(a, t),
        metadata_markdown(a, t),
        *timeline_figure(r, t),
        pd_markdown(r, t),
        view,
    )


run_pd = rendered(compute_pd, draw_pd, MSG)


def compute_mismatch(text: str = st.DEFAULT_TEXT) -> st.Refusals:
    return st.mismatches(_text(text))


def draw_mismatch(m: st.Refusals, t: Lang) -> tuple:
    return refusals_markdown(m, t), m


run_mismatch = rendered(compute_mismatch, draw_mismatch, MSG)


def compute_splice(
    text_a: str = st.DEFAULT_TEXT, text_b: str = "", n_new: float = 16
) -> st.SpliceDrift:
    a = _text(text_a)
    b = text_b if isinstance(text_b, str) else ""
    _splice(a, b)  # the messages name the page's fields
    return st.splice_drift(a, b, _new(n_new))


def draw_splice(d: st.SpliceDrift, t: Lang) -> tuple:
    return (*splice_figure(d, t), d)


run_splice = rendered(compute_splice, draw_splice, MSG)


def compute_tiers(
    n_requests: float = 1000, device_ckpts: float = 16, host_ratio: float = 2.0
) -> st.TierRates:
    n = ui.check_int(MSG("v_req"), n_requests, 100, 12031)
    d = ui.check_int(MSG("v_dev"), device_ckpts, 1, 4096)
    h = ui.check_float(MSG("v_ratio"), host_ratio, 0.1, 64)
    return st.tier_rates(n, d, h)


def draw_tiers(r: st.TierRates, t: Lang) -> tuple:
    """The tiers figure and its CSV, what the host holds (and why it adds nothing when it
    has no hit), the result."""
    return (*tiers_figure(r, t), tiers_note(r, t), r)


run_tiers = rendered(compute_tiers, draw_tiers, MSG)


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


def _controls(page: Page) -> Controls:
    """The left column: the prompt, the four actions and the tier inputs."""
    L = page.label
    text = L(gr.Textbox(st.DEFAULT_TEXT, lines=5, elem_id=f"{NAME}-text"), "f_text", n=st.MAX_TEXT)
    with gr.Row():
        n_new = L(gr.Number(16, elem_id=f"{NAME}-new"), "f_new", n=st.MAX_NEW)
        tp = L(gr.Number(8, elem_id=f"{NAME}-tp"), "f_tp")
    pd_btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_pd")
    mis_btn = L(gr.Button(elem_id=f"{NAME}-mismatch"), "b_mis")
    text_b = L(gr.Textbox("", lines=2, elem_id=f"{NAME}-text-b"), "f_text_b")
    spl_btn = L(gr.Button(elem_id=f"{NAME}-splice-run"), "b_spl")
    with gr.Accordion(open=True) as acc:
        n_req = L(gr.Number(1000, elem_id=f"{NAME}-req"), "f_req")
        dev = L(gr.Number(16, elem_id=f"{NAME}-dev"), "f_dev")
        ratio = L(gr.Number(2.0, elem_id=f"{NAME}-ratio"), "f_ratio")
        tier_btn = L(gr.Button(elem_id=f"{NAME}-tiers-run"), "b_tiers")
    L(acc, "acc_tiers")
    return Controls(
        text, pd_btn, mis_btn, text_b, spl_btn, n_new, tp, acc, n_req, dev, ratio, tier_btn
    )


def _metrics(label: str, elem: str) -> gr.Markdown:
    """A table of results (``label`` names it in the API)."""
    return gr.Markdown(label=label, elem_id=f"{NAME}-{elem}", elem_classes=["kda-metrics"])


def build() -> gr.Blocks:
    with gr.Blocks(title="State transfer · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        pd_state, mis_state, spl_state, tier_state = (gr.State(None) for _ in range(4))
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                ctl = _controls(page)
            with gr.Column(scale=2):
                s_an = page.figure_slot(f"{NAME}-anatomy", "n_anatomy")
                meta_md = _metrics("Object header", "metadata")
                pd_md = _metrics("Prefill to decode summary", "summary")
                s_tl = page.figure_slot(f"{NAME}-timeline", "n_timeline")
                mis_md = _metrics("Refusals", "refusals")
                s_sp = page.figure_slot(f"{NAME}-splice", "n_splice", csv=False)  # once run
                s_ti = page.figure_slot(f"{NAME}-tiers", "n_tiers")
                tier_md = _metrics("Host tier note", "tiers-note")
        page.initial(mis_md, lambda t: t("mis_placeholder"))
        page.initial(s_sp.plot, lambda t: ui.empty_figure(t("t_spl_none"), t("spl_press")))
        lr = page.radio
        pd_fn, pd_out = page.event(
            compute_pd, draw_pd, [*s_an.outputs, meta_md, *s_tl.outputs, pd_md, pd_state]
        )
        pd_in = [ctl.text, ctl.n_new, ctl.tp, lr]
        ctl.pd_btn.click(pd_fn, pd_in, pd_out, api_name=f"{NAME}_pd", validator=PD_CHECKS)
        mis_fn, mis_out = page.event(compute_mismatch, draw_mismatch, [mis_md, mis_state])
        mis = {"api_name": f"{NAME}_mismatch", "validator": MISMATCH_CHECKS}
        ctl.mis_btn.click(mis_fn, [ctl.text, lr], mis_out, **mis)
        spl_fn, spl_out = page.event(compute_splice, draw_splice, [*s_sp.outputs, spl_state])
        spl_in = [ctl.text, ctl.text_b, ctl.n_new, lr]
        spl = {"api_name": f"{NAME}_splice", "validator": SPLICE_CHECKS}
        ctl.spl_btn.click(spl_fn, spl_in, spl_out, **spl).success(
            lambda: gr.update(visible=True), None, s_sp.csv, api_visibility="private"
        )
        tier_fn, tier_out = page.event(
            compute_tiers, draw_tiers, [*s_ti.outputs, tier_md, tier_state]
        )
        tier_in = [ctl.n_req, ctl.dev, ctl.ratio, lr]
        tiers = {"api_name": f"{NAME}_tiers", "validator": TIER_CHECKS}
        ctl.tier_btn.click(tier_fn, tier_in, tier_out, **tiers)
        demo.load(pd_fn, pd_in, pd_out, api_visibility="private")
        demo.load(tier_fn, tier_in, tier_out, api_visibility="private")
        hits_panel(page, demo, NAME)
        page.finish()
    return demo


__all__ = ["MSG", "build", "run_mismatch", "run_pd", "run_splice", "run_tiers"]
