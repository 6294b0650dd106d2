"""memory_planner: what a real KDA hybrid config costs per GPU and what SGLang would do with it.

Draws ``kda_core.studies.planner.plan``: per-slot sizes, slots per request by strategy, max
running requests (state- vs KV-limited), the capping message and allocation log lines, the
ratio that balances a workload, and per-request memory vs context length (MLA grows, KDA flat).

Main action: ``memory_planner_plan`` (all inputs -> sizes table, SGLang log, three figures
with CSVs, this session's plan history). The history lives in ``gr.State`` (per browser tab).
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import common, guard, i18n
from apps.common import COLORS, SERIES
from apps.i18n_tables import MEMORY_PLANNER as TR
from kda_core import sizing
from kda_core.studies import planner as pl

NAME = "memory_planner"
PRESETS = ("kimi-k3", "kimi-linear-48b", "custom")
DTYPES = tuple(sizing.DTYPE_BYTES)
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer", "radix_off")
MAX_HISTORY = 12

EN = """**One GPU's cache budget for a KDA hybrid.** Every running request needs its own
*fixed-size* KDA state (recurrent state + short-conv window, red) however long the context,
while the MLA layers' KV cache (blue) grows with every token. SGLang splits the budget with
`--mamba-full-memory-ratio`, and with radix caching each request *reserves several state slots*
(live state + ping-pong track slots). **Look at:** which side caps *max running requests*
(the two curves in the middle figure cross at the balancing ratio), where MLA KV overtakes the
KDA slot on the context axis, and the message SGLang prints when the state cache is the limit."""

ZH = """**一块 GPU 上 KDA 混合模型的缓存预算。** 每个正在运行的请求都需要一份*固定大小*的 KDA 状态
（递推状态 + 短卷积窗口，红色），与上下文长度无关；而 MLA 层的 KV 缓存（蓝色）随每个 token 增长。
SGLang 用 `--mamba-full-memory-ratio` 划分显存；开启 radix 缓存时每个请求要*预留多个状态槽*
（活动状态 + 乒乓跟踪槽）。**请看：** 是哪一侧限制了*最大并发请求数*
（中间图两条曲线在平衡比例处相交），在上下文轴上 MLA KV 在何处超过一个 KDA 槽位，
以及状态缓存成为瓶颈时 SGLang 打印的提示。"""


def _gib(n: float) -> str:
    return f"{n / sizing.GIB:.2f} GiB"


def _mib(n: float) -> str:
    return f"{n / sizing.MIB:.1f} MiB"


# ---------------------------------------------------------------------------------------------
# Figures (pure: Plan -> figure, csv path)
# ---------------------------------------------------------------------------------------------


def fig_context(p: pl.Plan) -> tuple[go.Figure, str]:
    x = p.context_lens
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=p.mla_bytes / sizing.MIB,
        name="MLA KV (grows per token)",
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate="context %{x:,} tokens<br>MLA KV %{y:,.1f} MiB<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=p.kda_bytes / sizing.MIB,
        name="KDA state + conv window (one slot, flat)",
        line={"color": COLORS["state"], "width": 3},
        hovertemplate="context %{x:,} tokens<br>KDA slot %{y:,.1f} MiB<extra></extra>",
    )
    common.vline(
        fig,
        p.crossover_context,
        f"MLA > KDA from {p.crossover_context:,} tokens",
        log=True,
        xanchor="right",
    )
    common.style(
        fig,
        f"One request's memory on one GPU vs context ({p.model}, TP{p.tp})",
        "context length (tokens, log scale)",
        "memory per request (MiB, log scale)",
    )
    common.log_axis(fig, "x")
    common.log_axis(fig, "y")
    fig.update_layout(margin={"t": 64})
    csv = common.write_csv(
        f"{NAME}-memory_vs_context",
        {
            "context_tokens": x,
            "mla_kv_bytes": p.mla_bytes,
            "kda_slot_bytes": p.kda_bytes,
        },
    )
    return fig, csv


def fig_ratio(p: pl.Plan) -> tuple[go.Figure, str]:
    r = p.ratios
    fig = go.Figure()
    fig.add_scatter(
        x=r,
        y=p.running_by_state,
        name="limit from state slots",
        line={"color": COLORS["state"], "width": 3},
        hovertemplate="ratio %{x:.3f}<br>%{y:,} requests (state)<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.running_by_kv,
        name=f"limit from KV ({p.tokens_per_request:,} tokens/request)",
        line={"color": COLORS["kv"], "width": 3},
        hovertemplate="ratio %{x:.3f}<br>%{y:,} requests (KV)<extra></extra>",
    )
    fig.add_scatter(
        x=r,
        y=p.max_running_by_ratio,
        name="max running requests",
        line={"color": "black", "width": 1.5, "dash": "dash"},
        hovertemplate="ratio %{x:.3f}<br>max running %{y:,}<extra></extra>",
    )
    common.vline(fig, p.balanced_ratio, f"balanced {p.balanced_ratio:.3g}", log=True)
    if p.ratios.min() <= p.ratio <= p.ratios.max():
        fig.add_scatter(
            x=[p.ratio],
            y=[p.max_running],
            mode="markers",
            name=f"this plan (ratio {p.ratio:g})",
            marker={"color": "black", "size": 11, "symbol": "diamond"},
            hovertemplate="this plan<br>ratio %{x:g}<br>max running %{y:,}<extra></extra>",
        )
    common.style(
        fig,
        "Max running requests vs --mamba-full-memory-ratio",
        "mamba-full-memory-ratio (state : KV bytes, log scale)",
        "running requests",
    )
    common.log_axis(fig, "x")
    fig.update_layout(margin={"t": 64})
    csv = common.write_csv(
        f"{NAME}-running_vs_ratio",
        {
            "ratio": r,
            "running_by_state": p.running_by_state,
            "running_by_kv": p.running_by_kv,
            "max_running": p.max_running_by_ratio,
        },
    )
    return fig, csv


def fig_strategies(p: pl.Plan) -> tuple[go.Figure, str]:
    names = list(p.strategy_names)
    valid = p.strategy_reserved >= 0
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=("state slots per request", f"max running from {p.state_slots:,} slots"),
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_reserved, 0),
        name="slots reserved / request",
        marker_color=SERIES[0],
        hovertemplate="%{x}<br>reserved %{y} slots<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_held, 0),
        name="slots held / request",
        marker_color=SERIES[1],
        hovertemplate="%{x}<br>held %{y} slots<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=names,
        y=np.where(valid, p.strategy_max_running, 0),
        name="max running requests (state cap)",
        marker_color=COLORS["neutral"],
        text=[f"{v:,}" if ok else "n/a" for v, ok in zip(p.strategy_max_running, valid)],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="%{x}<br>max running %{y:,}<extra></extra>",
        row=1,
        col=2,
    )
    common.style(fig, "Radix strategies: slots per request and the concurrency they allow", "", "")
    fig.update_layout(barmode="group", margin={"t": 80})
    fig.update_yaxes(title_text="slots per request", row=1, col=1)
    top = float(max(p.strategy_max_running.max(), 1))
    fig.update_yaxes(title_text="running requests", range=[0, top * 1.18], row=1, col=2)
    # short horizontal tick labels (two lines for the long name) so nothing overlaps the title
    ticks = [n.replace("_lazy", "<br>_lazy") for n in names]
    fig.update_xaxes(
        title_text="strategy",
        tickangle=0,
        tickmode="array",
        tickvals=names,
        ticktext=ticks,
        title_standoff=8,
    )
    csv = common.write_csv(
        f"{NAME}-strategies",
        {
            "strategy": names,
            "slots_reserved": p.strategy_reserved,
            "slots_held": p.strategy_held,
            "max_running_by_state": p.strategy_max_running,
        },
    )
    return fig, csv


def summary_markdown(p: pl.Plan) -> str:
    rows = [
        ("KDA recurrent state / slot", _mib(p.ssm_bytes), f"{p.spec.n_kda_layers} layers"),
        ("conv window / slot", _mib(p.conv_bytes), f"kernel {p.spec.conv_kernel}"),
        (
            "one state slot",
            _mib(p.slot_bytes),
            f"MLA KV outweighs it from {p.crossover_context:,} tokens",
        ),
        ("MLA KV / token", f"{p.kv_bytes_per_token:,} B", f"{p.spec.n_mla_layers} layers"),
        ("state slots (max_mamba_cache_size)", f"{p.state_slots:,}", _gib(p.split.state_bytes)),
        ("KV tokens", f"{p.kv_tokens:,}", _gib(p.kv_tokens * p.kv_bytes_per_token)),
        (
            "slots reserved / held per request",
            f"{p.slots_per_request} / {p.slots_held}",
            p.strategy,
        ),
        ("**max running requests**", f"**{p.max_running:,}**", _limit_note(p)),
        (
            "balancing ratio for this workload",
            f"{p.balanced_ratio:.4g}",
            f"{p.tokens_per_request:,} tokens / request",
        ),
        ("checkpoints per request", f"{p.checkpoints_per_request}", "chunk + decode track"),
    ]
    if p.draft_tokens:
        ring = sum(p.ring_bytes.values())
        rows.append(("ReplaySSM rings (all slots)", _gib(ring), f"L={p.ring_len}"))
        rows.append(
            ("per-draft states instead", _gib(p.naive_draft_state_bytes), f"D={p.draft_tokens}")
        )
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return "| quantity | value | note |\n|---|---:|---|\n" + body


def _limit_note(p: pl.Plan) -> str:
    """What limits the running requests; at 0, say plainly that one request does not fit."""
    if p.max_running > 0:
        return f"limited by **{p.limited_by}**"
    if p.limited_by == "kv":
        return (
            f"**one request does not fit**: it needs {p.tokens_per_request:,} KV tokens, the "
            f"KV pool holds {p.kv_tokens:,} (more memory, a lower ratio or a shorter request)"
        )
    return (
        f"**one request does not fit**: it holds {p.slots_held} state slots, the pool has "
        f"{p.state_slots:,} (more memory or a higher ratio)"
    )


def log_text(p: pl.Plan) -> str:
    lines = list(p.log_lines)
    if p.capping_message:
        lines.append(p.capping_message)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Callback
# ---------------------------------------------------------------------------------------------


def _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope):
    if model != "custom":
        return model
    return pl.custom_spec(
        n_kda_layers=common.check_int("KDA layers", n_kda, 1, 512),
        n_mla_layers=common.check_int("MLA layers", n_mla, 1, 512),
        kda_heads=common.check_int("KDA heads", heads, 1, 1024),
        head_dim=common.check_int("head dim", head_dim, 8, 1024),
        conv_kernel=common.check_int("conv kernel", conv_k, 1, 16),
        kv_lora_rank=common.check_int("kv_lora_rank", lora, 0, 8192),
        qk_rope_head_dim=common.check_int("qk_rope_head_dim", rope, 0, 1024),
    )


@common.study_errors
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
    (figure, csv) pairs, the history table (markdown) and the history (session state)."""
    model = common.check_choice("model", model, PRESETS)
    spec = _spec(model, n_kda, n_mla, heads, head_dim, conv_k, lora, rope)
    tp_i = common.check_int("TP", tp, 1, 64)
    for nm, d in (("SSM dtype", ssm_dtype), ("conv dtype", conv_dtype), ("KV dtype", kv_dtype)):
        common.check_choice(nm, d, DTYPES)
    budget = common.check_float("GPU memory for caches (GiB)", budget_gib, 0.5, 1024)
    r = common.check_float("mamba-full-memory-ratio", ratio, 0.01, 10)
    slots = common.check_int("max_mamba_cache_size (0 = from ratio)", max_slots, 0, 1_000_000)
    strategy = common.check_choice("strategy", strategy, STRATEGIES)
    d = common.check_int("draft tokens D", draft, 0, 64)
    i_len = common.check_int("input length", input_len, 1, 10_000_000)
    o_len = common.check_int("output length", output_len, 0, 10_000_000)
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
    hist.append(
        [
            len(hist) + 1,
            p.model,
            p.tp,
            f"{budget:g}",
            f"{r:g}" if not slots else f"{slots} slots",
            p.strategy,
            p.max_running,
            p.limited_by,
        ]
    )
    hist = hist[-MAX_HISTORY:]
    return summary_markdown(p), log_text(p), f1, c1, f2, c2, f3, c3, history_markdown(hist), hist


