"""memory_planner: what a hybrid model's config costs per GPU, as SGLang and vLLM size it.

Draws ``studies.planner`` (SGLang's sizes, caps, lines, figures) and ``studies.planner_engines``
(the model; vLLM for the same knobs; a log read back). Actions: ``memory_planner_plan`` (plan
table, both engines' lines, three figures with CSVs, the plan history, the live run on a scaled
pool of 16 slots) and ``memory_planner_read_log`` (the verdict and the lines read back).
"""

from __future__ import annotations

import inspect

import gradio as gr

from apps import ui
from apps.figures.memory_planner import fig_context, fig_live, fig_ratio, fig_strategies
from apps.text.common import COMMON
from apps.text.memory_planner import (
    MSG,
    history_markdown,
    live_markdown,
    log_text,
    summary_markdown,
)
from apps.text.memory_planner_engines import (
    engines_markdown,
    lines_markdown,
    report_markdown,
    vllm_log_text,
)
from apps.ui import guard
from apps.ui.catalog import T as Lang
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.sizing.presets import DTYPE_BYTES
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe
from kda_core.studies.calculator import K3_REST_BYTES

NAME = "memory_planner"
CONFIG, CUSTOM_MODEL = "config.json", "custom"  # a pasted config, the typed numbers
PRESETS = (*shipped_configs(), CONFIG, CUSTOM_MODEL)
DTYPES = tuple(DTYPE_BYTES)
SSM_DTYPES = ("auto", "float32", "bfloat16", "float16")  # auto: each engine's own default
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer", "radix_off")
MAX_HISTORY = 12
_PRIVATE = {"api_visibility": "private"}  # events the page wires, not API endpoints
LIVE_SLOTS = 16  # the live run's scaled state pool: 8 short requests, well under a second
CUSTOM = (  # the custom spec's fields: message key, range
    ("n_kda", 1, 512), ("n_mla", 1, 512), ("heads", 1, 1024), ("head_dim", 8, 1024),
    ("conv_k", 1, 16), ("lora", 0, 8192), ("rope", 0, 1024),
)  # fmt: skip


def _spec(model, config_json, n_kda, n_mla, heads, head_dim, conv_k, lora, rope):
    """The ModelSpec: a shipped config, the pasted config.json, or the typed numbers."""
    model = ui.check_choice(MSG("v_model"), model, PRESETS)
    if model != CUSTOM_MODEL:
        return pe.model_spec(model, config_json or "")
    v = [
        ui.check_int(MSG(f"v_{k}"), x, lo, hi)
        for (k, lo, hi), x in zip(CUSTOM, (n_kda, n_mla, heads, head_dim, conv_k, lora, rope))
    ]
    return pe.custom_spec(CUSTOM_MODEL, *v)


def _check_tp(spec: sizing.ModelSpec, tp: int) -> int:
    """``tp`` (in range already) when it divides the model's linear-layer heads and groups."""
    if spec.linear_heads % tp or (spec.linear_k_heads and spec.linear_k_heads % tp):
        raise fail("e_heads", MSG, heads=spec.linear_heads, tp=tp)
    return tp


_NUMBERS = {  # a number input: (message key, low, high, integer?)
    "tp": ("v_tp", 1, 64, True),
    "budget_gib": ("v_budget", 0.5, 1024, False),
    "ratio": ("v_ratio", 0.01, 10, False),
    "max_slots": ("v_max_slots", 0, 1_000_000, True),
    "draft": ("v_draft", 0, 64, True),
    "input_len": ("v_input", 1, 10_000_000, True),
    "output_len": ("v_output", 0, 10_000_000, True),
    "page_size": ("v_page", 1, 4096, True),
    "requested": ("v_requested", 0, 1_000_000, True),
    "max_num_seqs": ("v_max_num_seqs", 1, 1_000_000, True),
}
_CHOICES = {  # a choice input: (message key, allowed)
    "ssm_dtype": ("v_ssm_dtype", SSM_DTYPES),
    "conv_dtype": ("v_conv_dtype", DTYPES),
    "kv_dtype": ("v_kv_dtype", DTYPES),
    "strategy": ("v_strategy", STRATEGIES),
}


_PLAN_KW = {  # the app's names that the planner spells as the engines do
    "max_slots": "max_mamba_cache_size",
    "requested": "max_running_requests",
    "draft": "draft_tokens",
}


