"""fleet_routing: N replicas behind a router fed by the engines' KV events.

Draws ``kda_core.studies.fleet``: every router of ``kda_core.fleet`` on one trace and fleet
(hit rates side by side: what the replicas gave, what the router counted, the KV prefix held,
the best replica), the load per replica over time for the chosen router, and the requests the
KV-only router promised and the replica could not give. The trace: the bundled Mooncake
conversation trace (first N requests), a seeded multi-turn workload, or an upload read by
``workloads.load_trace`` (format detected; at most ``MAX_UPLOAD_MIB`` MiB and
``MAX_REQUESTS`` requests). Main action: ``fleet_routing_run``. The page (layout, checks,
events); its figures are ``figures``, its table ``tables``; every word is in
``words.fleet_routing``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import gradio as gr

from apps import ui
from apps.fleet_routing.figures import NAME, fig_load, fig_over, fig_rates
from apps.fleet_routing.tables import summary_markdown
from apps.ui import guard
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import workloads as wl
from kda_core.fleet import ENGINES, ROUTERS
from kda_core.studies import density as ds
from kda_core.studies.fleet import FleetStudy, fleet_study
from words.catalog import T as Lang
from words.fleet_routing import MSG

TRACES = ("conversation", "chat", "upload")
MAX_UPLOAD_MIB = ui.MAX_UPLOAD_MIB
MAX_REQUESTS = 12_031
MAX_REPLICAS = 16
GIB = float(1 << 30)
DEFAULTS = dict(trace="conversation", n=1000, replicas=4, router="state_aware", weight=1.0)
DEFAULTS |= dict(engine="sglang", budget_gib=4.0)


def _path(value: object) -> str | None:
    if value is None or value == "":
        return None
    return str(getattr(value, "path", value))


def check_file(value: object) -> None:
    """The upload exists and is within the cap (checked before anything reads it)."""
    path = _path(value)
    if path is None:
        return
    try:
        size = Path(path).stat().st_size
    except OSError:
        raise fail("e_no_file", MSG) from None
    if size > MAX_UPLOAD_MIB << 20:
        raise fail("e_big", MSG, size=f"{size / (1 << 20):.1f}", cap=MAX_UPLOAD_MIB)


@functools.lru_cache(maxsize=8)
def _trace(kind: str, n: int) -> wl.Trace:
    """The bundled trace's first ``n`` requests, or the seeded multi-turn workload."""
    if kind == "conversation":
        return ds.load_workload("head", "conversation", n)
    return wl.workload(
        "chat",
        n_sessions=120,
        turns=5,
        system_tokens=3500,
        user_tokens=1500,
        block_size=256,
        session_rate=0.2,
    )


@functools.lru_cache(maxsize=16)
def _study(trace: wl.Trace, key: tuple) -> FleetStudy:
    """One study per settings, memoised (the worked default is drawn once per server)."""
    replicas, router, weight, engine, budget_gib = key
    budget = budget_gib * GIB if budget_gib else None
    return fleet_study(
        trace,
        replicas=replicas,
        router=router,
        weight=weight,
        engine=engine,
        state_budget_bytes=budget,
    )


def _checks() -> list:
    return [
        lambda v: ui.check_choice(MSG("v_trace"), v, TRACES),
        lambda v: ui.check_int(MSG("v_requests"), v, 100, MAX_REQUESTS),
        check_file,
        lambda v: ui.check_int(MSG("v_replicas"), v, 1, MAX_REPLICAS),
        lambda v: ui.check_choice(MSG("v_router"), v, ROUTERS),
        lambda v: ui.check_float(MSG("v_weight"), v, 0, 100),
        lambda v: ui.check_choice(MSG("v_engine"), v, ENGINES),
        lambda v: ui.check_float(MSG("v_budget"), v, 0, 1024),
    ]


def _cross(trace: object, _n: object, file: object, *_: object) -> tuple[int, object] | None:
    """The upload choice needs a file."""
    if trace == "upload" and _path(file) is None:
        return 2, MSG("e_no_file")
    return None