def _plan_validator():  # noqa: ANN202
    """The per-input checks of ``run_plan`` (same names and ranges), and TP vs heads."""

    def i(name: str, lo: int, hi: int):  # noqa: ANN202
        return lambda v: common.check_int(name, v, lo, hi)

    def dt(name: str):  # noqa: ANN202
        return lambda v: common.check_choice(name, v, DTYPES)

    def cross(model: str, *v: object) -> tuple[int, str] | None:
        if model == "custom":
            return None  # the custom spec's own checks run in the callback
        heads_n = sizing.preset(model).kda_heads
        tp_i = int(float(v[7]))  # type: ignore[arg-type]
        if heads_n % tp_i:
            return 8, f"TP must divide the {heads_n} KDA heads; got TP={tp_i}"
        return None

    return guard.validator(
        lambda v: common.check_choice("model", v, PRESETS),
        *[None] * 7,  # the custom config: checked with the spec in the callback
        i("TP", 1, 64),
        dt("SSM dtype"),
        dt("conv dtype"),
        dt("KV dtype"),
        lambda v: common.check_float("GPU memory for caches (GiB)", v, 0.5, 1024),
        lambda v: common.check_float("mamba-full-memory-ratio", v, 0.01, 10),
        i("max_mamba_cache_size (0 = from ratio)", 0, 1_000_000),
        lambda v: common.check_choice("strategy", v, STRATEGIES),
        None,
        None,
        i("draft tokens D", 0, 64),
        i("input length", 1, 10_000_000),
        i("output length", 0, 10_000_000),
        cross=cross,
    )


