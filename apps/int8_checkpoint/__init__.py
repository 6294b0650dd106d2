"""int8_checkpoint: park a real KDA state compressed, restore it, decode on.

Draws ``kda_core.studies.int8.int8_study``: TinyHybrid reads the first N tokens of the reader's
text; its KDA recurrent states are parked as INT8 (per key channel = SGLang's layout, per head,
per tensor), fp8-e4m3 or bf16. Figures: the state and the signed error of one (layer, head);
histograms of the errors and of the values; the divergence over the next tokens when the state
is quantized once at parking vs at every step; the error of every variant against its bound; the
checkpoint bytes and capacity gained (tiny config and Kimi K3).

Main action: ``int8_checkpoint_run`` (all inputs -> summary, five figures with CSVs, this
session's history). The history lives in ``gr.State``. The page (layout, checks, events); its
figures are ``figures``, its tables ``tables``; every word is in ``words.int8_checkpoint``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.int8_checkpoint.figures import (
    NAME,
    fig_capacity,
    fig_divergence,
    fig_error_map,
    fig_histograms,
    fig_variants,
    ticks_125,
)
from apps.int8_checkpoint.tables import (
    bound_ratio,
    continuation_markdown,
    history_markdown,
    summary_markdown,
    table_cell,
)
from apps.ui import COLORS, SERIES, guard
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import int8 as st
from kda_core.studies import quality
from words.catalog import T as Lang
from words.int8_checkpoint import MSG

VARIANT_LABELS = tuple(v[0] for v in st.VARIANTS)
N_LAYERS, N_HEADS = st.kda_shape()  # the served model's, not hard-coded
MAX_HISTORY = 10


def _variant(label: str) -> tuple[str, str | None]:
    label = ui.check_choice(MSG("v_format"), label, VARIANT_LABELS)
    _, fmt, gran = st.VARIANTS[VARIANT_LABELS.index(label)]
    return fmt, gran


def _text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise fail("e_text_empty", MSG, n=st.MAX_TEXT_CHARS)
    if len(text) > st.MAX_TEXT_CHARS:
        raise fail("e_text_long", MSG, n=st.MAX_TEXT_CHARS, got=len(text))
    return text


def _tokens(text: str, n_tokens: object) -> int:
    n_max = min(len(text.encode("utf-8")), st.MAX_PARK_TOKENS)
    return ui.check_int(MSG("v_tokens"), n_tokens, 1, n_max)


def _tp(tp: object) -> int:
    tp_i = ui.check_int(MSG("v_tp"), tp, 1, 64)
    if 96 % tp_i:
        raise fail("e_tp", MSG, tp=tp_i)
    return tp_i


def compute_run(
    text: str = st.DEFAULT_TEXT,
    n_tokens: float = 64,
    variant: str = VARIANT_LABELS[0],
    layer: float = 0,
    head: float = 0,
    steps: float = 16,
    native_dtype: str = "bfloat16",
    tp: float = 8,
    budget_gib: float = 8.0,
    history: list | None = None,
) -> tuple:
    """Validate and run the study (and the greedy continuations after a restore)."""
    text = _text(text)
    n = _tokens(text, n_tokens)
    fmt, gran = _variant(variant)
    lay = ui.check_int(MSG("v_layer"), layer, 0, N_LAYERS - 1)
    hd = ui.check_int(MSG("v_head"), head, 0, N_HEADS - 1)
    stp = ui.check_int(MSG("v_steps"), steps, 1, st.MAX_STEPS)
    nat = ui.check_choice(MSG("v_native"), native_dtype, st.NATIVE_DTYPES)
    tp_i = _tp(tp)
    gib = ui.check_float(MSG("v_budget"), budget_gib, 0.01, 4096)
    s = st.int8_study(text, n, fmt, gran, lay, hd, stp, nat, tp_i, gib)
    i = s.table.labels.index(variant)
    j = s.memory_k3.labels.index(variant)
    hist = list(history or [])
    error, drift = s.table.rel_fro[i], s.divergence.every_step_state_dist[-1]
    hist.append(
        [len(hist) + 1, n, variant, f"{error:.3g}", f"{drift:.3g}", f"×{s.memory_k3.gain[j]:.2f}"]
    )
    cont = quality.continuation(text, n, fmt, gran, stp)  # the tokens the heading says
    return s, variant, hist[-MAX_HISTORY:], cont


def draw_run(view: tuple, t: Lang) -> tuple:
    """Summary, five (figure, csv) pairs, the runs table, the history, the continuations."""
    s, variant, hist, cont = view
    return (
        summary_markdown(s, variant, t),
        *fig_error_map(s.errors, t),
        *fig_histograms(s.errors, t),
        *fig_divergence(s.divergence, t),
        *fig_variants(s.table, variant, t),
        *fig_capacity(s.memory_tiny, s.memory_k3, variant, t),
        history_markdown(hist, t),
        hist,
        continuation_markdown(cont, t),
    )


run = rendered(compute_run, draw_run, MSG)


def _run_validator():  # noqa: ANN202
    """``run``'s checks, per input (so a rejected input leaves the page as it was)."""

    def cross(text: str, n_tokens: object, *rest: object) -> tuple[int, object] | None:
        try:
            _tokens(text, n_tokens)
        except UserError as e:
            return 1, e.msg
        try:
            _tp(rest[5])
        except UserError as e:
            return 7, e.msg
        return None

    return guard.validator(
        _text,
        None,
        _variant,
        lambda v: ui.check_int(MSG("v_layer"), v, 0, N_LAYERS - 1),
        lambda v: ui.check_int(MSG("v_head"), v, 0, N_HEADS - 1),
        lambda v: ui.check_int(MSG("v_steps"), v, 1, st.MAX_STEPS),
        lambda v: ui.check_choice(MSG("v_native"), v, st.NATIVE_DTYPES),
        lambda v: ui.check_int(MSG("v_tp"), v, 1, 64),
        lambda v: ui.check_float(MSG("v_budget"), v, 0.01, 4096),
        cross=cross,
    )


