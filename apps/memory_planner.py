"""memory_planner: what a hybrid model's config costs per GPU, as SGLang and vLLM size it.

Draws ``studies.planner`` and ``studies.planner_engines``. Actions: ``memory_planner_plan`` (plan
table, both engines' lines, three figures with CSVs, the plan history, the live run on a scaled
pool of 16 slots; a model that does not read is said by the Plan button, nothing planned) and
``memory_planner_read_log`` (a log or fragment read back: verdict, fixes, the lines),
``memory_planner_trace`` (plan from a trace: ``apps.memory_planner_trace``).
"""

from __future__ import annotations

import inspect

import gradio as gr

from apps import ui
from apps.figures.memory_planner import draw_check, draw_plan
from apps.memory_planner_trace import trace_panel
from apps.text.common import COMMON
from apps.text.memory_planner import CHOICES, CUSTOM, DTYPES, MSG, NUMBERS, SSM_DTYPES, STRATEGIES
from apps.text.memory_planner_engines import draw_log, draw_log_check, report_markdown
from apps.ui import guard
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe
from kda_core.studies.calculator import K3_REST_BYTES

NAME = "memory_planner"
CONFIG, CUSTOM_MODEL = "config.json", "custom"  # a pasted config, the typed numbers
PRESETS = (*shipped_configs(), CONFIG, CUSTOM_MODEL)
MAX_HISTORY = 12
_PRIVATE = {"api_visibility": "private"}  # events the page wires, not API endpoints
LIVE_SLOTS = 16  # the live run's scaled state pool: 8 short requests, well under a second
_PLAN_KW = {  # the app's names that the planner spells as the engines do
    "max_slots": "max_mamba_cache_size",
    "requested": "max_running_requests",
    "draft": "draft_tokens",
}


def _check(name: str, value: object) -> object:
    """One input checked against its one range (``NUMBERS``, ``CUSTOM``) or choice list."""
    if name in CHOICES:
        key, allowed = CHOICES[name]
        return ui.check_choice(MSG(key), value, allowed)
    key, lo, hi, integer = NUMBERS[name] if name in NUMBERS else (*CUSTOM[name][:3], True)
    return (ui.check_int if integer else ui.check_float)(MSG(key), value, lo, hi)


def _spec(model: str, config_json: str, a: dict) -> sizing.ModelSpec:
    """The ModelSpec: a shipped config, the pasted config.json, or the custom numbers ``a``."""
    if ui.check_choice(MSG("v_model"), model, PRESETS) != CUSTOM_MODEL:
        return pe.model_spec(model, config_json or "")
    attn = {"kv_lora_rank": a["lora"], "qk_rope_head_dim": a["rope"]}
    if a["attn_kind"] == "gqa":
        attn = {"attn_kind": "gqa", "attn_kv_heads": a["lora"], "attn_head_dim": a["rope"]}
    nums = [a[k] for k in ("n_kda", "n_mla", "heads", "head_dim", "conv_k")]
    kw = {"linear_kind": a["linear_kind"], "value_dim": a["value_dim"], **attn}
    return pe.custom_spec(CUSTOM_MODEL, *nums, **kw)


def _check_tp(spec: sizing.ModelSpec, tp: int) -> int:
    """``tp`` (in range already) when it divides the model's linear-layer heads and groups."""
    if spec.linear_heads % tp or (spec.linear_k_heads and spec.linear_k_heads % tp):
        raise fail("e_heads", MSG, heads=spec.linear_heads, tp=tp)
    return tp


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
    history: list | None = None,
) -> tuple:
    """Validate and plan (SGLang, then vLLM for the same knobs); the live run: a scaled pool
    served by the engine's scheduler."""
    given = locals()
    a = {k: _check(k, given[k]) for k in (*NUMBERS, *CUSTOM, *CHOICES)}
    spec = _spec(model, config_json, a)
    a["tp"] = _check_tp(spec, a["tp"])
    plan_keys = (*NUMBERS, "ssm_dtype", "conv_dtype", "kv_dtype", "strategy")
    kw = {_PLAN_KW.get(k, k): a[k] for k in plan_keys if k != "max_num_seqs"}
    kw.update({k: kw[k] or None for k in ("max_mamba_cache_size", "max_running_requests")})
    kw["ssm_dtype"] = None if a["ssm_dtype"] == "auto" else a["ssm_dtype"]
    flags = {"overlap": overlap, "skip_decode_lock": skip_lock, "replayssm": replayssm}
    p = pl.plan(spec, **kw, **{k: bool(v) for k, v in flags.items()})
    v = pe.vllm_side(p, a["max_num_seqs"], bool(prefix_caching))
    row = [p.model, p.tp, f"{a['budget_gib']:g}", f"{a['ratio']:g}", a["max_slots"], p.strategy]
    hist = [*(history or []), [len(history or []) + 1, *row, p.max_running, p.limited_by]]
    live = None
    if p.strategy != "radix_off":
        live = bv.admission_check(p.strategy, state_slots=LIVE_SLOTS, ssm_dtype=p.ssm_dtype)
    return p, hist[-MAX_HISTORY:], live, v


