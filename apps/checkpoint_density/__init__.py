"""checkpoint_density: how often to checkpoint a KDA state, on a real trace or a synthetic one.

The page (layout, checks, events); its figures are ``figures``, its tables ``tables``, its
panels ``swa`` (+ ``swa_view``) and ``apps.panels.trace_hits``; every word is in
``words.checkpoint_density`` (the page's catalog adds the trace panel's).

Draws ``kda_core.studies.density``: the interval sweep (peak state memory ~1/K, replay per hit,
mean TTFT, the optimum per budget) with the study's analytic curves over the simulated points
(one analytic replay curve, the same as plots/plot_checkpoint_density.py, and the study's note on
why simulated replay stays flat on the conversation trace; the title says "replay ~K" only if the
simulated data shows it: ``words.phrases.headline``), token vs state hit rate against K and
accumulated over the trace, the Pareto frontier of memory vs state hit, and the checkpoint
policies side by side at one budget.

Default (renders on load within about a second): the first 1,000 requests of the bundled
Mooncake conversation trace, 5 intervals x 2 budgets. The full trace (12,031 requests) takes
about a minute, with a progress bar. Simulations are memoised by the study, so a repeated run
is instant.

Main action: ``checkpoint_density_run``. The runs of a session are listed from ``gr.State``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.checkpoint_density.figures import (
    NAME,
    fig_hit_rates,
    fig_pareto,
    fig_policies,
    fig_timeline,
    fig_tradeoff,
)
from apps.checkpoint_density.swa import swa_panel
from apps.checkpoint_density.tables import runs_markdown, summary_markdown
from apps.panels.trace_hits import hits_panel
from apps.ui import guard
from apps.ui.catalog import Catalog, UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import workloads as wl
from kda_core.studies import density as ds
from words import checkpoint_density as words
from words.catalog import T as Lang
from words.trace_hits import HITS

MSG = Catalog(NAME, {}, words.MSG, HITS)  # the page's words: the app's and the trace panel's

HEAD_REQUESTS = 1000
WORKLOADS: dict[str, tuple[str, str, str]] = {  # label -> (kind, argument, message key)
    f"conversation trace (first {HEAD_REQUESTS:,} requests)": ("head", "conversation", "wl_head"),
    "conversation trace (all 12,031 requests, ~1 min)": ("bundled", "conversation", "wl_all"),
    "Mooncake synthetic trace": ("bundled", "synthetic", "wl_synthetic"),
    "multi-turn chat (synthetic)": ("generated", "chat", "wl_chat"),
    "agentic sessions (synthetic)": ("generated", "agentic", "wl_agentic"),
    "one-shot documents (synthetic)": ("generated", "documents", "wl_documents"),
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
    kind, arg, _ = WORKLOADS[label]
    return ds.load_workload(kind, arg, HEAD_REQUESTS)


def _workload_name(label: str) -> object:
    return MSG(WORKLOADS[label][2], n=HEAD_REQUESTS)


def _intervals(text: str, block: int) -> tuple[int, ...]:
    parts = [p.strip() for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_INTERVALS:
        raise fail("e_intervals", MSG, n=MAX_INTERVALS, got=ui.clip_text(text))
    out = []
    for p in parts:
        k = ui.check_int(MSG("v_interval"), p, block, 65_536)
        if k % block:
            raise fail("e_multiple", MSG, b=block, k=k)
        out.append(k)
    return tuple(sorted(set(out)))


def _budgets(text: str) -> tuple[float | None, ...]:
    parts = [p.strip() for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= MAX_BUDGETS:
        raise fail("e_budgets", MSG, n=MAX_BUDGETS, got=ui.clip_text(text))
    out: list[float | None] = []
    for p in parts:
        if p.lower() in ("unlimited", "none", "inf", "不限"):
            out.append(None)
        else:
            out.append(ui.check_float(MSG("v_budget"), p, 0.5, 1024))
    return tuple(out)


def _check_policies(policies: object) -> list:
    chosen = list(policies or ()) if isinstance(policies, (list, tuple)) else []
    if not chosen or any(p not in POLICY_LABELS for p in chosen):
        names = tuple(MSG(f"pol_{p}") for p in POLICY_LABELS)  # as the page shows them
        raise fail("e_policies", MSG, n=len(names), all=names, got=ui.clip_text(policies))
    return chosen


def compute_run(
    workload: str = DEFAULT_WORKLOAD,
    intervals: str = DEFAULT_INTERVALS,
    budgets: str = DEFAULT_BUDGETS,
    policy_budget: float = 8.0,
    timeline_every: float = 4096,
    policies: list | tuple = POLICY_LABELS,
    history: list | None = None,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
) -> dict:
    workload = ui.check_choice(MSG("v_workload"), workload, tuple(WORKLOADS))
    tr = load_workload(workload)
    ks = _intervals(intervals, tr.block_size)
    bs = _budgets(budgets)
    pb = ui.check_float(MSG("v_policy_budget"), policy_budget, 0.5, 1024)
    every = _intervals(str(timeline_every), tr.block_size)[0]
    picked = set(_check_policies(policies))
    chosen = [p for p in ds.DEFAULT_POLICIES if p[0] in picked]

    def part(lo: float, hi: float):
        def report(f: float, msg: str) -> None:
            progress(lo + (hi - lo) * f, desc=MSG("progress_sim", what=msg).render(language))

        return report

    sweep = ds.density_sweep(tr, ks, bs, progress=part(0.0, 0.6))
    pols = ds.policies_at_budget(tr, pb, chosen, progress=part(0.6, 0.95))
    progress(0.96, desc=MSG("progress_hits").render(language))
    tl = ds.hit_timeline(tr, "interval", {"every": every}, budget_gib=pb)
    hist = list(history or [])
    best = [
        (lab, int(sweep.intervals[int(i)])) for lab, i in zip(sweep.budget_labels, sweep.optimum)
    ]
    hist.append([len(hist) + 1, sweep.trace_name, len(ks), best])
    view = {"sweep": sweep, "n": len(tr), "pols": pols, "tl": tl, "every": every, "pb": pb}
    return {**view, "history": hist[-MAX_HISTORY:]}


def draw_run(v: dict, t: Lang) -> tuple:
    """The summary, five (figure, csv) pairs, the runs table, the history and the
    stale-results note (hidden again)."""
    s = v["sweep"]
    figs = [
        fig_tradeoff(s, t),
        fig_hit_rates(s, t),
        fig_timeline(v["tl"], v["every"], v["pb"], t),
        fig_pareto(s, t),
        fig_policies(v["pols"], t),
    ]
    return (
        summary_markdown(s, v["n"], t),
        *[x for pair in figs for x in pair],
        runs_markdown(v["history"], t),
        v["history"],
        gr.update(value="", visible=False),  # the results are the workload's again
    )


run = rendered(compute_run, draw_run, MSG)


def stale_note(workload: str, language: str = "English") -> dict:
    """The workload changed: the figures still show the previous one until Run."""
    name = _workload_name(workload) if workload in WORKLOADS else workload
    return gr.update(value=MSG("stale", w=name).render(language), visible=True)


def _cross_intervals(workload: str, intervals: str, *rest: object) -> tuple[int, object] | None:
    """Intervals (input 1) and the timeline's K (input 4) must be multiples of the workload's
    block size (known after loading it)."""
    every = rest[2]
    block = load_workload(workload).block_size
    for i, text in ((1, intervals), (4, str(every))):
        try:
            _intervals(text, block)
        except UserError as e:
            return i, e.msg
    return None


def _controls(page: Page) -> tuple:
    """The left column: the inputs, the Run button and the session's runs."""
    L = page.label
    workload = page.choices(
        L(
            gr.Dropdown(list(WORKLOADS), value=DEFAULT_WORKLOAD, elem_id=f"{NAME}-workload"),
            "f_workload",
        ),
        [(_workload_name(w), w) for w in WORKLOADS],
    )
    intervals = L(gr.Textbox(DEFAULT_INTERVALS, elem_id=f"{NAME}-intervals"), "f_intervals")
    budgets = L(gr.Textbox(DEFAULT_BUDGETS, elem_id=f"{NAME}-budgets"), "f_budgets")
    with gr.Row():
        policy_budget = L(gr.Number(8, elem_id=f"{NAME}-policy-budget"), "f_policy_budget")
        every = L(gr.Number(4096, step=1), "f_every")
    pols = gr.CheckboxGroup(
        list(POLICY_LABELS), value=list(POLICY_LABELS), elem_id=f"{NAME}-policies-choice"
    )
    policies = page.choices(L(pols, "f_policies"), [(f"pol_{p}", p) for p in POLICY_LABELS])
    run_btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
    hist_md = gr.Markdown(
        label="Runs in this session", elem_id=f"{NAME}-history", elem_classes=["kda-metrics"]
    )
    return workload, intervals, budgets, policies, run_btn, hist_md, policy_budget, every


