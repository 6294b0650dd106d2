"""checkpoint_density: how often to checkpoint a KDA state, on a real trace or a synthetic one.

Draws ``kda_core.studies.density``: the interval sweep (peak state memory ~1/K, replay per hit,
mean TTFT, the optimum per budget) with the study's analytic curves over the simulated points
(one analytic replay curve, the same as plots/plot_checkpoint_density.py, and the study's note on
why simulated replay stays flat on the conversation trace; the title says "replay ~K" only if the
simulated data shows it: ``density.headline``), token
vs state hit rate against K and accumulated over the trace, the Pareto frontier of memory vs
state hit, and the checkpoint policies side by side at one budget.

Default (renders on load within about a second): the first 1,000 requests of the bundled
Mooncake conversation trace, 5 intervals x 2 budgets. The full trace (12,031 requests) takes
about a minute, with a progress bar. Simulations are memoised by the study, so a repeated run
is instant.

Main action: ``checkpoint_density_run``. The runs of a session are listed from ``gr.State``.
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.i18n_tables import CHECKPOINT_DENSITY as TR
from apps.ui import COLORS, SERIES, guard, i18n
from kda_core import workloads as wl
from kda_core.studies import density as ds

NAME = "checkpoint_density"
GIB = float(1 << 30)
HEAD_REQUESTS = 1000
WORKLOADS: dict[str, tuple[str, str]] = {  # label -> (kind, argument)
    f"conversation trace (first {HEAD_REQUESTS:,} requests)": ("head", "conversation"),
    "conversation trace (all 12,031 requests, ~1 min)": ("bundled", "conversation"),
    "Mooncake synthetic trace": ("bundled", "synthetic"),
    "multi-turn chat (synthetic)": ("generated", "chat"),
    "agentic sessions (synthetic)": ("generated", "agentic"),
    "one-shot documents (synthetic)": ("generated", "documents"),
}
DEFAULT_WORKLOAD = next(iter(WORKLOADS))
POLICY_LABELS = tuple(p[0] for p in ds.DEFAULT_POLICIES)
DEFAULT_INTERVALS = "1024, 2048, 4096, 8192, 16384"
DEFAULT_BUDGETS = "8, unlimited"
MAX_INTERVALS = 8
MAX_BUDGETS = 4
MAX_HISTORY = 10

EN = """**How often should a KDA state be checkpointed?** A prefix cache can only resume a request
at a token where the recurrent state was saved. Save it every K tokens and the saved states take
memory ~1/K, but a request whose prefix matches between two checkpoints must *replay* ~K/2
tokens from the last one. (On the real chat trace, follow-up turns mostly match *at* a
checkpoint, so the simulated replay per hit stays nearly flat: the note in the middle panel says
why.) Under a memory budget, dense checkpoints also evict each other.
**Look at:** the three panels against K (memory falls; replay per hit against the analytic
curve; TTFT has a minimum: the star), the gap between the *token* hit rate (what a KV cache
would reuse) and the *state* hit rate (what KDA can actually resume), the Pareto frontier,
and how the policies (SGLang, Marconi, vLLM) compare at one budget."""

ZH = """**KDA 状态应该多久存一次检查点？** 前缀缓存只能在保存了递推状态的 token 处恢复请求。
每 K 个 token 存一次，状态占用的显存约为 1/K；但前缀匹配点落在两个检查点之间的请求，必须从上一个
检查点*重放*约 K/2 个 token。（在真实对话 trace 上，后续轮次大多恰好在检查点处匹配，
所以模拟的每次命中重放量几乎不变：中间子图的注释说明了原因。）在显存预算下，过密的检查点还会
互相驱逐。**请看：** 随 K 变化的三幅子图（显存下降；每次命中的重放量与解析曲线对比；
首 token 延迟有最小值：星号），*token* 命中率（KV 缓存能复用的部分）与*状态*
命中率（KDA 真正能恢复的部分）之间的差距，Pareto 前沿，以及在同一预算下各策略（SGLang、Marconi、
vLLM）的对比。"""


# ---------------------------------------------------------------------------------------------
# Workloads (loading only)
# ---------------------------------------------------------------------------------------------


def load_workload(label: str) -> wl.Trace:
    """The trace behind a workload label (loading and slicing live in the study)."""
    kind, arg = WORKLOADS[label]
    return ds.load_workload(kind, arg, HEAD_REQUESTS)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def _budget_colors(n: int) -> list[str]:
    return [SERIES[i % len(SERIES)] for i in range(n)]


def fig_tradeoff(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    k = s.intervals
    a = s.analytic
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        opt = int(s.optimum[j])
        panels = (
            (s.peak_state_bytes[:, j] / GIB, "peak state %{y:.2f} GiB"),
            (s.mean_replay_per_hit[:, j], "replay %{y:,.0f} tokens/hit"),
            (s.ttft_mean_s[:, j], "mean TTFT %{y:.3f} s"),
        )
        for row, (y, hover) in enumerate(panels, start=1):
            fig.add_scatter(
                x=k,
                y=y,
                name=f"budget {label}",
                legendgroup=label,
                showlegend=row == 1,
                mode="lines+markers",
                line={"color": color},
                hovertemplate=f"{label}<br>K=%{{x}}<br>{hover}<extra></extra>",
                row=row,
                col=1,
            )
        fig.add_scatter(
            x=[k[opt]],
            y=[s.ttft_mean_s[opt, j]],
            mode="markers",
            name=f"optimum at {label}: K={k[opt]:,}",
            legendgroup=label,
            marker={
                "symbol": "star",
                "size": 16,
                "color": color,
                "line": {"color": "black", "width": 1},
            },
            hovertemplate=f"optimum ({label})<br>K=%{{x}}<br>TTFT %{{y:.3f}} s<extra></extra>",
            row=3,
            col=1,
        )
    fig.add_scatter(
        x=k,
        y=a.state_bytes / GIB,
        name="analytic memory: distinct prefix / K",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dash"},
        hovertemplate="analytic memory<br>K=%{x:,}<br>%{y:.2f} GiB<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_scatter(
        x=k,
        y=a.replay_curve,
        name="analytic replay: ideal match − floor to K (KV kept for every token)",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dashdot"},
        hovertemplate="analytic replay<br>K=%{x:,}<br>%{y:,.0f} tokens/hit<extra></extra>",
        row=2,
        col=1,
    )
    top = float(max(np.nanmax(a.replay_curve), np.nanmax(s.mean_replay_per_hit), 1.0))
    note = ds.replay_note(s, width=95).replace("\n", "<br>")
    fig.update_layout(meta={"zh": {note: ds.replay_note(s, "zh", width=48).replace("\n", "<br>")}})
    fig.add_annotation(
        text=note,
        xref="x2 domain",
        yref="y2 domain",
        x=0.01,
        y=0.98,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        font={"size": 10, "color": "#333"},
        bgcolor="rgba(255,255,255,0.85)",
        bordercolor="#ccc",
        borderwidth=1,
    )
    ui.style(
        fig, f"{ds.headline(s)}<br><sup>{s.trace_name}, {s.model}</sup>", "", "", height=780
    )
    for r in (1, 2, 3):
        ui.log_axis(fig, "x", k, row=r, col=1, fmt=lambda v: f"{v:,.0f}")
    fig.update_xaxes(title_text="checkpoint interval K (tokens, log scale)", row=3, col=1)
    fig.update_yaxes(title_text="peak state (GiB)", row=1, col=1)
    ui.log_axis(fig, "y", row=1, col=1)
    fig.update_yaxes(title_text="replay per hit (tokens)", range=[0, top * 1.9], row=2, col=1)
    fig.update_yaxes(title_text="mean TTFT (s)", row=3, col=1)
    fig.update_layout(margin={"b": 130, "t": 64})
    rows = [
        (
            int(k[i]),
            lab,
            *(
                getattr(s, m)[i, j].item()
                for m in (
                    "peak_state_bytes",
                    "mean_replay_per_hit",
                    "ttft_mean_s",
                    "ttft_p50_s",
                    "ttft_p95_s",
                    "state_hit_rate",
                    "token_hit_rate",
                    "checkpoints_stored",
                    "evictions",
                )
            ),
            bool(s.optimum[j] == i),
            bool(s.pareto[i, j]),
        )
        for i in range(k.size)
        for j, lab in enumerate(s.budget_labels)
    ]
    cols = [
        "interval",
        "budget",
        "peak_state_bytes",
        "mean_replay_per_hit",
        "ttft_mean_s",
        "ttft_p50_s",
        "ttft_p95_s",
        "state_hit_rate",
        "token_hit_rate",
        "checkpoints_stored",
        "evictions",
        "optimum",
        "pareto",
    ]
    csv = ui.write_csv(f"{NAME}-sweep", {c: [r[n] for r in rows] for n, c in enumerate(cols)})
    return fig, csv


def fig_hit_rates(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    k = s.intervals
    fig = go.Figure()
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        fig.add_scatter(
            x=k,
            y=s.state_hit_rate[:, j],
            name=f"state hit, {label}",
            mode="lines+markers",
            line={"color": color, "width": 3},
            hovertemplate=f"{label}<br>K=%{{x}}<br>state hit %{{y:.1%}}<extra></extra>",
        )
        fig.add_scatter(
            x=k,
            y=s.token_hit_rate[:, j],
            name=f"token hit, {label}",
            mode="lines+markers",
            line={"color": color, "dash": "dash"},
            hovertemplate=f"{label}<br>K=%{{x}}<br>token hit %{{y:.1%}}<extra></extra>",
        )
    fig.add_scatter(
        x=k,
        y=s.analytic.state_hit_rate,
        name="analytic state hit (no budget)",
        mode="lines",
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate="analytic<br>K=%{x}<br>%{y:.1%}<extra></extra>",
    )
    fig.add_hline(
        y=s.analytic.ideal_token_hit_rate,
        line={"color": COLORS["hit"], "width": 1},
        annotation_text=f"ideal token hit {s.analytic.ideal_token_hit_rate:.1%}",
        annotation_position="top left",
    )
    ui.style(
        fig,
        "A token hit is not a state hit",
        "checkpoint interval K (tokens, log scale)",
        "hit rate (share of input tokens)",
    )
    ui.log_axis(fig, "x", k, fmt=lambda v: f"{v:,.0f}")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    a = s.analytic
    csv = ui.write_csv(
        f"{NAME}-analytic",
        {
            "interval": k,
            "analytic_state_hit_rate": a.state_hit_rate,
            "analytic_replay_per_hit": a.replay_curve,
            "analytic_states": a.states,
            "analytic_state_bytes": a.state_bytes,
            "ideal_token_hit_rate": np.full(k.shape, a.ideal_token_hit_rate),
        },
    )
    return fig, csv


def fig_timeline(h: ds.HitTimeline, every: int, budget: str) -> tuple[go.Figure, str]:
    n = np.arange(1, h.arrival_s.size + 1)
    fig = go.Figure()
    fig.add_scatter(
        x=n,
        y=h.cum_token_hit_rate,
        name="token hit (KV could reuse)",
        line={"color": COLORS["hit"], "width": 2},
        hovertemplate="after %{x:,} requests<br>token hit %{y:.1%}<extra></extra>",
    )
    fig.add_scatter(
        x=n,
        y=h.cum_state_hit_rate,
        name="state hit (KDA can resume)",
        line={"color": COLORS["state"], "width": 2},
        fill="tonexty",
        fillcolor="rgba(148,103,189,0.25)",
        hovertemplate="after %{x:,} requests<br>state hit %{y:.1%}<extra></extra>",
    )
    ui.style(
        fig,
        f"Cumulative hit rates over the trace (interval {every:,}, budget {budget})"
        "; the shaded gap is replayed or re-prefilled",
        "requests served",
        "cumulative hit rate",
    )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-timeline",
        {
            "request": n,
            "arrival_s": h.arrival_s,
            "input_len": h.input_len,
            "token_match": h.token_match,
            "restore_at": h.restore_at,
            "cum_token_hit_rate": h.cum_token_hit_rate,
            "cum_state_hit_rate": h.cum_state_hit_rate,
            "state_bytes": h.state_bytes,
            "kv_bytes": h.kv_bytes,
        },
    )
    return fig, csv


def fig_pareto(s: ds.DensitySweep) -> tuple[go.Figure, str]:
    fig = go.Figure()
    for j, (label, color) in enumerate(zip(s.budget_labels, _budget_colors(len(s.budget_labels)))):
        fig.add_scatter(
            x=s.peak_state_bytes[:, j] / GIB,
            y=s.state_hit_rate[:, j],
            mode="markers+text",
            name=f"budget {label}",
            text=[f"K={v:,}" if p else "" for v, p in zip(s.intervals.tolist(), s.pareto[:, j])],
            customdata=s.intervals,
            textposition="top center",
            textfont={"size": 10},
            marker={
                "color": color,
                "size": 10,
                "symbol": ["diamond" if p else "circle" for p in s.pareto[:, j]],
            },
            hovertemplate=f"{label}<br>K=%{{customdata:,}}<br>peak state "
            "%{x:.2f} GiB<br>state hit %{y:.1%}<extra></extra>",
        )
    m = s.pareto.ravel()
    x = (s.peak_state_bytes / GIB).ravel()[m]
    y = s.state_hit_rate.ravel()[m]
    order = np.argsort(x)
    fig.add_scatter(
        x=x[order],
        y=y[order],
        mode="lines",
        name="Pareto frontier (◆)",
        line={"color": "black", "dash": "dash", "shape": "hv"},
        hovertemplate="frontier<br>%{x:.2f} GiB<br>%{y:.1%}<extra></extra>",
    )
    ui.style(
        fig,
        "Memory vs state hit: the Pareto frontier",
        "peak state memory (GiB per GPU, log scale)",
        "state hit rate",
    )
    ui.log_axis(fig, "x")
    fig.update_yaxes(tickformat=".0%")
    csv = ui.write_csv(
        f"{NAME}-pareto",
        {
            "interval": np.repeat(s.intervals, len(s.budget_labels)),
            "budget": list(s.budget_labels) * s.intervals.size,
            "peak_state_bytes": s.peak_state_bytes.ravel(),
            "state_hit_rate": s.state_hit_rate.ravel(),
            "pareto": s.pareto.ravel(),
        },
    )
    return fig, csv


def fig_policies(p: ds.PolicySweep) -> tuple[go.Figure, str]:
    labels = list(p.labels)
    extra = np.stack(
        [
            p.checkpoints_stored[:, 0],
            p.mean_replay_per_hit[:, 0],
            p.evictions[:, 0],
            p.ttft_p50_s[:, 0],
            p.peak_state_bytes[:, 0] / GIB,
        ],
        axis=1,
    )
    hover = (
        "%{x}<br>%{fullData.name}: %{y:.1%}<br>checkpoints %{customdata[0]:,}<br>replay "
        "%{customdata[1]:,.0f} tokens/hit<br>evictions %{customdata[2]:,}<br>TTFT p50 "
        "%{customdata[3]:.3f} s<br>peak state %{customdata[4]:.2f} GiB<extra></extra>"
    )
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=p.token_hit_rate[:, 0],
        name="token hit",
        marker_color=COLORS["hit"],
        customdata=extra,
        hovertemplate=hover,
    )
    fig.add_bar(
        x=labels,
        y=p.state_hit_rate[:, 0],
        name="state hit",
        marker_color=COLORS["state"],
        customdata=extra,
        hovertemplate=hover,
        text=[f"{v:.1%}" for v in p.state_hit_rate[:, 0]],
        textposition="outside",
    )
    fig.add_hline(
        y=p.ideal_token_hit_rate,
        line={"color": COLORS["neutral"], "dash": "dot"},
        annotation_text=f"ideal {p.ideal_token_hit_rate:.1%}",
        annotation_position="top right",
    )
    ui.style(
        fig,
        f"Policies at one budget ({p.budget_labels[0]} of state per GPU)",
        "checkpoint policy",
        "hit rate (share of input tokens)",
    )
    fig.update_layout(barmode="group")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-policies",
        {
            "policy": labels,
            "token_hit_rate": p.token_hit_rate[:, 0],
            "state_hit_rate": p.state_hit_rate[:, 0],
            "mean_replay_per_hit": p.mean_replay_per_hit[:, 0],
            "checkpoints_stored": p.checkpoints_stored[:, 0],
            "evictions": p.evictions[:, 0],
            "peak_state_bytes": p.peak_state_bytes[:, 0],
            "ttft_p50_s": p.ttft_p50_s[:, 0],
            "ttft_p95_s": p.ttft_p95_s[:, 0],
        },
    )
    return fig, csv


def summary_markdown(s: ds.DensitySweep, n_requests: int) -> str:
    lines = [
        f"**{s.trace_name}**: {n_requests:,} requests, block {s.block_size} tokens, "
        f"{s.state_bytes_per_checkpoint / (1 << 20):.1f} MiB per checkpoint ({s.model}); "
        f"ideal token hit **{s.analytic.ideal_token_hit_rate:.1%}**",
        "",
        "| budget | best K | mean TTFT | state hit | token hit | peak state |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for j, lab in enumerate(s.budget_labels):
        i = int(s.optimum[j])
        lines.append(
            f"| {lab} | **{int(s.intervals[i]):,}** | {s.ttft_mean_s[i, j]:.3f} s | "
            f"{s.state_hit_rate[i, j]:.1%} | {s.token_hit_rate[i, j]:.1%} | "
            f"{s.peak_state_bytes[i, j] / GIB:.2f} GiB |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Callback
# ---------------------------------------------------------------------------------------------


def _intervals(text: str, block: int) -> tuple[int, ...]:
    parts = [p.strip() for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_INTERVALS:
        raise gr.Error(
            f"intervals: give 1 to {MAX_INTERVALS} comma-separated token counts, "
            f"got {ui.clip_text(text)}"
        )
    out = []
    for p in parts:
        k = ui.check_int("interval K", p, block, 65_536)
        if k % block:
            raise gr.Error(
                f"interval K must be a multiple of the block size {block} in "
                f"[{block}, 65536], got {k}"
            )
        out.append(k)
    return tuple(sorted(set(out)))


def _budgets(text: str) -> tuple[float | None, ...]:
    parts = [p.strip() for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_BUDGETS:
        raise gr.Error(
            f"budgets: give 1 to {MAX_BUDGETS} comma-separated GiB values or "
            f"'unlimited', got {ui.clip_text(text)}"
        )
    out: list[float | None] = []
    for p in parts:
        if p.lower() in ("unlimited", "none", "inf"):
            out.append(None)
        else:
            out.append(ui.check_float("budget (GiB)", p, 0.5, 1024))
    return tuple(out)


@ui.study_errors
def run(
    workload: str = DEFAULT_WORKLOAD,
    intervals: str = DEFAULT_INTERVALS,
    budgets: str = DEFAULT_BUDGETS,
    policy_budget: float = 8.0,
    timeline_every: float = 4096,
    policies: list | tuple = POLICY_LABELS,
    history: list | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
):
    """Returns the summary, five (figure, csv) pairs, the history table, the history and the
    stale-results note (hidden again)."""
    workload = ui.check_choice("workload", workload, tuple(WORKLOADS))
    tr = load_workload(workload)
    ks = _intervals(intervals, tr.block_size)
    bs = _budgets(budgets)
    pb = ui.check_float("policy budget (GiB)", policy_budget, 0.5, 1024)
    every = _intervals(str(timeline_every), tr.block_size)[0]
    chosen = [p for p in ds.DEFAULT_POLICIES if p[0] in set(policies or ())]
    if not chosen or any(p not in POLICY_LABELS for p in policies):
        raise gr.Error(
            f"policies: choose 1 to {len(POLICY_LABELS)} of {list(POLICY_LABELS)}, "
            f"got {ui.clip_text(policies)}"
        )

    def part(lo: float, hi: float):
        return lambda f, msg: progress(lo + (hi - lo) * f, desc=msg)

    sweep = ds.density_sweep(tr, ks, bs, progress=part(0.0, 0.6))
    pols = ds.policies_at_budget(tr, pb, chosen, progress=part(0.6, 0.95))
    progress(0.96, desc="token vs state hit over the trace")
    tl = ds.hit_timeline(tr, "interval", {"every": every}, budget_gib=pb)
    figs = [
        fig_tradeoff(sweep),
        fig_hit_rates(sweep),
        fig_timeline(tl, every, f"{pb:g} GiB"),
        fig_pareto(sweep),
        fig_policies(pols),
    ]
    hist = list(history or [])
    best = ", ".join(
        f"{lab}: K={int(sweep.intervals[int(i)]):,}"
        for lab, i in zip(sweep.budget_labels, sweep.optimum)
    )
    hist.append([len(hist) + 1, sweep.trace_name, len(ks), best])
    hist = hist[-MAX_HISTORY:]
    table = (
        "**Runs in this session**\n\n| # | workload | intervals | optimum |\n|---|---|---:|---|\n"
    )
    table += "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in hist)
    return (
        summary_markdown(sweep, len(tr)),
        *[x for pair in figs for x in pair],
        table,
        hist,
        gr.update(value="", visible=False),  # the results are the workload's again
    )


def stale_note(workload: str, language: str = "English") -> dict:
    """The workload changed: the figures still show the previous one until Run."""
    if language == ui.LANGS[1]:
        text = f"⚠ 下面的结果仍是上一个负载的；按 **运行** 计算 **{workload}**。"
    else:
        text = (
            f"⚠ The results below are for the previous workload; press **Run** for **{workload}**."
        )
    return gr.update(value=text, visible=True)


def _check_policies(policies: object) -> None:
    chosen = list(policies or ()) if isinstance(policies, (list, tuple)) else []
    if not chosen or any(p not in POLICY_LABELS for p in chosen):
        raise gr.Error(
            f"policies: choose 1 to {len(POLICY_LABELS)} of {list(POLICY_LABELS)}, "
            f"got {ui.clip_text(policies)}"
        )


def _cross_intervals(workload: str, intervals: str, _b: object, _p: object, every: object,
                     *_: object) -> tuple[int, str] | None:  # fmt: skip
    """Intervals must be multiples of the workload's block size (known after loading it)."""
    block = load_workload(workload).block_size
    for i, text in ((1, intervals), (4, str(every))):
        try:
            _intervals(text, block)
        except gr.Error as e:
            return i, guard.message_of(e)
    return None