HISTORY_HEADERS = [
    "#",
    "model",
    "TP",
    "GiB",
    "ratio / slots",
    "strategy",
    "max running",
    "limited by",
]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Plans in this session**\n\n" + head + "\n" + body


def build() -> gr.Blocks:
    with gr.Blocks(title="Memory planner · KDA State Lab") as demo:
        lang = common.header(NAME, "Memory planner · 显存规划", EN, ZH)
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
                summary = gr.Markdown(
                    label="Plan", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"]
                )
                logs = gr.Code(
                    label="What SGLang would print", language=None, lines=4, elem_id=f"{NAME}-log"
                )
                s1 = common.figure_slot(f"{NAME}-context", "Memory vs context")
                s2 = common.figure_slot(f"{NAME}-ratio-fig", "Running requests vs ratio")
                s3 = common.figure_slot(f"{NAME}-strategies", "Strategies")
                hist_md = gr.Markdown(
                    label="Plans in this session",
                    elem_id=f"{NAME}-history",
                    elem_classes=["kda-metrics"],
                )
        inputs = [
            model,
            n_kda,
            n_mla,
            heads,
            head_dim,
            conv_k,
            lora,
            rope,
            tp,
            ssm_dtype,
            conv_dtype,
            kv_dtype,
            budget,
            ratio,
            max_slots,
            strategy,
            overlap,
            skip_lock,
            draft,
            input_len,
            output_len,
            history,
        ]
        outputs = [summary, logs, *s1.outputs, *s2.outputs, *s3.outputs, hist_md, history]
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
                **{s.csv: common.CSV_ZH for s in (s1, s2, s3)},
            },
            tr=TR,
        )
    return demo


if __name__ == "__main__":
    common.main(build)