run_plan = rendered(compute_plan, draw_plan, MSG)


def check_model(model: str = "kimi-k3", config_json: str = "") -> Exception | None:
    """Before a plan: a pasted config's refusal (None when it reads), said by ``draw_check``."""
    if model != CONFIG:
        return None
    try:
        pe.model_spec(model, config_json or "")
    except ValueError as e:
        return e
    return None


def _plan_validator():  # noqa: ANN202
    """The per-input checks of ``run_plan`` (the same tables), TP vs heads, and a config that
    does not read (``check_model`` has said it by the Plan button already)."""

    def cross(model: str, config_json: str, *v: object) -> tuple[int, object] | None:
        err = check_model(model, config_json)  # refused: the plan is not run
        if err is not None or model == CUSTOM_MODEL:
            return None if err is None else (1, COMMON("core_refused", message=str(err)))
        try:
            _check_tp(pe.model_spec(model, config_json or ""), _check("tp", v[7]))
        except UserError as e:
            return 9, e.msg  # rendered in the page's language
        return None

    known = (*NUMBERS, *CUSTOM, *CHOICES)
    names = inspect.signature(compute_plan).parameters
    checks = [(lambda v, n=n: _check(n, v)) if n in known else None for n in names]
    checks[0] = lambda v: ui.check_choice(MSG("v_model"), v, PRESETS)
    return guard.validator(*checks, cross=cross)


def compute_log(
    model: str = "kimi-k3",
    config_json: str = "",
    log: str = "",
    log_ratio: float = 0,
    log_page: float = 0,
    log_tp: float = 0,
    log_requested: float = 0,
    log_target: float = 0,
) -> sizing.LogReport:
    """A pasted SGLang or vLLM log (or a fragment) read back against the chosen shipped or
    pasted config, with the fixes toward ``log_target`` running requests."""
    if ui.check_choice(MSG("v_model"), model, PRESETS) == CUSTOM_MODEL:
        raise fail("e_log_custom", MSG)
    if not isinstance(log, str) or not log.strip():
        raise fail("e_log_empty", MSG)
    spec = pe.model_spec(model, config_json or "")
    r = ui.check_float(MSG("v_log_ratio"), log_ratio, 0, 10)
    page = ui.check_int(MSG("v_log_page"), log_page, 0, 4096)
    tp = ui.check_int(MSG("v_log_tp"), log_tp, 0, 64)
    req = ui.check_int(MSG("v_log_requested"), log_requested, 0, 1_000_000)
    target = ui.check_int(MSG("v_log_target"), log_target, 0, 1_000_000)
    kw = {"tp": tp, "page_size": page, "ratio": r, "requested": req, "target": target}
    return sizing.read_log(log, spec, **{k: v or None for k, v in kw.items()})


read_log = rendered(compute_log, draw_log, MSG)


def check_log(*args: object, **kw: object) -> Exception | None:
    """Before reading: the log's refusal, if any (drawn in place of an earlier verdict)."""
    try:
        compute_log(*args, **kw)  # type: ignore[arg-type]
    except (gr.Error, ValueError) as e:
        return e
    return None


check_log.__signature__ = inspect.signature(compute_log)  # type: ignore[attr-defined]


def _load_config(path: str, language: str = "English") -> tuple:
    """An uploaded config.json into the text box (its size checked by ``_check_upload`` first)."""
    return pe.read_config_file(path), CONFIG


def _check_upload(path: object) -> None:
    try:
        pe.read_config_file(path)
    except ValueError as e:  # the study's sentence, inside one in the page's language
        raise UserError(COMMON("core_refused", message=str(e))) from None


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