def _check(name: str, value: object) -> object:
    """One plan input checked against its one range (``_NUMBERS``) or choice list."""
    if name in _CHOICES:
        key, allowed = _CHOICES[name]
        return ui.check_choice(MSG(key), value, allowed)
    key, lo, hi, integer = _NUMBERS[name]
    return (ui.check_int if integer else ui.check_float)(MSG(key), value, lo, hi)


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
    history: list | None = None,
) -> tuple:
    """Validate and plan (SGLang, then vLLM for the same knobs); the live run: a scaled pool
    served by the engine's scheduler."""
    spec = _spec(model, config_json, n_kda, n_mla, heads, head_dim, conv_k, lora, rope)
    given = locals()
    a = {k: _check(k, given[k]) for k in (*_NUMBERS, *_CHOICES)}
    a["tp"] = _check_tp(spec, a["tp"])
    kw = {_PLAN_KW.get(k, k): v for k, v in a.items() if k != "max_num_seqs"}
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


def draw_plan(view: tuple, t: Lang) -> tuple:
    """Summary, log, three (figure, csv) pairs, the history table, the history, the live run
    (markdown, figure, csv), then SGLang and vLLM side by side and vLLM's log."""
    p, hist, live, v = view
    f1, c1 = fig_context(p, t)
    f2, c2 = fig_ratio(p, t)
    f3, c3 = fig_strategies(p, t)
    f4, c4 = fig_live(live, p.strategy, t)
    return (
        summary_markdown(p, t), log_text(p), f1, c1, f2, c2, f3, c3, history_markdown(hist, t),
        hist, live_markdown(live, p, t), f4, c4, engines_markdown(p, v, t), vllm_log_text(v),
    )  # fmt: skip


run_plan = rendered(compute_plan, draw_plan, MSG)


def _plan_validator():  # noqa: ANN202
    """The per-input checks of ``run_plan`` (the same table), and TP vs heads."""

    def cross(model: str, config_json: str, *v: object) -> tuple[int, object] | None:
        if model == CUSTOM_MODEL:
            return None  # the custom spec's own checks run in the callback
        try:
            spec = pe.model_spec(model, config_json or "")
        except ValueError as e:  # the study's sentence, inside one in the page's language
            return 1, COMMON("core_refused", message=str(e))
        try:
            _check_tp(spec, _check("tp", v[7]))
        except UserError as e:
            return 9, e.msg  # rendered in the page's language
        return None

    names = list(inspect.signature(compute_plan).parameters)
    checks = [
        (lambda v, n=n: _check(n, v)) if n in _NUMBERS or n in _CHOICES else None for n in names
    ]
    checks[0] = lambda v: ui.check_choice(MSG("v_model"), v, PRESETS)
    return guard.validator(*checks, cross=cross)


def compute_log(
    model: str = "kimi-k3",
    config_json: str = "",
    log: str = "",
    log_ratio: float = 0,
    log_page: float = 0,
    log_tp: float = 0,
) -> sizing.LogReport:
    """A pasted SGLang or vLLM log read back against the chosen shipped or pasted config."""
    if ui.check_choice(MSG("v_model"), model, PRESETS) == CUSTOM_MODEL:
        raise fail("e_log_custom", MSG)
    spec = pe.model_spec(model, config_json or "")
    r = ui.check_float(MSG("v_log_ratio"), log_ratio, 0, 10)
    page = ui.check_int(MSG("v_log_page"), log_page, 0, 4096)
    tp = ui.check_int(MSG("v_log_tp"), log_tp, 0, 64)
    return sizing.read_log(log, spec, tp=tp or None, page_size=page or None, ratio=r or None)


def draw_log(report: sizing.LogReport, t: Lang) -> tuple:
    """The verdict with its remedies, then the line-by-line comparison."""
    return report_markdown(report, t), lines_markdown(report, t)


read_log = rendered(compute_log, draw_log, MSG)


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


def _model_inputs(page: Page) -> list:
    """The model: a shipped config, config.json (pasted or uploaded) or the custom numbers."""
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
        custom = [L(gr.Number(v, step=1), f"f_{k}") for (k, _, _), v in
                  zip(CUSTOM, (69, 24, 96, 128, 4, 512, 64))]  # fmt: skip
    L(custom_box, "acc_custom")
    check = guard.validator(_check_upload)
    upload.upload(_load_config, [upload, page.radio], [config, model], validator=check, **_PRIVATE)
    return [model, config, *custom]