def build() -> gr.Blocks:
    with gr.Blocks(title="Checkpoint density · KDA State Lab") as demo:
        lang = ui.header(NAME, "Checkpoint density · 检查点密度", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=290):
                workload = gr.Dropdown(
                    list(WORKLOADS),
                    value=DEFAULT_WORKLOAD,
                    label="workload",
                    elem_id=f"{NAME}-workload",
                )
                intervals = gr.Textbox(
                    DEFAULT_INTERVALS,
                    elem_id=f"{NAME}-intervals",
                    label="intervals K (tokens, multiples of the block)",
                )
                budgets = gr.Textbox(
                    DEFAULT_BUDGETS,
                    elem_id=f"{NAME}-budgets",
                    label="state budgets (GiB per GPU or 'unlimited', 1-4)",
                )
                with gr.Row():
                    policy_budget = gr.Number(
                        8, label="policy budget (GiB)", elem_id=f"{NAME}-policy-budget"
                    )
                    every = gr.Number(4096, label="timeline interval K", step=1)
                policies = gr.CheckboxGroup(
                    list(POLICY_LABELS),
                    value=list(POLICY_LABELS),
                    label="policies compared at the policy budget",
                    elem_id=f"{NAME}-policies-choice",
                )
                run_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
                hist_md = gr.Markdown(
                    label="Runs in this session",
                    elem_id=f"{NAME}-history",
                    elem_classes=["kda-metrics"],
                )
            with gr.Column(scale=2):
                stale = gr.Markdown(visible=False, label="Stale results", elem_id=f"{NAME}-stale")
                summary = gr.Markdown(
                    label="Optimum per budget",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
                s1 = ui.figure_slot(f"{NAME}-tradeoff", "Memory, replay, TTFT")
                s2 = ui.figure_slot(f"{NAME}-hits", "Token vs state hit")
                s3 = ui.figure_slot(f"{NAME}-timeline", "Hit rates over the trace")
                s4 = ui.figure_slot(f"{NAME}-pareto", "Pareto frontier")
                s5 = ui.figure_slot(f"{NAME}-policies", "Policies")
        inputs = [workload, intervals, budgets, policy_budget, every, policies, history]
        outputs = [
            summary,
            *s1.outputs,
            *s2.outputs,
            *s3.outputs,
            *s4.outputs,
            *s5.outputs,
            hist_md,
            history,
        ]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, [*outputs, stale])
        run_in = [*inputs, lang.radio]
        checks = guard.validator(
            lambda v: ui.check_choice("workload", v, tuple(WORKLOADS)),
            None,  # intervals: checked against the workload's block size (cross)
            _budgets,
            lambda v: ui.check_float("policy budget (GiB)", v, 0.5, 1024),
            None,
            _check_policies,
            cross=_cross_intervals,
        )
        run_btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=checks)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        workload.input(stale_note, [workload, lang.radio], stale, api_visibility="private")
        loc.finish()
        lang.labels(
            {
                workload: "负载",
                intervals: "检查点间隔 K（token，块大小的整数倍）",
                budgets: "状态显存预算（每卡 GiB 或 'unlimited'，1-4 个）",
                policy_budget: "策略对比预算 (GiB)",
                every: "时间线的间隔 K",
                policies: "在策略预算下对比的策略",
                run_btn: "运行",
                **{s.csv: ui.CSV_ZH for s in (s1, s2, s3, s4, s5)},
            },
            tr=TR,
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
