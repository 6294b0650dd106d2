"""memory_planner: what a hybrid model's config costs per GPU, as SGLang and vLLM size it.

Draws ``studies.planner`` and ``studies.planner_engines``. Actions: ``memory_planner_plan`` (plan
table, both engines' lines, three figures with CSVs, the plan history, the live run on a scaled
pool of 16 slots; a model that does not read is said by the Plan button, nothing planned),
``memory_planner_read_log`` (a log or fragment read back: verdict, fixes, the lines) and
``memory_planner_trace`` (plan from a trace).

The page (layout, events); its inputs and their checks are ``inputs`` and ``checks``, its
figures ``figures``, its tables ``tables``, its panels ``log`` (+ ``log_view``) and ``trace``
(+ ``trace_view``); every word is in ``words.memory_planner`` (and its panels' catalogs).
"""

from __future__ import annotations

import inspect

import gradio as gr

from apps.memory_planner import checks
from apps.memory_planner.checks import check_model
from apps.memory_planner.figures import draw_check, draw_plan
from apps.memory_planner.inputs import plan_inputs
from apps.memory_planner.log import check_log, log_panel, read_log
from apps.memory_planner.trace import trace_panel
from apps.ui.page import Page, rendered
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe
from kda_core.studies.calculator import K3_REST_BYTES
from words.memory_planner import MSG

NAME = "memory_planner"
CONFIG = checks.CONFIG
MAX_HISTORY = 12
LIVE_SLOTS = 16  # the live run's scaled state pool: 8 short requests, well under a second
_PRIVATE = {"api_visibility": "private"}  # events the page wires, not API endpoints
_PLAN_KW = {  # the app's names that the planner spells as the engines do
    "max_slots": "max_mamba_cache_size",
    "requested": "max_running_requests",
    "draft": "draft_tokens",
}


def compute_plan(
    model: str = "kimi-k3",
    config_json: str = "",
    n_kda: float = 69,
    n_mla: float = 24,
    heads: float = 96,
    head_dim: float = 128,
    conv_k: float = 4,
    lora: float = 512,
    rope: float = 64,
    tp: float = 8,
    ssm_dtype: str = "auto",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    budget_gib: float = 28.0,
    ratio: float = 0.9,
    max_slots: float = 0,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_lock: bool = False,
    draft: float = 0,
    input_len: float = 16_000,
    output_len: float = 3_000,
    page_size: float = 1,
    replayssm: bool = False,
    requested: float = 0,
    max_num_seqs: float = 256,
    prefix_caching: bool = True,
    linear_kind: str = "kda",
    attn_kind: str = "mla",
    value_dim: float = 0,
    mtp: bool = False,
    eagle: bool = False,
    history: list | None = None,
) -> tuple:
    """Validate and plan (SGLang, then vLLM for the same knobs); the live run: a scaled pool
    served by the engine's scheduler."""
    given = locals()
    a = {k: checks.check(k, given[k]) for k in checks.KNOWN}
    spec = checks.model_spec(model, config_json, a, mtp)
    checks.check_eagle(spec, eagle, mtp, a["draft"])
    a["tp"] = checks.check_tp(spec, a["tp"])
    plan_keys = (*checks.NUMBERS, "ssm_dtype", "conv_dtype", "kv_dtype", "strategy")
    kw = {_PLAN_KW.get(k, k): a[k] for k in plan_keys if k != "max_num_seqs"}
    kw.update({k: kw[k] or None for k in ("max_mamba_cache_size", "max_running_requests")})
    kw["ssm_dtype"] = None if a["ssm_dtype"] == "auto" else a["ssm_dtype"]
    flags = {"overlap": overlap, "skip_decode_lock": skip_lock, "replayssm": replayssm, "mtp": mtp}
    kw["eagle"] = checks.BUNDLED_DRAFT if eagle else None  # the shipped draft config's name
    p = pl.plan(spec, **kw, **{k: bool(v) for k, v in flags.items()})
    v = pe.vllm_side(p, a["max_num_seqs"], bool(prefix_caching))
    row = [p.model, p.tp, f"{a['budget_gib']:g}", f"{a['ratio']:g}", a["max_slots"], p.strategy]
    hist = [*(history or []), [len(history or []) + 1, *row, p.max_running, p.limited_by]]
    live = None
    if p.strategy != "radix_off":
        live = bv.admission_check(p.strategy, state_slots=LIVE_SLOTS, ssm_dtype=p.ssm_dtype)
    return p, hist[-MAX_HISTORY:], live, v


