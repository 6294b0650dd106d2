"""unified_memory's ratio-calculator panel: SGLang's documented formula for
``--mamba-full-memory-ratio`` next to the state slots a running request occupies when it keeps
its chunked-prefill and decode states (``kda_core.studies.calculator``).

It sits in unified_memory because it is that app's question for the static split: which ratio,
and what concurrency it really gives. ``calculator_panel(page, demo)`` lays it out and wires it
(drawn on load); ``compare`` is the callback (``unified_memory_calculator`` in the API);
``calculator_view`` draws it; its words are ``words.unified_memory_calculator``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.ui import guard
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from apps.unified_memory.calculator_view import (
    calculator_markdown,
    fig_calc_running,
    fig_calc_slots,
)
from kda_core.studies import calculator as cc
from words.catalog import T as Lang
from words.unified_memory import MSG

NAME = "unified_memory"
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer")
DEFAULT_LENS = "2048, 4096, 8192, 16384, 32768, 65536, 131072"
MAX_LENS = 12


def _lens(text: object) -> tuple[int, ...]:
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_LENS:
        raise fail("e_calc_lens", MSG, n=MAX_LENS, got=ui.clip_text(text))
    return tuple(ui.check_int(MSG("v_calc_len"), p, 1, 1 << 20) for p in parts)


def _checks() -> list:
    return [
        _lens,
        lambda v: ui.check_int(MSG("v_calc_out"), v, 0, 65_536),
        lambda v: ui.check_int(MSG("v_calc_chunk"), v, 256, 65_536),
        lambda v: ui.check_int(MSG("v_calc_cap"), v, 0, 64),
        lambda v: ui.check_choice(MSG("v_calc_strategy"), v, STRATEGIES),
    ]


def validator():  # noqa: ANN201 - Gradio's validator callable
    """The panel's inputs checked before it runs (a rejected input leaves the page)."""
    return guard.validator(*_checks())


def compute_compare(
    input_lens: str = DEFAULT_LENS,
    output_len: float = 1024,
    chunked_prefill_size: float = 8192,
    max_states_per_path: float = 0,
    strategy: str = "extra_buffer",
) -> cc.CalculatorCheck:
    lens, out, chunk, cap, strat = (
        chk(v)
        for chk, v in zip(
            _checks(), (input_lens, output_len, chunked_prefill_size, max_states_per_path, strategy)
        )
    )
    return cc.calculator_check(
        input_lens=lens,
        output_len=out,
        chunked_prefill_size=chunk,
        max_states_per_path=cap or None,
        strategy=strat,
    )


def draw_compare(c: cc.CalculatorCheck, t: Lang) -> tuple:
    return (calculator_markdown(c, t), *fig_calc_running(c, t), *fig_calc_slots(c, t))


compare = rendered(compute_compare, draw_compare, MSG)


def calculator_panel(page: Page, demo: gr.Blocks) -> None:
    """The panel (elem ids ``unified_memory-calc-*``): inputs left, summary and figures right;
    drawn on load, redrawn on Compare and on the language switch."""
    L = page.label
    with gr.Accordion(open=True) as box, gr.Row():
        with gr.Column(scale=1, min_width=290):
            L(gr.Markdown(elem_id=f"{NAME}-calc-intro"), "calc_intro")
            lens = L(gr.Textbox(DEFAULT_LENS, elem_id=f"{NAME}-calc-lens"), "f_calc_lens")
            out = L(gr.Number(1024, step=1, elem_id=f"{NAME}-calc-out"), "f_calc_out")
            chunk = L(gr.Number(8192, step=1, elem_id=f"{NAME}-calc-chunk"), "f_calc_chunk")
            cap = L(gr.Number(0, step=1, elem_id=f"{NAME}-calc-cap"), "f_calc_cap")
            strategy = L(
                gr.Radio(list(STRATEGIES), value="extra_buffer", elem_id=f"{NAME}-calc-strategy"),
                "f_calc_strategy",
            )
            btn = L(gr.Button(variant="secondary", elem_id=f"{NAME}-calc-run"), "b_calc")
        with gr.Column(scale=2):
            md = gr.Markdown(
                label="Calculator vs scheduler summary",
                elem_id=f"{NAME}-calc-summary",
                elem_classes=["kda-metrics"],
            )
            running = page.figure_slot(f"{NAME}-calc-running", "n_calc_running")
            slots = page.figure_slot(f"{NAME}-calc-slots", "n_calc_slots")
    L(box, "acc_calc")
    fn, outs = page.event(compute_compare, draw_compare, [md, *running.outputs, *slots.outputs])
    inputs = [lens, out, chunk, cap, strategy, page.radio]
    btn.click(fn, inputs, outs, api_name=f"{NAME}_calculator", validator=validator())
    demo.load(fn, inputs, outs, api_visibility="private")


__all__ = ["calculator_panel", "compare", "validator"]
