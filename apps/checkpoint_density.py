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

from apps import ui
from apps.figures.checkpoint_density import (
    NAME,
    fig_hit_rates,
    fig_pareto,
    fig_policies,
    fig_timeline,
    fig_tradeoff,
)
from apps.text.checkpoint_density import EN, TR, ZH, summary_markdown
from apps.ui import guard, i18n
from kda_core import workloads as wl
from kda_core.studies import density as ds

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


def load_workload(label: str) -> wl.Trace:
    """The trace behind a workload label (loading and slicing live in the study)."""
    kind, arg = WORKLOADS[label]
    return ds.load_workload(kind, arg, HEAD_REQUESTS)


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


def _controls() -> tuple:
    """The left column: the inputs, the Run button and the session's runs."""
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
        policy_budget = gr.Number(8, label="policy budget (GiB)", elem_id=f"{NAME}-policy-budget")
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
    return workload, intervals, budgets, policies, run_btn, hist_md, policy_budget, every


def build() -> gr.Blocks:
    with gr.Blocks(title="Checkpoint density · KDA State Lab") as demo:
        lang = ui.header(NAME, "Checkpoint density · 检查点密度", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=290):
                workload, intervals, budgets, policies, run_btn, hist_md, policy_budget, every = (
                    _controls()
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
