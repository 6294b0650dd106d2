"""memory_planner: what a real KDA hybrid config costs per GPU and what SGLang would do with it.

Draws ``kda_core.studies.planner.plan``: per-slot sizes, slots per request by strategy, max
running requests (state- vs KV-limited), the capping message and allocation log lines, the
ratio that balances a workload, and per-request memory vs context length (MLA grows, KDA flat).

Main action: ``memory_planner_plan`` (all inputs -> sizes table, SGLang log, three figures
with CSVs, this session's plan history, and the live run: a scaled state pool of 16 slots
served by the engine's scheduler for the selected strategy, its peak running requests next to
``sizing.max_running_requests``). The history lives in ``gr.State`` (per browser tab).
Figures: ``apps.figures.memory_planner``; words: ``apps.text.memory_planner``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.figures.memory_planner import fig_context, fig_live, fig_ratio, fig_strategies
from apps.text.memory_planner import (
    MSG,
    history_markdown,
    live_markdown,
    log_text,
    summary_markdown,
)
from apps.ui import guard
from apps.ui.catalog import T as Lang
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl

NAME = "memory_planner"
PRESETS = ("kimi-k3", "kimi-linear-48b", "custom")
DTYPES = tuple(sizing.DTYPE_BYTES)
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer", "radix_off")
MAX_HISTORY = 12
LIVE_SLOTS = 16  # the live run's scaled state pool: 8 short requests, well under a second
CUSTOM = (  # the custom spec's fields: message key, range
    ("n_kda", 1, 512), ("n_mla", 1, 512), ("heads", 1, 1024), ("head_dim", 8, 1024),
    ("conv_k", 1, 16), ("lora", 0, 8192), ("rope", 0, 1024),
)  # fmt: skip


def _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope):
    if model != "custom":
        return model
    v = [
        ui.check_int(MSG(f"v_{k}"), x, lo, hi)
        for (k, lo, hi), x in zip(CUSTOM, (n_kda, n_mla, heads, head_dim, conv_k, lora, rope))
    ]
    return pl.custom_spec(n_kda_layers=v[0], n_mla_layers=v[1], kda_heads=v[2], head_dim=v[3],
                          conv_kernel=v[4], kv_lora_rank=v[5], qk_rope_head_dim=v[6])  # fmt: skip


def compute_plan(
    model: str = "kimi-k3",
    n_kda: float = 69,
    n_mla: float = 24,
    heads: float = 96,
    head_dim: float = 128,
    conv_k: float = 4,
    lora: float = 512,
    rope: float = 64,
    tp: float = 8,
    ssm_dtype: str = "bfloat16",
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
    history: list | None = None,
) -> tuple:
    """Validate and plan; the live run: a scaled pool served by the engine's scheduler."""
    model = ui.check_choice(MSG("v_model"), model, PRESETS)
    spec = _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope)
    tp_i = ui.check_int(MSG("v_tp"), tp, 1, 64)
    for k, d in (("ssm", ssm_dtype), ("conv", conv_dtype), ("kv", kv_dtype)):
        ui.check_choice(MSG(f"v_{k}_dtype"), d, DTYPES)
    budget = ui.check_float(MSG("v_budget"), budget_gib, 0.5, 1024)
    r = ui.check_float(MSG("v_ratio"), ratio, 0.01, 10)
    slots = ui.check_int(MSG("v_max_slots"), max_slots, 0, 1_000_000)
    strategy = ui.check_choice(MSG("v_strategy"), strategy, STRATEGIES)
    d = ui.check_int(MSG("v_draft"), draft, 0, 64)
    i_len = ui.check_int(MSG("v_input"), input_len, 1, 10_000_000)
    o_len = ui.check_int(MSG("v_output"), output_len, 0, 10_000_000)
    heads_n = (sizing.preset(model) if model != "custom" else spec).kda_heads
    if heads_n % tp_i:
        raise fail("e_tp", MSG, heads=heads_n, tp=tp_i)
    p = pl.plan(
        spec, tp=tp_i, budget_gib=budget, ratio=r, max_mamba_cache_size=slots or None,
        ssm_dtype=ssm_dtype, conv_dtype=conv_dtype, kv_dtype=kv_dtype, strategy=strategy,
        overlap=bool(overlap), skip_decode_lock=bool(skip_lock), draft_tokens=d,
        input_len=i_len, output_len=o_len,
    )  # fmt: skip
    hist = list(history or [])
    hist.append([len(hist) + 1, p.model, p.tp, f"{budget:g}", f"{r:g}", slots, p.strategy,
                 p.max_running, p.limited_by])  # fmt: skip
    live = (
        None
        if strategy == "radix_off"
        else bv.admission_check(strategy, state_slots=LIVE_SLOTS, ssm_dtype=ssm_dtype)
    )
    return p, hist[-MAX_HISTORY:], live


def draw_plan(view: tuple, t: Lang) -> tuple:
    """Summary, log, three (figure, csv) pairs, the history table, the history, then the live
    run (markdown, figure, csv)."""
    p, hist, live = view
    f1, c1 = fig_context(p, t)
    f2, c2 = fig_ratio(p, t)
    f3, c3 = fig_strategies(p, t)
    f4, c4 = fig_live(live, p.strategy, t)
    return (
        summary_markdown(p, t), log_text(p), f1, c1, f2, c2, f3, c3, history_markdown(hist, t),
        hist, live_markdown(live, p, t), f4, c4,
    )  # fmt: skip


run_plan = rendered(compute_plan, draw_plan, MSG)


