"""checkpoint_density's SWA-vs-KDA panel: why a sliding-window layer's checkpoint method does
not carry over to KDA, on the same requests (``kda_core.studies.swa_vs_kda``).

It sits in checkpoint_density because it answers that app's question for the other kind of
layer: at the same checkpoint interval k on the same requests, what one checkpoint costs and
where each cache can resume. ``swa_panel(page, demo)`` lays it out and wires it (drawn on
load); ``compare`` is the callback (``checkpoint_density_swa`` in the API); ``swa_view``
draws it; its words are ``words.checkpoint_density_swa``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.checkpoint_density.swa_view import fig_swa_cost, fig_swa_resume, swa_markdown
from apps.ui import guard
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import workloads as wl
from kda_core.studies import swa_vs_kda as sk
from words.catalog import T as Lang
from words.checkpoint_density import MSG

NAME = "checkpoint_density"
WORKLOADS = {"chat": "swa_wl_chat", "agentic": "swa_wl_agentic"}
BLOCK = 64  # both workloads' block size
COST_WINDOWS = (64, 128, 512, 1024, 4096, 16384)
MAX_K = 65_536
MAX_INTERVALS = 6
KDA_HEADS = 96


def _trace(name: str) -> wl.Trace:
    return wl.workload(name, n_sessions=30, seed=0) if name == "chat" else wl.workload(name)


def _intervals(text: object) -> tuple[int, ...]:
    parts = [p.strip() for p in str(text or "").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_INTERVALS:
        raise fail("e_swa_intervals", MSG, n=MAX_INTERVALS, got=ui.clip_text(text))
    return tuple(sorted({_multiple(p, "v_swa_interval") for p in parts}))


def _multiple(value: object, key: str) -> int:
    v = ui.check_int(MSG(key), value, BLOCK, MAX_K)
    if v % BLOCK:
        raise fail("e_swa_multiple", MSG, what=MSG(key), b=BLOCK, k=v)
    return v


def validator():  # noqa: ANN201 - Gradio's validator callable
    """The panel's inputs checked before Compare runs (a rejected input leaves the page)."""
    return guard.validator(*_checks())


def _checks() -> list:
    return [
        lambda v: ui.check_choice(MSG("v_swa_workload"), v, tuple(WORKLOADS)),
        _intervals,
        lambda v: _multiple(v, "v_swa_window"),
        lambda v: ui.check_int(MSG("v_swa_heads"), v, 1, KDA_HEADS),
    ]


def compute_compare(
    workload: str = "chat",
    intervals: str = "256, 1024, 4096",
    window: float = 1024,
    kv_heads: float = KDA_HEADS,
) -> tuple[sk.CheckpointCosts, sk.WorkloadResume, str]:
    name = ui.check_choice(MSG("v_swa_workload"), workload, tuple(WORKLOADS))
    ks = _intervals(intervals)
    w = _multiple(window, "v_swa_window")
    heads = ui.check_int(MSG("v_swa_heads"), kv_heads, 1, KDA_HEADS)
    costs = sk.checkpoint_costs(windows=sorted({*COST_WINDOWS, w}), kv_heads=heads)
    return costs, sk.resume_on_workload(_trace(name), ks, window=w, costs=costs), name


def draw_compare(v: tuple[sk.CheckpointCosts, sk.WorkloadResume, str], t: Lang) -> tuple:
    costs, resume, name = v
    trace = t(WORKLOADS[name])
    return (
        swa_markdown(costs, resume, t),
        *fig_swa_cost(costs, t),
        *fig_swa_resume(resume, trace, t),
    )


compare = rendered(compute_compare, draw_compare, MSG)


def swa_panel(page: Page, demo: gr.Blocks) -> None:
    """The panel (elem ids ``checkpoint_density-swa-*``): inputs left, summary and figures
    right; drawn on load, redrawn on Compare and on the language switch."""
    L = page.label
    with gr.Accordion(open=True) as box, gr.Row():
        with gr.Column(scale=1, min_width=290):
            intro = gr.Markdown(elem_id=f"{NAME}-swa-intro")
            L(intro, "swa_intro")
            workload = page.choices(
                L(
                    gr.Dropdown(list(WORKLOADS), value="chat", elem_id=f"{NAME}-swa-workload"),
                    "f_swa_workload",
                ),
                [(key, name) for name, key in WORKLOADS.items()],
            )
            intervals = L(
                gr.Textbox("256, 1024, 4096", elem_id=f"{NAME}-swa-intervals"), "f_swa_intervals"
            )
            window = L(gr.Number(1024, step=64, elem_id=f"{NAME}-swa-window"), "f_swa_window")
            heads = L(gr.Number(KDA_HEADS, step=1, elem_id=f"{NAME}-swa-heads"), "f_swa_heads")
            btn = L(gr.Button(variant="secondary", elem_id=f"{NAME}-swa-run"), "b_swa")
        with gr.Column(scale=2):
            md = gr.Markdown(
                label="SWA vs KDA summary",
                elem_id=f"{NAME}-swa-summary",
                elem_classes=["kda-metrics"],
            )
            cost = page.figure_slot(f"{NAME}-swa-cost", "n_swa_cost")
            resume = page.figure_slot(f"{NAME}-swa-resume", "n_swa_resume")
    L(box, "acc_swa")
    inputs = [workload, intervals, window, heads, page.radio]
    fn, outs = page.event(compute_compare, draw_compare, [md, *cost.outputs, *resume.outputs])
    btn.click(fn, inputs, outs, api_name=f"{NAME}_swa", validator=validator())
    demo.load(fn, inputs, outs, api_visibility="private")


__all__ = ["compare", "swa_panel", "validator"]
