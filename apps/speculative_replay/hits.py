"""speculative_replay's hits panel: what a resent prompt keeps in the prefix cache per engine
with drafts on and off, for the reader's vLLM ``speculative_config``
(``kda_core.studies.spec_hits``). ``hits_panel(page, demo)`` lays it out and wires it (drawn on
load); ``hits`` is the callback (``speculative_replay_hits`` in the API); ``hits_view`` draws
it; its words are ``words.speculative_replay``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.speculative_replay.hits_view import fig_hits, hits_markdown
from apps.ui import guard
from apps.ui.page import Page, rendered
from kda_core.studies import spec_hits as sh
from words.catalog import T
from words.speculative_replay import MSG

NAME = "speculative_replay"
METHODS = ("eagle", "eagle3", "mtp")
MAX_K = 16


def _k(value: object) -> int:
    return ui.check_int(MSG("v_k"), value, 1, MAX_K)


def _n_predict(value: object) -> int:
    return ui.check_int(MSG("v_n_predict"), value, 1, MAX_K)


def _block(value: object) -> int:
    """0 (the planner's block) or 16 .. 8192 tokens."""
    b = ui.check_int(MSG("v_block"), value, 0, 8192)
    return b if b == 0 else ui.check_int(MSG("v_block"), b, 16, 8192)


def compute_hits(
    method: str = "mtp",
    num_speculative_tokens: float = 3,
    n_predict: float = 3,
    drop: bool = False,
    block_size: float = 0,
) -> sh.SpecHits:
    """The resend's cached tokens per engine for vLLM's ``speculative_config``: ``method``,
    ``num_speculative_tokens``, ``n_predict`` and ``disable_lookahead_block_hashes`` (``drop``);
    ``block_size`` 0 = the planner's block for Kimi K3 at TP8."""
    cfg = {
        "method": ui.check_choice("method", method, METHODS),
        "num_speculative_tokens": _k(num_speculative_tokens),
        "n_predict": _n_predict(n_predict),
        "disable_lookahead_block_hashes": bool(drop),
    }
    return sh.spec_hits(speculative_config=cfg, block_size=_block(block_size) or None)


def draw_hits(r: sh.SpecHits, t: T) -> tuple:
    return (hits_markdown(r, t), *fig_hits(r, t))


hits = rendered(compute_hits, draw_hits, MSG)


def hits_panel(page: Page, demo: gr.Blocks) -> None:
    """The panel (elem ids ``speculative_replay-hits-*``): vLLM's flags left, the table and the
    figure right; drawn on load, redrawn on its button and on the language switch."""
    L = page.label
    with gr.Accordion(open=True) as box, gr.Row():
        with gr.Column(scale=1, min_width=300):
            L(gr.Markdown(elem_id=f"{NAME}-hits-intro"), "spec_hits_intro")
            method = gr.Radio(list(METHODS), value="mtp", elem_id=f"{NAME}-hits-method")
            method = L(method, "f_method")
            with gr.Row():
                k = L(gr.Number(3, step=1, elem_id=f"{NAME}-hits-k"), "f_k")
                n_predict = L(gr.Number(3, step=1, elem_id=f"{NAME}-hits-n-predict"), "f_n_predict")
            drop = L(gr.Checkbox(False, elem_id=f"{NAME}-hits-drop"), "f_drop")
            block = L(gr.Number(0, step=16, elem_id=f"{NAME}-hits-block"), "f_block")
            btn = L(gr.Button(variant="secondary", elem_id=f"{NAME}-hits-run"), "b_hits")
        with gr.Column(scale=2):
            md = gr.Markdown(
                label="Hits with and without drafts",
                elem_id=f"{NAME}-hits-summary",
                elem_classes=["kda-metrics"],
            )
            slot = page.figure_slot(f"{NAME}-hits", "n_hits")
    L(box, "acc_spec_hits")
    fn, outs = page.event(compute_hits, draw_hits, [md, *slot.outputs])
    inputs = [method, k, n_predict, drop, block, page.radio]
    check = guard.validator(None, _k, _n_predict, None, _block)
    btn.click(fn, inputs, outs, api_name=f"{NAME}_hits", validator=check)
    demo.load(fn, inputs, outs, api_visibility="private")


__all__ = ["hits", "hits_panel"]