def _inputs(page: Page) -> list:
    """The left column's inputs, in ``compute_plan``'s order (without the history)."""
    L = page.label
    model_in = _model_inputs(page)
    with gr.Row():
        tp = L(gr.Number(8, step=1, elem_id=f"{NAME}-tp"), "f_tp")
        budget = L(gr.Number(28, elem_id=f"{NAME}-budget"), "f_budget")
    with gr.Row():
        ratio = L(gr.Number(0.9, elem_id=f"{NAME}-ratio"), "f_ratio")
        max_slots = L(gr.Number(0, step=1), "f_max_slots")
    with gr.Row():
        dtypes = [
            L(gr.Dropdown(list(choices), value=value, elem_id=f"{NAME}-{k}-dtype"), f"f_{k}_dtype")
            for k, choices, value in (
                ("ssm", SSM_DTYPES, "auto"),
                ("conv", DTYPES, "bfloat16"),
                ("kv", DTYPES, "bfloat16"),
            )
        ]
    strategy = L(gr.Radio(list(STRATEGIES), value="extra_buffer"), "f_strategy")
    with gr.Row():
        overlap = L(gr.Checkbox(True), "f_overlap")
        skip_lock = L(gr.Checkbox(False), "f_skip_lock")
        replayssm = L(gr.Checkbox(False, elem_id=f"{NAME}-replayssm"), "f_replayssm")
    with gr.Row():
        draft = L(gr.Number(0, step=1), "f_draft")
        input_len = L(gr.Number(16_000, step=1, elem_id=f"{NAME}-input"), "f_input")
        output_len = L(gr.Number(3_000, step=1), "f_output")
    with gr.Row():
        page_size = L(gr.Number(1, step=1, elem_id=f"{NAME}-page"), "f_page")
        requested = L(gr.Number(0, step=1), "f_requested")
    with gr.Row():
        seqs = L(gr.Number(256, step=1, elem_id=f"{NAME}-max-num-seqs"), "f_max_num_seqs")
        prefix = L(gr.Checkbox(True), "f_prefix")
    return [*model_in, tp, *dtypes, budget, ratio, max_slots, strategy, overlap, skip_lock,
            draft, input_len, output_len, page_size, replayssm, requested, seqs,
            prefix]  # fmt: skip


def _log_panel(page: Page, model_in: list) -> None:
    """Paste a log (or load a real one) and read it back against the chosen model."""
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
    log_in = [*model_in, log, ratio, page_size, tp, page.radio]
    read.click(fn, log_in, outs, api_name=f"{NAME}_read_log")
    for e, btn in zip(pe.EXAMPLE_LOGS, examples):
        filled = [model_in[0], log, ratio, page_size, tp]
        fill = lambda e=e: (e.model, e.text, e.ratio or 0, e.page_size or 0, 0)  # noqa: E731
        btn.click(fill, [], filled, **_PRIVATE).then(fn, log_in, outs, **_PRIVATE)


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                inputs = _inputs(page)
                with gr.Row():
                    run = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_plan")
                    k3 = page.label(gr.Button(elem_id=f"{NAME}-k3"), "b_k3")
            with gr.Column(scale=2):
                summary, logs, s1, s2, s3, hist_md, live_md, s4, engines, vlogs = _results_column(
                    page
                )
        slots = (*s1.outputs, *s2.outputs, *s3.outputs)
        outputs = [summary, logs, *slots, hist_md, history, live_md, *s4.outputs, engines, vlogs]
        plan_fn, plan_out = page.event(compute_plan, draw_plan, outputs)
        plan_in = [*inputs, history, page.radio]
        run.click(plan_fn, plan_in, plan_out, api_name=f"{NAME}_plan", validator=_plan_validator())
        k3_in = [inputs[0], inputs[9], inputs[10], inputs[12], inputs[13], inputs[14],
                 inputs[15], inputs[22], inputs[23]]  # fmt: skip
        k3.click(k3_example, [], k3_in, **_PRIVATE).then(plan_fn, plan_in, plan_out, **_PRIVATE)
        demo.load(plan_fn, plan_in, plan_out, api_visibility="private")
        _log_panel(page, inputs[:2])
        page.finish()
    return demo


__all__ = ["MSG", "build", "read_log", "run_plan"]

if __name__ == "__main__":
    ui.main(build)