def _controls(page: Page) -> list:
    """The left column's inputs, in ``compute_run``'s order (without the history)."""
    L = page.label
    text_box = gr.Textbox(st.DEFAULT_TEXT, lines=4, elem_id=f"{NAME}-text")
    text = L(text_box, "f_text", n=st.MAX_TEXT_CHARS)
    n_tokens = L(gr.Number(64, elem_id=f"{NAME}-tokens"), "f_tokens")
    radio = gr.Radio(list(VARIANT_LABELS), value=VARIANT_LABELS[0], elem_id=f"{NAME}-variant")
    variant = page.choices(L(radio, "f_variant"), [(f"var_{v}", v) for v in VARIANT_LABELS])
    with gr.Row():
        layer = L(gr.Slider(0, N_LAYERS - 1, value=0, step=1), "f_layer")
        head = L(gr.Slider(0, N_HEADS - 1, value=0, step=1), "f_head")
    steps = L(gr.Number(16, elem_id=f"{NAME}-steps"), "f_steps", n=st.MAX_STEPS)
    with gr.Accordion(open=False) as capacity_box:
        native = L(gr.Radio(list(st.NATIVE_DTYPES), value="bfloat16"), "f_native")
        with gr.Row():
            tp = L(gr.Number(8, elem_id=f"{NAME}-tp"), "f_tp")
            budget = L(gr.Number(8.0, elem_id=f"{NAME}-budget"), "f_budget")
    L(capacity_box, "acc_k3")
    return [text, n_tokens, variant, layer, head, steps, native, tp, budget]


def build() -> gr.Blocks:
    with gr.Blocks(title="INT8 checkpoints · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                inputs = _controls(page)
                btn = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
                summary = gr.Markdown(
                    label="Park and restore summary",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
            with gr.Column(scale=2):
                s1 = page.figure_slot(f"{NAME}-errmap", "n_errmap")
                s3 = page.figure_slot(f"{NAME}-divergence", "n_divergence")
                cont = gr.Markdown(
                    label="Exact vs compressed continuations", elem_id=f"{NAME}-continuation"
                )
                s4 = page.figure_slot(f"{NAME}-variants", "n_variants")
                s2 = page.figure_slot(f"{NAME}-hist", "n_hist")
                s5 = page.figure_slot(f"{NAME}-capacity", "n_capacity")
                # the runs table has six columns: the wide column holds it without scrolling
                hist_md = gr.Markdown(
                    label="Runs in this session",
                    elem_id=f"{NAME}-history",
                    elem_classes=["kda-metrics"],
                )
        figures = [o for slot in (s1, s2, s3, s4, s5) for o in slot.outputs]
        outputs = [summary, *figures, hist_md, history, cont]
        run_fn, run_out = page.event(compute_run, draw_run, outputs)
        run_in, run_v = [*inputs, history, page.radio], _run_validator()
        btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        variant, layer, head, native = inputs[2], inputs[3], inputs[4], inputs[6]
        redraw = [variant.input, layer.release, head.release, native.input]
        gr.on(redraw, run_fn, run_in, run_out, api_visibility="private", validator=run_v)
        page.finish()
    return demo


__all__ = [
    "COLORS",
    "MSG",
    "SERIES",
    "VARIANT_LABELS",
    "bound_ratio",
    "build",
    "table_cell",
    "continuation_markdown",
    "run",
    "ticks_125",
]  # what the tests read as app.<name>