run_plan = rendered(compute_plan, draw_plan, MSG)
PLAN_NAMES = tuple(inspect.signature(compute_plan).parameters)


def k3_example() -> tuple:
    """The K3 write-up's fp8 deployment at the budget and ratio that give both of its logs."""
    gib = K3_REST_BYTES / sizing.GIB
    return "kimi-k3", 8, "bfloat16", "fp8_e4m3", gib, 0.15, 0, 64, True


def _md(label: str, suffix: str) -> gr.Markdown:
    """A results panel (its label names it in the API)."""
    return gr.Markdown(label=label, elem_id=f"{NAME}-{suffix}", elem_classes=["kda-metrics"])


def _code(page: Page, suffix: str, key: str) -> gr.Code:
    """An engine's log lines, wrapped: a log line is wider than the column."""
    code = gr.Code(language=None, lines=4, wrap_lines=True, elem_id=f"{NAME}-{suffix}")
    return page.label(code, key)


def _results_column(page: Page) -> dict:
    """The right column: both engines, plan table, logs, three figures, history, the live run."""
    out = {"engines": _md("SGLang vs vLLM", "engines")}
    with gr.Row():
        out["logs"] = _code(page, "log", "f_logs")
        out["vlogs"] = _code(page, "vllm-log", "f_vllm_logs")
    out["summary"] = _md("Plan", "summary")
    for key, elem, name in (("s1", "context", "n_context"), ("s2", "ratio-fig", "n_ratio")):
        out[key] = page.figure_slot(f"{NAME}-{elem}", name)
    out["s3"] = page.figure_slot(f"{NAME}-strategies", "n_strategies")
    out["hist_md"] = _md("Plans in this session", "history")
    out["live_md"] = _md("Live run summary", "live-summary")
    out["s4"] = page.figure_slot(f"{NAME}-live", "n_live")
    return out


def _wire_plan(page: Page, demo: gr.Blocks, c: dict, r: dict, buttons: tuple) -> None:
    """Plan (its refusal said first by the button), the K3 example, and the plan on load."""
    run, k3, status, history = buttons
    slots = (*r["s1"].outputs, *r["s2"].outputs, *r["s3"].outputs)
    outputs = [r["summary"], r["logs"], *slots, r["hist_md"], history, r["live_md"]]
    outputs += [*r["s4"].outputs, r["engines"], r["vlogs"]]
    plan_fn, plan_out = page.event(compute_plan, draw_plan, outputs)
    figs = [r["s1"].plot, r["s2"].plot, r["s3"].plot, r["live_md"], r["s4"].plot]
    checked = [status, r["summary"], r["logs"], *figs, r["engines"], r["vlogs"]]
    pre, pre_out = page.event(check_model, draw_check, checked)
    plan_in = [*c.values(), history, page.radio]
    pre_in = [c["model"], c["config_json"], page.radio]
    validator = checks.plan_validator(PLAN_NAMES)
    run.click(pre, pre_in, pre_out, **_PRIVATE).then(
        plan_fn, plan_in, plan_out, api_name=f"{NAME}_plan", validator=validator
    )
    names = ("model", "tp", "ssm_dtype", "kv_dtype", "budget_gib", "ratio", "max_slots")
    k3_in = [c[n] for n in (*names, "page_size", "replayssm")]
    k3.click(k3_example, [], k3_in, **_PRIVATE).then(pre, pre_in, pre_out, **_PRIVATE).then(
        plan_fn, plan_in, plan_out, **_PRIVATE
    )
    demo.load(plan_fn, plan_in, plan_out, api_visibility="private")


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                c = plan_inputs(page, PLAN_NAMES)
                with gr.Row():
                    run = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_plan")
                    k3 = page.label(gr.Button(elem_id=f"{NAME}-k3"), "b_k3")
                status = gr.Markdown(elem_id=f"{NAME}-status")
            with gr.Column(scale=2):
                r = _results_column(page)
        _wire_plan(page, demo, c, r, (run, k3, status, history))
        log_panel(page, [c["model"], c["config_json"]])
        trace_panel(page)
        page.finish()
    return demo


__all__ = [
    "CONFIG",
    "MAX_HISTORY",
    "MSG",
    "build",
    "check_log",
    "check_model",
    "k3_example",
    "pe",
    "read_log",
    "run_plan",
]  # what the tests read as app.<name>