def build() -> gr.Blocks:
    with gr.Blocks(title="Checkpoint density · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=290):
                workload, intervals, budgets, policies, run_btn, hist_md, policy_budget, every = (
                    _controls(page)
                )
            with gr.Column(scale=2):
                stale = gr.Markdown(visible=False, label="Stale results", elem_id=f"{NAME}-stale")
                summary = gr.Markdown(
                    label="Optimum per budget",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
                slots = [
                    page.figure_slot(f"{NAME}-{k}", f"n_{k}")
                    for k in ("tradeoff", "hits", "timeline", "pareto", "policies")
                ]
        inputs = [workload, intervals, budgets, policy_budget, every, policies, history, page.radio]
        outputs = [summary, *(o for s in slots for o in s.outputs), hist_md, history, stale]
        run_fn, run_out = page.event(compute_run, draw_run, outputs)
        checks = guard.validator(
            lambda v: ui.check_choice(MSG("v_workload"), v, tuple(WORKLOADS)),
            None,  # intervals: checked against the workload's block size (cross)
            _budgets,
            lambda v: ui.check_float(MSG("v_policy_budget"), v, 0.5, 1024),
            None,
            _check_policies,
            cross=_cross_intervals,
        )
        run_btn.click(run_fn, inputs, run_out, api_name=f"{NAME}_run", validator=checks)
        demo.load(run_fn, inputs, run_out, api_visibility="private")
        workload.input(stale_note, [workload, page.radio], stale, api_visibility="private")
        swa_panel(page, demo)
        hits_panel(page, demo, NAME)
        page.finish()
    return demo


__all__ = ["MSG", "build", "load_workload", "run", "stale_note"]