def _results_column(page: Page) -> tuple:
    """The right column: both engines, plan table, logs, three figures, history, the live run."""
    engines = _md("SGLang vs vLLM", "engines")
    with gr.Row():
        logs = _code(page, "log", "f_logs")
        vlogs = _code(page, "vllm-log", "f_vllm_logs")
    summary = _md("Plan", "summary")
    s1 = page.figure_slot(f"{NAME}-context", "n_context")
    s2 = page.figure_slot(f"{NAME}-ratio-fig", "n_ratio")
    s3 = page.figure_slot(f"{NAME}-strategies", "n_strategies")
    hist_md = _md("Plans in this session", "history")
    live_md = _md("Live run summary", "live-summary")
    s4 = page.figure_slot(f"{NAME}-live", "n_live")
    return summary, logs, s1, s2, s3, hist_md, live_md, s4, engines, vlogs


def _pasted(text: str) -> object:  # typed or pasted into the editor: model = config.json
    return CONFIG if isinstance(text, str) and text.strip() else gr.skip()


def _model_inputs(page: Page) -> dict:
    """The model: a shipped config, config.json (pasted or uploaded) or the custom model (its
    kinds and numbers), by ``compute_plan``'s parameter names."""
    L = page.label
    names = {CUSTOM_MODEL: MSG("o_custom"), CONFIG: MSG("o_config")}
    model = page.choices(
        L(gr.Dropdown(list(PRESETS), value="kimi-k3", elem_id=f"{NAME}-model"), "f_model"),
        [(names.get(m, MSG("model_name", name=m)), m) for m in PRESETS],
    )
    with gr.Accordion(open=False) as config_box:
        config = L(gr.Code("", language="json", lines=6, max_lines=12, elem_id=f"{NAME}-config",
                           interactive=True), "f_config_text")  # fmt: skip
        upload = L(gr.File(file_types=[".json"], type="filepath", elem_id=f"{NAME}-upload",
                           height=90), "f_config_file")  # fmt: skip
    L(config_box, "acc_config")
    with gr.Accordion(open=False) as custom_box:
        with gr.Row():
            c = {
                k: L(gr.Dropdown(list(CHOICES[k][1]), value=CHOICES[k][1][0]), f"f_{k}")
                for k in ("linear_kind", "attn_kind")
            }
        c.update({k: L(gr.Number(v[3], step=1), f"f_{k}") for k, v in CUSTOM.items()})
    L(custom_box, "acc_custom")
    check = guard.validator(_check_upload)
    upload.upload(_load_config, [upload, page.radio], [config, model], validator=check, **_PRIVATE)
    config.input(_pasted, [config], [model], **_PRIVATE)
    return {"model": model, "config_json": config, **c}


def _inputs(page: Page) -> dict:
    """The left column's inputs by ``compute_plan``'s parameter names (without the history)."""
    L = page.label
    c = _model_inputs(page)
    with gr.Row():
        c["tp"] = L(gr.Number(8, step=1, elem_id=f"{NAME}-tp"), "f_tp")
        c["budget_gib"] = L(gr.Number(28, elem_id=f"{NAME}-budget"), "f_budget")
    with gr.Row():
        c["ratio"] = L(gr.Number(0.9, elem_id=f"{NAME}-ratio"), "f_ratio")
        c["max_slots"] = L(gr.Number(0, step=1), "f_max_slots")
    with gr.Row():
        for k, choices in (("ssm", SSM_DTYPES), ("conv", DTYPES), ("kv", DTYPES)):
            value = "auto" if k == "ssm" else "bfloat16"
            dd = gr.Dropdown(list(choices), value=value, elem_id=f"{NAME}-{k}-dtype")
            c[f"{k}_dtype"] = L(dd, f"f_{k}_dtype")
    c["strategy"] = L(gr.Radio(list(STRATEGIES), value="extra_buffer"), "f_strategy")
    with gr.Row():
        c["overlap"] = L(gr.Checkbox(True), "f_overlap")
        c["skip_lock"] = L(gr.Checkbox(False), "f_skip_lock")
        c["replayssm"] = L(gr.Checkbox(False, elem_id=f"{NAME}-replayssm"), "f_replayssm")
    with gr.Row():
        c["draft"] = L(gr.Number(0, step=1), "f_draft")
        c["input_len"] = L(gr.Number(16_000, step=1, elem_id=f"{NAME}-input"), "f_input")
        c["output_len"] = L(gr.Number(3_000, step=1), "f_output")
    with gr.Row():
        c["page_size"] = L(gr.Number(1, step=1, elem_id=f"{NAME}-page"), "f_page")
        c["requested"] = L(gr.Number(0, step=1), "f_requested")
    with gr.Row():
        seqs = gr.Number(256, step=1, elem_id=f"{NAME}-max-num-seqs")
        c["max_num_seqs"] = L(seqs, "f_max_num_seqs")
        c["prefix_caching"] = L(gr.Checkbox(True), "f_prefix")
    return {n: c[n] for n in inspect.signature(compute_plan).parameters if n in c}


