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
    EN,
    TR,
    ZH,
    history_markdown,
    live_markdown,
    log_text,
    summary_markdown,
)
from apps.ui import guard, i18n
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl

NAME = "memory_planner"
PRESETS = ("kimi-k3", "kimi-linear-48b", "custom")
DTYPES = tuple(sizing.DTYPE_BYTES)
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer", "radix_off")
MAX_HISTORY = 12
LIVE_SLOTS = 16  # the live run's scaled state pool: 8 short requests, well under a second


def _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope):
    if model != "custom":
        return model
    return pl.custom_spec(
        n_kda_layers=ui.check_int("KDA layers", n_kda, 1, 512),
        n_mla_layers=ui.check_int("MLA layers", n_mla, 1, 512),
        kda_heads=ui.check_int("KDA heads", heads, 1, 1024),
        head_dim=ui.check_int("head dim", head_dim, 8, 1024),
        conv_kernel=ui.check_int("conv kernel", conv_k, 1, 16),
        kv_lora_rank=ui.check_int("kv_lora_rank", lora, 0, 8192),
        qk_rope_head_dim=ui.check_int("qk_rope_head_dim", rope, 0, 1024),
    )


@ui.study_errors
def run_plan(
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
):
    """Validate, plan, draw. Returns the outputs wired in ``build``: summary, log, three
    (figure, csv) pairs, the history table (markdown), the history (session state), then the
    live run (markdown, figure, csv): a scaled pool served by the engine's scheduler."""
    model = ui.check_choice("model", model, PRESETS)
    spec = _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope)
    tp_i = ui.check_int("TP", tp, 1, 64)
    for nm, d in (("SSM dtype", ssm_dtype), ("conv dtype", conv_dtype), ("KV dtype", kv_dtype)):
        ui.check_choice(nm, d, DTYPES)
    budget = ui.check_float("cache memory per GPU (GiB)", budget_gib, 0.5, 1024)
    r = ui.check_float("mamba-full-memory-ratio", ratio, 0.01, 10)
    slots = ui.check_int("max_mamba_cache_size (0 = from ratio)", max_slots, 0, 1_000_000)
    strategy = ui.check_choice("strategy", strategy, STRATEGIES)
    d = ui.check_int("draft tokens D", draft, 0, 64)
    i_len = ui.check_int("input length", input_len, 1, 10_000_000)
    o_len = ui.check_int("output length", output_len, 0, 10_000_000)
    heads_n = (sizing.preset(model) if model != "custom" else spec).kda_heads
    if heads_n % tp_i:
        raise gr.Error(f"TP must divide the {heads_n} KDA heads; got TP={tp_i}")
    p = pl.plan(
        spec,
        tp=tp_i,
        budget_gib=budget,
        ratio=r,
        max_mamba_cache_size=slots or None,
        ssm_dtype=ssm_dtype,
        conv_dtype=conv_dtype,
        kv_dtype=kv_dtype,
        strategy=strategy,
        overlap=bool(overlap),
        skip_decode_lock=bool(skip_lock),
        draft_tokens=d,
        input_len=i_len,
        output_len=o_len,
    )
    f1, c1 = fig_context(p)
    f2, c2 = fig_ratio(p)
    f3, c3 = fig_strategies(p)
    hist = list(history or [])
    hist.append([len(hist) + 1, p.model, p.tp, f"{budget:g}",
                 f"{r:g}" if not slots else f"{slots} slots", p.strategy, p.max_running,
                 p.limited_by])  # fmt: skip
    hist = hist[-MAX_HISTORY:]
    live = (
        None
        if strategy == "radix_off"
        else bv.admission_check(strategy, state_slots=LIVE_SLOTS, ssm_dtype=ssm_dtype)
    )
    f4, c4 = fig_live(live, strategy)
    live_md = live_markdown(live, p)
    return (
        summary_markdown(p), log_text(p), f1, c1, f2, c2, f3, c3, history_markdown(hist), hist,
        live_md, f4, c4,
    )  # fmt: skip


def _plan_validator():  # noqa: ANN202
    """The per-input checks of ``run_plan`` (same names and ranges), and TP vs heads."""

    def i(name: str, lo: int, hi: int):  # noqa: ANN202
        return lambda v: ui.check_int(name, v, lo, hi)

    def dt(name: str):  # noqa: ANN202
        return lambda v: ui.check_choice(name, v, DTYPES)

    def cross(model: str, *v: object) -> tuple[int, str] | None:
        if model == "custom":
            return None  # the custom spec's own checks run in the callback
        heads_n = sizing.preset(model).kda_heads
        tp_i = int(float(v[7]))  # type: ignore[arg-type]
        if heads_n % tp_i:
            return 8, f"TP must divide the {heads_n} KDA heads; got TP={tp_i}"
        return None

    return guard.validator(
        lambda v: ui.check_choice("model", v, PRESETS),
        *[None] * 7,  # the custom config: checked with the spec in the callback
        i("TP", 1, 64),
        dt("SSM dtype"),
        dt("conv dtype"),
        dt("KV dtype"),
        lambda v: ui.check_float("cache memory per GPU (GiB)", v, 0.5, 1024),
        lambda v: ui.check_float("mamba-full-memory-ratio", v, 0.01, 10),
        i("max_mamba_cache_size (0 = from ratio)", 0, 1_000_000),
        lambda v: ui.check_choice("strategy", v, STRATEGIES),
        None,
        None,
        i("draft tokens D", 0, 64),
        i("input length", 1, 10_000_000),
        i("output length", 0, 10_000_000),
        cross=cross,
    )


