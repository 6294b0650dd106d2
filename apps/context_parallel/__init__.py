"""context_parallel: one long sequence split over P ranks, joined by an affine prefix scan.

Draws ``kda_core.studies.context_parallel``: the ranks' segments (and packed documents), the
scan's messages step by step, the state each rank receives next to the true one, the error of
every rank's outputs against a single rank, the bytes each rank sends against an MLA KV
all-gather of the same context, and the modelled speed-up over P from measured per-step costs.
The ranks run in this process (the plan and messages the gloo ranks run; no processes here).

Main action: ``context_parallel_run`` (inputs -> summary + five figures + CSVs). The page
(layout, checks, events); its figures are ``figures``, its summary ``tables``; every word comes
from ``words.context_parallel.MSG`` in the page's language; the switch redraws the last run.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from apps import ui
from apps.context_parallel.figures import (
    NAME,
    SCANS,
    SPEEDUP_T,
    fig_bytes,
    fig_exact,
    fig_speedup,
    fig_state,
    fig_steps,
)
from apps.context_parallel.tables import summary_markdown
from apps.ui import guard
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import context_parallel as cps
from words.catalog import T as Lang
from words.context_parallel import MSG

MAX_DOCS_TEXT = 200


def _docs(text: str, T: int) -> list[int] | None:
    text = str(text or "").strip()
    if not text:
        return None
    if len(text) > MAX_DOCS_TEXT:
        raise fail("e_docs_chars", MSG, n=MAX_DOCS_TEXT)
    parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= cps.MAX_DOCS:
        raise fail("e_docs_count", MSG, n=cps.MAX_DOCS)
    lens = [ui.check_int(MSG("v_doc"), p.strip(), 1, T) for p in parts]
    if sum(lens) != T:
        raise fail("e_docs_sum", MSG, T=T, got=sum(lens))
    return lens


def _cross_run(
    T: float, P: float, scan: str, docs: str, rank: float, *_: object
) -> tuple[int, object] | None:
    """Checks that need two inputs: P <= T, document lengths that sum to T, a rank below P."""
    t = int(T)
    if int(P) > t:
        return 1, MSG("e_P_T", hi=min(cps.MAX_P, t), got=int(P))
    try:
        _docs(docs, t)
    except UserError as e:
        return 3, e.msg
    try:
        ui.check_int(MSG("v_rank"), rank, 0, int(P) - 1)
    except UserError as e:
        return 4, e.msg
    return None


@dataclass(frozen=True, slots=True)
class View:
    demo: cps.Demo
    rank: int
    seed: int
    models: dict[int, cps.CostModel]


def compute_run(
    T: float = 512,
    P: float = 4,
    scan: str = SCANS[0],
    docs: str = "",
    rank: float = 2,
    seed: float = 0,
) -> View:
    T = ui.check_int(MSG("v_T"), T, 16, cps.MAX_T)
    P = ui.check_int(MSG("v_P"), P, 1, min(cps.MAX_P, T))
    scan = ui.check_choice(MSG("v_scan"), scan, SCANS)
    r = ui.check_int(MSG("v_rank"), rank, 0, P - 1)
    sd = ui.check_int(MSG("v_seed"), seed, 0, 2**31 - 1)
    d = cps.demo(T=T, P=P, scan=scan, docs=_docs(docs, T), seed=sd)
    models = {
        ctx: cps.cost_model(cps.MEASURED, T=ctx, P_values=(1, 2, 4, 8, 16, 32, 64))
        for ctx in SPEEDUP_T
    }
    return View(d, r, sd, models)


def draw_run(v: View, t: Lang) -> tuple:
    """The summary and five (figure, csv) pairs."""
    d = v.demo
    figs = [
        fig_steps(d, t),
        fig_state(d, v.rank, t),
        fig_exact(d, t),
        fig_bytes(d, t),
        fig_speedup(v.models, t),
    ]
    return (summary_markdown(d, v.seed, t), *[x for pair in figs for x in pair])


run = rendered(compute_run, draw_run, MSG)


def build() -> gr.Blocks:
    with gr.Blocks(title="Context parallel · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        L = page.label
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                T = L(gr.Number(512, step=1, elem_id=f"{NAME}-T"), "f_T", max=cps.MAX_T)
                P = L(gr.Number(4, step=1, elem_id=f"{NAME}-P"), "f_P", max=cps.MAX_P)
                scan = page.choices(
                    L(gr.Radio(list(SCANS), value=SCANS[0], elem_id=f"{NAME}-scan"), "f_scan"),
                    [(f"o_{s}", s) for s in SCANS],
                )
                docs_box = gr.Textbox("", placeholder="100, 300, 112", elem_id=f"{NAME}-docs")
                docs = L(docs_box, "f_docs")
                with gr.Row():
                    rank = L(gr.Number(2, step=1, elem_id=f"{NAME}-rank"), "f_rank")
                    seed = L(gr.Number(0, step=1), "f_seed")
                run_btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
                summary = gr.Markdown(label="Context parallel summary", elem_id=f"{NAME}-summary")
            with gr.Column(scale=2):
                slots = [
                    page.figure_slot(f"{NAME}-{k}", f"n_{k}")
                    for k in ("steps", "state", "exactness", "bytes", "speedup")
                ]
        inputs = [T, P, scan, docs, rank, seed, page.radio]
        fn, outputs = page.event(
            compute_run, draw_run, [summary] + [o for s in slots for o in s.outputs]
        )
        run_v = guard.validator(
            lambda v: ui.check_int(MSG("v_T"), v, 16, cps.MAX_T),
            lambda v: ui.check_int(MSG("v_P"), v, 1, cps.MAX_P),
            lambda v: ui.check_choice(MSG("v_scan"), v, SCANS),
            None,
            lambda v: ui.check_int(MSG("v_rank"), v, 0, cps.MAX_P - 1),
            lambda v: ui.check_int(MSG("v_seed"), v, 0, 2**31 - 1),
            None,
            cross=_cross_run,
        )
        run_btn.click(fn, inputs, outputs, api_name=f"{NAME}_run", validator=run_v)
        demo.load(fn, inputs, outputs, api_visibility="private")
        page.finish()
    return demo


__all__ = ["MSG", "build", "run"]