def compute_run(
    trace: str = DEFAULTS["trace"],
    requests: float = DEFAULTS["n"],
    file: object = None,
    replicas: float = DEFAULTS["replicas"],
    router: str = DEFAULTS["router"],
    weight: float = DEFAULTS["weight"],
    engine: str = DEFAULTS["engine"],
    budget_gib: float = DEFAULTS["budget_gib"],
) -> FleetStudy:
    """Every router on the trace; ``router`` is drawn over time."""
    checked = [c(v) for c, v in zip(_checks(), (trace, requests, file, replicas, router))]
    kind, n, _, k, r = checked
    w = ui.check_float(MSG("v_weight"), weight, 0, 100)
    eng = ui.check_choice(MSG("v_engine"), engine, ENGINES)
    gib = ui.check_float(MSG("v_budget"), budget_gib, 0, 1024)
    if kind == "upload":
        path = _path(file)
        if path is None:
            raise fail("e_no_file", MSG)
        tr = wl.load_trace(path, on_error="skip", max_requests=MAX_REQUESTS)
    else:
        tr = _trace(kind, n)
    return _study(tr, (k, r, w, eng, gib))


def draw_run(s: FleetStudy, t: Lang) -> tuple:
    return (summary_markdown(s, t), *fig_rates(s, t), *fig_load(s, t), *fig_over(s, t))


run = rendered(compute_run, draw_run, MSG)


def _inputs(page: Page) -> tuple[list, gr.Button]:
    L = page.label
    trace = page.choices(
        L(gr.Radio(list(TRACES), value=DEFAULTS["trace"], elem_id=f"{NAME}-trace"), "f_trace"),
        [(f"tr_{k}", k) for k in TRACES],
    )
    n = L(gr.Number(DEFAULTS["n"], step=100, elem_id=f"{NAME}-requests"), "f_requests")
    upload = L(
        gr.File(file_types=[".jsonl", ".json", ".csv"], type="filepath", elem_id=f"{NAME}-file"),
        "f_file",
        mib=MAX_UPLOAD_MIB,
        n=MAX_REQUESTS,
    )
    with gr.Row():
        replicas = L(gr.Number(DEFAULTS["replicas"], elem_id=f"{NAME}-replicas"), "f_replicas")
        weight = L(gr.Number(DEFAULTS["weight"], elem_id=f"{NAME}-weight"), "f_weight")
    router = page.choices(
        L(
            gr.Dropdown(list(ROUTERS), value=DEFAULTS["router"], elem_id=f"{NAME}-router"),
            "f_router",
        ),
        [(f"r_{r}", r) for r in ROUTERS],
    )
    engine = page.choices(
        L(gr.Radio(list(ENGINES), value=DEFAULTS["engine"], elem_id=f"{NAME}-engine"), "f_engine"),
        [(f"en_{e}", e) for e in ENGINES],
    )
    budget = L(gr.Number(DEFAULTS["budget_gib"], elem_id=f"{NAME}-budget"), "f_budget")
    btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
    return [trace, n, upload, replicas, router, weight, engine, budget], btn


def build() -> gr.Blocks:
    with gr.Blocks(title="Fleet routing · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                inputs, btn = _inputs(page)
            with gr.Column(scale=2):
                summary = gr.Markdown(
                    label="Routers summary", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"]
                )
                rates = page.figure_slot(f"{NAME}-rates", "n_rates")
        with gr.Row():
            with gr.Column():
                over = page.figure_slot(f"{NAME}-over", "n_over")
            with gr.Column():
                load = page.figure_slot(f"{NAME}-load", "n_load")
        outs = [summary, *rates.outputs, *load.outputs, *over.outputs]
        fn, out = page.event(compute_run, draw_run, outs)
        ins = [*inputs, page.radio]
        v = guard.validator(*_checks(), cross=_cross)
        btn.click(fn, ins, out, api_name=f"{NAME}_run", validator=v)
        demo.load(fn, ins, out, api_visibility="private")
        page.finish()
    return demo


__all__ = ["MSG", "build", "check_file", "run"]  # what the tests read as app.<name>