def _log_panel(page: Page, model_in: list) -> None:
    """Paste a log or a fragment (or load a real one) and read it back against the model."""
    L = page.label
    L(gr.Markdown(elem_id=f"{NAME}-log-title"), "log_title")
    L(gr.Markdown(elem_id=f"{NAME}-log-intro"), "log_intro")
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            log = L(gr.Textbox(lines=8, max_lines=16, elem_id=f"{NAME}-log-text"), "f_log")
            with gr.Row():
                ratio = L(gr.Number(0, elem_id=f"{NAME}-log-ratio"), "f_log_ratio")
                page_size = L(gr.Number(0, step=1), "f_log_page")
                tp = L(gr.Number(0, step=1), "f_log_tp")
            with gr.Row():
                req = L(gr.Number(0, step=1, elem_id=f"{NAME}-log-requested"), "f_log_requested")
                target = L(gr.Number(0, step=1, elem_id=f"{NAME}-log-target"), "f_log_target")
            read = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-read"), "b_read")
            L(gr.Markdown(), "examples")
            examples = [
                gr.Button(e.name, size="sm", elem_id=f"{NAME}-example-{j}")
                for j, e in enumerate(pe.EXAMPLE_LOGS)
            ]
        with gr.Column(scale=2):
            report = _md("Verdict", "report")
            lines = _md("Lines", "lines")
    page.initial(report, lambda t: report_markdown(None, t))
    fn, outs = page.event(compute_log, draw_log, [report, lines])
    pre, pre_outs = page.event(check_log, draw_log_check, [report, lines])
    log_in = [*model_in, log, ratio, page_size, tp, req, target, page.radio]
    read.click(pre, log_in, pre_outs, **_PRIVATE).then(
        fn, log_in, outs, api_name=f"{NAME}_read_log"
    )
    filled = [model_in[0], log, ratio, page_size, tp, req, target]
    for e, btn in zip(pe.EXAMPLE_LOGS, examples):
        v = (e.model, e.text, e.ratio or 0, e.page_size or 0, 0, e.requested or 0, 0)
        btn.click(lambda v=v: v, [], filled, **_PRIVATE).then(fn, log_in, outs, **_PRIVATE)


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                c = _inputs(page)
                with gr.Row():
                    run = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_plan")
                    k3 = page.label(gr.Button(elem_id=f"{NAME}-k3"), "b_k3")
                status = gr.Markdown(elem_id=f"{NAME}-status")
            with gr.Column(scale=2):
                summary, logs, s1, s2, s3, hist_md, live_md, s4, engines, vlogs = _results_column(
                    page
                )
        slots = (*s1.outputs, *s2.outputs, *s3.outputs)
        outputs = [summary, logs, *slots, hist_md, history, live_md, *s4.outputs, engines, vlogs]
        plan_fn, plan_out = page.event(compute_plan, draw_plan, outputs)
        figs = [s1.plot, s2.plot, s3.plot, live_md, s4.plot]
        pre, pre_out = page.event(
            check_model, draw_check, [status, summary, logs, *figs, engines, vlogs]
        )
        plan_in = [*c.values(), history, page.radio]
        pre_in = [c["model"], c["config_json"], page.radio]
        run.click(pre, pre_in, pre_out, **_PRIVATE).then(
            plan_fn, plan_in, plan_out, api_name=f"{NAME}_plan", validator=_plan_validator()
        )
        names = ("model", "tp", "ssm_dtype", "kv_dtype", "budget_gib", "ratio", "max_slots")
        k3_in = [c[n] for n in (*names, "page_size", "replayssm")]
        k3.click(k3_example, [], k3_in, **_PRIVATE).then(pre, pre_in, pre_out, **_PRIVATE).then(
            plan_fn, plan_in, plan_out, **_PRIVATE
        )
        demo.load(plan_fn, plan_in, plan_out, api_visibility="private")
        _log_panel(page, [c["model"], c["config_json"]])
        trace_panel(page)
        page.finish()
    return demo


__all__ = ["MSG", "build", "read_log", "run_plan"]

if __name__ == "__main__":
    ui.main(build)
