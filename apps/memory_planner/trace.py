"""memory_planner's "plan from my trace" panel: ``kda_core.plan.sweep`` on an uploaded (or the
bundled) trace through ``kda_core.studies.plan_trace``: the Pareto figure, the recommended
launch command and start-up lines, the points' CSV, a progress bar while it runs.

``trace_panel(page)`` lays it out and wires it; ``plan_trace`` is the callback
(``memory_planner_trace`` in the API). The panel does not draw on load (a sweep takes seconds).
``trace_view`` draws it; its words are ``words.memory_planner_trace``.
"""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from apps import ui
from apps.memory_planner.trace_view import fig_trace, trace_markdown
from apps.ui import guard
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import workloads as wl
from kda_core.studies import plan_trace as pt
from words.catalog import T as Lang
from words.memory_planner import MSG

NAME = "memory_planner"
OBJECTIVES = ("cached_tokens", "state_hit_rate", "ttft_p99_s")
DEFAULT_RATIOS = ", ".join(f"{r:g}" for r in pt.DEFAULT_RATIOS)
MAX_UPLOAD_BYTES = ui.MAX_UPLOAD_MIB << 20


def _ratios(text: object) -> tuple[float, ...]:
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        vals = ()
    if not 1 <= len(vals) <= 12 or not all(0 < v <= 1000 for v in vals):
        raise fail("e_trace_ratios", MSG, n=12, got=ui.clip_text(text))
    return vals


def _checks() -> list:
    return [
        lambda v: ui.check_int(MSG("v_trace_n"), v, 1, 12_031),
        lambda v: ui.check_float(MSG("v_trace_gib"), v, 1, 4096),
        _ratios,
        lambda v: ui.check_choice(MSG("v_trace_objective"), v, OBJECTIVES),
        lambda v: ui.check_int(MSG("v_trace_min"), v, 0, 1 << 16),
    ]


def validator():  # noqa: ANN201 - Gradio's validator callable
    """The panel's inputs checked before it runs (a rejected input leaves the page)."""
    return guard.validator(lambda v: None, *_checks())


def _trace(upload: object, n: int) -> wl.Trace | None:
    """The uploaded trace (its first ``n`` requests), None for the bundled one."""
    if upload in (None, ""):
        return None
    path = str(getattr(upload, "path", upload))
    if not os.path.isfile(path) or os.path.getsize(path) > MAX_UPLOAD_BYTES:
        raise ValueError(f"trace: no readable file of at most {ui.MAX_UPLOAD_MIB} MiB")
    try:
        return wl.load_trace(path, limit=n)
    except ValueError as e:
        raise ValueError(str(e).replace(str(Path(path).parent) + os.sep, "")) from None


def compute_trace_plan(
    upload: object = None,
    n_requests: float = 3000,
    gpu_gib: float = 28.8,
    ratios: str = DEFAULT_RATIOS,
    objective: str = "cached_tokens",
    min_running: float = 16,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
) -> pt.TracePlan:
    n, gib, rs, obj, m = (
        chk(v) for chk, v in zip(_checks(), (n_requests, gpu_gib, ratios, objective, min_running))
    )

    def report(done: int, total: int) -> None:
        desc = MSG("progress_trace", done=done, total=total).render(language)
        progress(done / total, desc=desc)

    return pt.trace_plan(
        _trace(upload, n),
        n_requests=n,
        gpu_gib=gib,
        ratios=rs,
        objective=obj,
        min_running=m or None,
        progress=report,
    )


def draw_trace_plan(p: pt.TracePlan, t: Lang) -> tuple:
    return (trace_markdown(p, t), *fig_trace(p, t))


plan_trace = rendered(compute_trace_plan, draw_trace_plan, MSG)


def trace_panel(page: Page) -> None:
    """The panel (elem ids ``memory_planner-trace-*``): inputs left, summary and figure right."""
    L = page.label
    with gr.Accordion(open=True) as box, gr.Row():
        with gr.Column(scale=1, min_width=290):
            L(gr.Markdown(elem_id=f"{NAME}-trace-intro"), "trace_intro")
            upload = L(
                gr.File(
                    file_types=[".jsonl", ".json", ".csv", ".txt"],
                    type="filepath",
                    elem_id=f"{NAME}-trace-file",
                    elem_classes=["kda-upload"],  # its label above it (apps.ui.launch.CSS)
                    height=120,
                ),
                "f_trace_file",
                mib=ui.MAX_UPLOAD_MIB,
            )
            n = L(gr.Number(3000, step=1, elem_id=f"{NAME}-trace-n"), "f_trace_n")
            gib = L(gr.Number(28.8, elem_id=f"{NAME}-trace-gib"), "f_trace_gib")
            rs = L(gr.Textbox(DEFAULT_RATIOS, elem_id=f"{NAME}-trace-ratios"), "f_trace_ratios")
            obj = page.choices(
                L(
                    gr.Radio(
                        list(OBJECTIVES), value="cached_tokens", elem_id=f"{NAME}-trace-objective"
                    ),
                    "f_trace_objective",
                ),
                [(f"obj_{o}", o) for o in OBJECTIVES],
            )
            m = L(gr.Number(16, step=1, elem_id=f"{NAME}-trace-min"), "f_trace_min")
            btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-trace-run"), "b_trace")
        with gr.Column(scale=2):
            md = gr.Markdown(
                label="Trace plan summary",
                elem_id=f"{NAME}-trace-summary",
                elem_classes=["kda-metrics"],
            )
            # its CSV button shows once a plan wrote the file (not a button that downloads nothing)
            front = page.figure_slot(f"{NAME}-trace-front", "n_trace_front", csv=False)
    L(box, "acc_trace")
    fn, outs = page.event(compute_trace_plan, draw_trace_plan, [md, *front.outputs])
    inputs = [upload, n, gib, rs, obj, m, page.radio]
    btn.click(fn, inputs, outs, api_name=f"{NAME}_trace", validator=validator()).success(
        lambda: gr.update(visible=True), None, front.csv, api_visibility="private"
    )


__all__ = ["plan_trace", "trace_panel", "validator"]
