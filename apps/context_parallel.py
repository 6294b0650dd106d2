"""context_parallel: one long sequence split over P ranks, joined by an affine prefix scan.

Draws ``kda_core.studies.context_parallel``: the ranks' segments (and packed documents), the
scan's messages step by step, the state each rank receives next to the true one, the error of
every rank's outputs against a single rank, the bytes each rank sends against an MLA KV
all-gather of the same context, and the modelled speed-up over P from measured per-step costs.
The ranks run in this process (the plan and messages the gloo ranks run; no processes here).

Main action: ``context_parallel_run`` (inputs -> summary + five figures + CSVs). Every figure
follows the language switch (the switch re-renders them).
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.figures.context_parallel import (
    NAME,
    SCANS,
    SPEEDUP_T,
    fig_bytes,
    fig_exact,
    fig_speedup,
    fig_state,
    fig_steps,
)
from apps.text.context_parallel import EN, ZH, _t, summary_markdown
from apps.ui import guard
from kda_core.studies import context_parallel as cps

SCAN_CHOICES = [
    ("log-depth · 对数深度", "logdepth"),
    ("all-gather + fold · 全收集 + 折叠", "allgather"),
]
MAX_DOCS_TEXT = 200


def _docs(text: str, T: int) -> list[int] | None:
    text = str(text or "").strip()
    if not text:
        return None
    if len(text) > MAX_DOCS_TEXT:
        raise gr.Error(f"document lengths: at most {MAX_DOCS_TEXT} characters")
    parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= cps.MAX_DOCS:
        raise gr.Error(f"document lengths: give 1 to {cps.MAX_DOCS} comma-separated integers")
    lens = [ui.check_int("document length", p.strip(), 1, T) for p in parts]
    if sum(lens) != T:
        raise gr.Error(f"document lengths must sum to T = {T}, got {sum(lens)}")
    return lens


def _cross_run(T: float, P: float, scan: str, docs: str, *_: object) -> tuple[int, str] | None:
    """Checks that need two inputs: P <= T, and document lengths that sum to T."""
    t = int(T)
    if int(P) > t:
        return 1, f"ranks P must be in [1, {min(cps.MAX_P, t)}] (at most T), got {int(P)}"
    try:
        _docs(docs, t)
    except (gr.Error, ValueError) as e:
        return 3, guard.message_of(e)
    return None


@ui.study_errors
def run(T: float = 512, P: float = 4, scan: str = SCANS[0], docs: str = "", rank: float = 2,
        seed: float = 0, language: str = ui.LANGS[0]):  # fmt: skip
    """Returns the summary and five (figure, csv) pairs."""
    T = ui.check_int("T", T, 16, cps.MAX_T)
    P = ui.check_int("ranks P", P, 1, min(cps.MAX_P, T))
    scan = ui.check_choice("scan", scan, SCANS)
    # the last rank when P shrank below the chosen one (the title names the rank shown)
    r = min(ui.check_int("rank to inspect", rank, 0, cps.MAX_P - 1), P - 1)
    sd = ui.check_int("seed", seed, 0, 2**31 - 1)
    lang = ui.check_choice("language", language, ui.LANGS)
    d = cps.demo(T=T, P=P, scan=scan, docs=_docs(docs, T), seed=sd)
    models = {
        ctx: cps.cost_model(cps.MEASURED, T=ctx, P_values=(1, 2, 4, 8, 16, 32, 64))
        for ctx in SPEEDUP_T
    }
    mp = cps.cost_model(cps.MEASURED, T=T, P_values=(P,))
    t = _t(lang)
    figs = [fig_steps(d, t), fig_state(d, r, t), fig_exact(d, t), fig_bytes(d, mp, t),
            fig_speedup(models, t)]  # fmt: skip
    return (summary_markdown(d, sd, lang), *[x for pair in figs for x in pair])


def build() -> gr.Blocks:
    with gr.Blocks(title="Context parallel · KDA State Lab") as demo:
        lang = ui.header(NAME, "Context parallel · 上下文并行", EN, ZH)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                T = gr.Number(512, label=f"tokens T (16-{cps.MAX_T})", step=1, elem_id=f"{NAME}-T")
                P = gr.Number(4, label=f"ranks P (1-{cps.MAX_P})", step=1, elem_id=f"{NAME}-P")
                scan = gr.Radio(SCAN_CHOICES, value=SCANS[0], label="scan", elem_id=f"{NAME}-scan")
                docs = gr.Textbox(
                    "",
                    label="document lengths (empty: one document)",
                    placeholder="e.g. 100, 300, 112",
                    elem_id=f"{NAME}-docs",
                )
                with gr.Row():
                    rank = gr.Number(2, label="rank to inspect", step=1, elem_id=f"{NAME}-rank")
                    seed = gr.Number(0, label="seed", step=1)
                run_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
                summary = gr.Markdown(label="Context parallel summary", elem_id=f"{NAME}-summary")
            with gr.Column(scale=2):
                slots = [
                    ui.figure_slot(f"{NAME}-{k}", k)
                    for k in ("steps", "state", "exactness", "bytes", "speedup")
                ]
        inputs = [T, P, scan, docs, rank, seed, lang.radio]
        outputs = [summary] + [o for s in slots for o in s.outputs]
        run_v = guard.validator(
            lambda v: ui.check_int("T", v, 16, cps.MAX_T),
            lambda v: ui.check_int("ranks P", v, 1, cps.MAX_P),
            lambda v: ui.check_choice("scan", v, SCANS),
            None,
            lambda v: ui.check_int("rank to inspect", v, 0, cps.MAX_P - 1),
            lambda v: ui.check_int("seed", v, 0, 2**31 - 1),
            None,
            cross=_cross_run,
        )
        run_btn.click(run, inputs, outputs, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run, inputs, outputs, api_visibility="private")
        lang.radio.change(run, inputs, outputs, api_visibility="private")
        lang.labels(
            {
                T: f"token 数 T (16-{cps.MAX_T})",
                P: f"rank 数 P (1-{cps.MAX_P})",
                scan: "扫描方式",
                docs: "文档长度（留空：一个文档）",
                rank: "查看的 rank",
                seed: "随机种子",
                run_btn: "运行",
                **{s.csv: ui.CSV_ZH for s in slots},
            }
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