def _results_column() -> tuple:
    """The right column: plan table, SGLang's log, three figures, history, the live run."""
    summary = gr.Markdown(label="Plan", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"])
    logs = gr.Code(
        label="What SGLang would print",
        language=None,
        lines=4,
        wrap_lines=True,
        elem_id=f"{NAME}-log",
    )  # wrapped: a log line is wider than the column
    s1 = ui.figure_slot(f"{NAME}-context", "Memory vs context")
    s2 = ui.figure_slot(f"{NAME}-ratio-fig", "Running requests vs ratio")
    s3 = ui.figure_slot(f"{NAME}-strategies", "Strategies")
    hist_md = gr.Markdown(
        label="Plans in this session",
        elem_id=f"{NAME}-history",
        elem_classes=["kda-metrics"],
    )
    live_md = gr.Markdown(
        label="Live run summary",
        elem_id=f"{NAME}-live-summary",
        elem_classes=["kda-metrics"],
    )
    s4 = ui.figure_slot(f"{NAME}-live", "Live run")
    return summary, logs, s1, s2, s3, hist_md, live_md, s4


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        lang = ui.header(NAME, "Memory planner · 显存规划", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                model = gr.Dropdown(
                    list(PRESETS), value="kimi-k3", label="Model", elem_id=f"{NAME}-model"
                )
                with gr.Accordion("Custom config (model = custom)", open=False) as custom_box:
                    n_kda = gr.Number(69, label="KDA layers", step=1)
                    n_mla = gr.Number(24, label="MLA layers", step=1)
                    heads = gr.Number(96, label="KDA heads", step=1)
                    head_dim = gr.Number(128, label="head dim (K = V)", step=1)
                    conv_k = gr.Number(4, label="conv kernel", step=1)
                    lora = gr.Number(512, label="kv_lora_rank", step=1)
                    rope = gr.Number(64, label="qk_rope_head_dim", step=1)
                with gr.Row():
                    tp = gr.Number(8, label="TP (1-64)", step=1, elem_id=f"{NAME}-tp")
                    budget = gr.Number(
                        28, label="Cache memory per GPU (GiB)", elem_id=f"{NAME}-budget"
                    )
                with gr.Row():
                    ratio = gr.Number(
                        0.9, label="mamba-full-memory-ratio (0.01-10)", elem_id=f"{NAME}-ratio"
                    )
                    max_slots = gr.Number(0, label="max-mamba-cache-size (0 = ratio)", step=1)
                with gr.Row():
                    ssm_dtype = gr.Dropdown(list(DTYPES), value="bfloat16", label="SSM dtype")
                    conv_dtype = gr.Dropdown(list(DTYPES), value="bfloat16", label="conv dtype")
                    kv_dtype = gr.Dropdown(list(DTYPES), value="bfloat16", label="KV dtype")
                strategy = gr.Radio(list(STRATEGIES), value="extra_buffer", label="Radix strategy")
                with gr.Row():
                    overlap = gr.Checkbox(True, label="overlap scheduler")
                    skip_lock = gr.Checkbox(False, label="skip decode lock")
                with gr.Row():
                    draft = gr.Number(0, label="speculative draft tokens D (0-64)", step=1)
                    input_len = gr.Number(
                        16_000, label="input tokens", step=1, elem_id=f"{NAME}-input"
                    )
                    output_len = gr.Number(3_000, label="output tokens", step=1)
                run = gr.Button("Plan", variant="primary", elem_id=f"{NAME}-run")
            with gr.Column(scale=2):
                summary, logs, s1, s2, s3, hist_md, live_md, s4 = _results_column()
        inputs = [
            model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope, tp, ssm_dtype, conv_dtype,
            kv_dtype, budget, ratio, max_slots, strategy, overlap, skip_lock, draft, input_len,
            output_len, history,
        ]  # fmt: skip
        outputs = [
            summary, logs, *s1.outputs, *s2.outputs, *s3.outputs, hist_md, history, live_md,
            *s4.outputs,
        ]  # fmt: skip
        loc = i18n.Localizer(lang.radio, TR)
        plan_fn, plan_out = loc.wrap(run_plan, outputs)
        plan_in = [*inputs, lang.radio]
        run.click(plan_fn, plan_in, plan_out, api_name=f"{NAME}_plan", validator=_plan_validator())
        demo.load(plan_fn, plan_in, plan_out, api_visibility="private")
        loc.finish()
        lang.labels(
            {
                model: "模型",
                tp: "张量并行 TP (1-64)",
                budget: "每卡缓存显存 (GiB)",
                ratio: "mamba-full-memory-ratio (0.01-10)",
                strategy: "Radix 策略",
                input_len: "输入 token 数",
                output_len: "输出 token 数",
                logs: "SGLang 会打印的日志",
                run: "规划",
                custom_box: "自定义配置（模型 = custom）",
                **{s.csv: ui.CSV_ZH for s in (s1, s2, s3, s4)},
            },
            tr=TR,
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
