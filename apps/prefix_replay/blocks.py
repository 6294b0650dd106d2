"""prefix_replay's vLLM block-table panel: one physical block serving several logical
prefixes, and a hit that ends inside a block (``kda_core.studies.block_table``, from
``VLLMBlockCache.export()``).

It sits in prefix_replay because it answers that app's question, where a request resumes, the
way vLLM answers it. ``blocks_panel(page, demo)`` lays it out and wires it (drawn on load);
``serve_two`` is the callback (``prefix_replay_vllm_blocks`` in the API); ``blocks_view`` draws
it; its words are ``words.prefix_replay_blocks``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.prefix_replay.blocks_view import blocks_markdown, fig_vb_blocks, fig_vb_hit
from apps.ui import guard
from apps.ui.catalog import Msg, UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import block_table as bt
from words.catalog import T as Lang
from words.prefix_replay import MSG

NAME = "prefix_replay"
CASES = {"96 of a 128-token block": "vb_case_96", "4,480 inside 4,096-token blocks": "vb_case_4480"}
FIELDS = ("block_size", "unit", "prompt", "outputs", "shared")
RANGES = {
    "block_size": (16, 8192),
    "unit": (1, 8192),
    "prompt": (2, 32768),
    "outputs": (0, 256),
    "shared": (1, 32768 + 256),
}
KEYS = {
    "block_size": "v_vb_block",
    "unit": "v_vb_unit",
    "prompt": "v_vb_prompt",
    "outputs": "v_vb_outputs",
    "shared": "v_vb_shared",
}
LABELS = ("f_vb_block", "f_vb_unit", "f_vb_prompt", "f_vb_outputs", "f_vb_shared")


def _int(field: str, value: object) -> int:
    return ui.check_int(MSG(KEYS[field]), value, *RANGES[field])


def _together(block: int, unit: int, prompt: int, outputs: int, shared: int) -> None:
    """The unit divides the block; B shares at most A's tokens."""
    if block % unit:
        raise fail("e_vb_unit", MSG, u=unit, b=block)
    if shared > prompt + outputs:
        raise fail("e_vb_shared", MSG, n=prompt + outputs, got=shared)


def _cross(*values: object) -> tuple[int, Msg] | None:
    try:
        _together(*(_int(f, v) for f, v in zip(FIELDS, values)))
    except UserError as e:
        return (1 if e.msg.key == "e_vb_unit" else 4), e.msg
    return None


def validator():  # noqa: ANN201 - Gradio's validator callable
    """The panel's inputs checked before it runs (a rejected input leaves the page)."""
    return guard.validator(*(lambda v, f=f: _int(f, v) for f in FIELDS), cross=_cross)


def compute_serve_two(
    block_size: float = 128,
    unit: float = 32,
    prompt: float = 97,
    outputs: float = 40,
    shared: float = 120,
) -> bt.BlockTable:
    vals = [_int(f, v) for f, v in zip(FIELDS, (block_size, unit, prompt, outputs, shared))]
    _together(*vals)
    return bt.block_table(*vals)


def draw_serve_two(v: bt.BlockTable, t: Lang) -> tuple:
    return (blocks_markdown(v, t), *fig_vb_blocks(v, t), *fig_vb_hit(v, t))


serve_two = rendered(compute_serve_two, draw_serve_two, MSG)


def case_values(case: str) -> list[int]:
    """The five inputs of a preset case (the dropdown fills them)."""
    p = bt.PRESETS[ui.check_choice(MSG("v_vb_case"), case, tuple(CASES))]
    return [p[f] for f in FIELDS]


def blocks_panel(page: Page, demo: gr.Blocks) -> None:
    """The panel (elem ids ``prefix_replay-vllm-*``): inputs left, summary and figures right;
    drawn on load, redrawn on its button and on the language switch."""
    L = page.label
    first = next(iter(CASES))
    with gr.Accordion(open=True) as box, gr.Row():
        with gr.Column(scale=1, min_width=300):
            L(gr.Markdown(elem_id=f"{NAME}-vllm-intro"), "vb_intro")
            pick = gr.Dropdown(list(CASES), value=first, elem_id=f"{NAME}-vllm-case")
            case = page.choices(L(pick, "f_vb_case"), [(k, n) for n, k in CASES.items()])
            nums = [
                L(gr.Number(v, step=1, elem_id=f"{NAME}-vllm-{f.replace('_', '-')}"), key)
                for f, v, key in zip(FIELDS, case_values(first), LABELS)
            ]
            btn = L(gr.Button(variant="secondary", elem_id=f"{NAME}-vllm-run"), "b_vb")
        with gr.Column(scale=2):
            md = gr.Markdown(
                label="vLLM block table summary",
                elem_id=f"{NAME}-vllm-summary",
                elem_classes=["kda-metrics"],
            )
            blocks = page.figure_slot(f"{NAME}-vllm-blocks", "n_vb_blocks")
            hit = page.figure_slot(f"{NAME}-vllm-hit", "n_vb_hit")
    L(box, "acc_vb")
    fn, outs = page.event(compute_serve_two, draw_serve_two, [md, *blocks.outputs, *hit.outputs])
    inputs = [*nums, page.radio]
    btn.click(fn, inputs, outs, api_name=f"{NAME}_vllm_blocks", validator=validator())
    case.input(case_values, [case], nums, api_visibility="private")
    demo.load(fn, inputs, outs, api_visibility="private")


__all__ = ["blocks_panel", "case_values", "serve_two", "validator"]