def _plan_validator():  # noqa: ANN202
    """The per-input checks of ``run_plan`` (same names and ranges), and TP vs heads."""

    def i(key: str, lo: int, hi: int):  # noqa: ANN202
        return lambda v: ui.check_int(MSG(key), v, lo, hi)

    def f(key: str, lo: float, hi: float):  # noqa: ANN202
        return lambda v: ui.check_float(MSG(key), v, lo, hi)

    def dt(key: str):  # noqa: ANN202
        return lambda v: ui.check_choice(MSG(key), v, DTYPES)

    def cross(model: str, *v: object) -> tuple[int, object] | None:
        if model == "custom":
            return None  # the custom spec's own checks run in the callback
        heads_n = sizing.preset(model).kda_heads
        tp_i = int(float(v[7]))  # type: ignore[arg-type]
        if heads_n % tp_i:
            return 8, MSG("e_tp", heads=heads_n, tp=tp_i)
        return None

    return guard.validator(
        lambda v: ui.check_choice(MSG("v_model"), v, PRESETS),
        *[None] * 7,  # the custom config: checked with the spec in the callback
        i("v_tp", 1, 64),
        dt("v_ssm_dtype"),
        dt("v_conv_dtype"),
        dt("v_kv_dtype"),
        f("v_budget", 0.5, 1024),
        f("v_ratio", 0.01, 10),
        i("v_max_slots", 0, 1_000_000),
        lambda v: ui.check_choice(MSG("v_strategy"), v, STRATEGIES),
        None,
        None,
        i("v_draft", 0, 64),
        i("v_input", 1, 10_000_000),
        i("v_output", 0, 10_000_000),
        cross=cross,
    )


def _results_column(page: Page) -> tuple:
    """The right column: plan table, SGLang's log, three figures, history, the live run."""
    summary = gr.Markdown(label="Plan", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"])
    logs = page.label(
        gr.Code(language=None, lines=4, wrap_lines=True, elem_id=f"{NAME}-log"), "f_logs"
    )  # wrapped: a log line is wider than the column
    s1 = page.figure_slot(f"{NAME}-context", "n_context")
    s2 = page.figure_slot(f"{NAME}-ratio-fig", "n_ratio")
    s3 = page.figure_slot(f"{NAME}-strategies", "n_strategies")
    hist_md = gr.Markdown(
        label="Plans in this session", elem_id=f"{NAME}-history", elem_classes=["kda-metrics"]
    )
    live_md = gr.Markdown(
        label="Live run summary", elem_id=f"{NAME}-live-summary", elem_classes=["kda-metrics"]
    )
    s4 = page.figure_slot(f"{NAME}-live", "n_live")
    return summary, logs, s1, s2, s3, hist_md, live_md, s4


def _inputs(page: Page) -> list:
    """The left column's inputs, in ``compute_plan``'s order (without the history)."""
    L = page.label
    model = page.choices(
        L(gr.Dropdown(list(PRESETS), value="kimi-k3", elem_id=f"{NAME}-model"), "f_model"),
        [(MSG("o_custom") if m == "custom" else MSG("model_name", name=m), m) for m in PRESETS],
    )  # fmt: skip
    with gr.Accordion(open=False) as custom_box:
        custom = [L(gr.Number(v, step=1), f"f_{k}") for (k, _, _), v in
                  zip(CUSTOM, (69, 24, 96, 128, 4, 512, 64))]  # fmt: skip
    L(custom_box, "acc_custom")
    with gr.Row():
        tp = L(gr.Number(8, step=1, elem_id=f"{NAME}-tp"), "f_tp")
        budget = L(gr.Number(28, elem_id=f"{NAME}-budget"), "f_budget")
    with gr.Row():
        ratio = L(gr.Number(0.9, elem_id=f"{NAME}-ratio"), "f_ratio")
        max_slots = L(gr.Number(0, step=1), "f_max_slots")
    with gr.Row():
        dtypes = [L(gr.Dropdown(list(DTYPES), value="bfloat16"), f"f_{k}_dtype")
                  for k in ("ssm", "conv", "kv")]  # fmt: skip
    strategy = L(gr.Radio(list(STRATEGIES), value="extra_buffer"), "f_strategy")
    with gr.Row():
        overlap = L(gr.Checkbox(True), "f_overlap")
        skip_lock = L(gr.Checkbox(False), "f_skip_lock")
    with gr.Row():
        draft = L(gr.Number(0, step=1), "f_draft")
        input_len = L(gr.Number(16_000, step=1, elem_id=f"{NAME}-input"), "f_input")
        output_len = L(gr.Number(3_000, step=1), "f_output")
    return [model, *custom, tp, *dtypes, budget, ratio, max_slots, strategy, overlap, skip_lock,
            draft, input_len, output_len]  # fmt: skip


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                inputs = _inputs(page)
                run = page.label(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_plan")
            with gr.Column(scale=2):
                summary, logs, s1, s2, s3, hist_md, live_md, s4 = _results_column(page)
        outputs = [
            summary, logs, *s1.outputs, *s2.outputs, *s3.outputs, hist_md, history, live_md,
            *s4.outputs,
        ]  # fmt: skip
        plan_fn, plan_out = page.event(compute_plan, draw_plan, outputs)
        plan_in = [*inputs, history, page.radio]
        run.click(plan_fn, plan_in, plan_out, api_name=f"{NAME}_plan", validator=_plan_validator())
        demo.load(plan_fn, plan_in, plan_out, api_visibility="private")
        page.finish()
    return demo


__all__ = ["MSG", "build", "run_plan"]

if __name__ == "__main__":
    ui.main(build)
