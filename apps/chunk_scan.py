"""chunk_scan: the chunkwise form equals the token recurrence, and why segment maps compose.

Draws ``kda_core.studies.chunk_scan``: chunked vs recurrent errors over T x chunk size, what
chunking buys (sequential steps vs FLOPs at K3 scale), segment maps composed in different
groupings (same map) and orders (different map), the map of a head in the true order vs with
the last two segments swapped, and, on demand, measured speed.

Main actions: ``chunk_scan_run`` (inputs -> five figures + CSVs) and ``chunk_scan_time``
(measures both forms; every measurement of the session is kept in ``gr.State`` and overlaid).
"""

from __future__ import annotations

from typing import NamedTuple

import gradio as gr

from apps import ui
from apps.figures.chunk_scan import (
    NAME,
    fig_agreement,
    fig_cost,
    fig_groupings,
    fig_maps,
    fig_orders,
    fig_timing,
)
from apps.text.chunk_scan import EN, TR, ZH, summary_markdown
from apps.ui import guard, i18n
from kda_core.studies import chunk_scan as cs

SOURCES = ("random inputs", "tiny model on text")
DEFAULT_TEXT = (
    "KDA 为每个请求保存固定大小的状态。A token prefix hit is not a state hit: "
    "the request resumes at a checkpoint and replays the tokens up to the match."
)
MAX_TIMINGS = 6


def _lengths(text: str) -> tuple[int, ...]:
    parts = [p for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 2 <= len(parts) <= cs.MAX_SEGMENTS:
        raise gr.Error(
            f"segment lengths: give 2 to {cs.MAX_SEGMENTS} comma-separated integers "
            f"in [1, 256], got {ui.clip_text(text)}"
        )
    return tuple(ui.check_int("segment length", p.strip(), 1, 256) for p in parts)


def _cross_run(source: str, text: object, _seed: object, _c: object, lengths: str,
               head: object, *_: object) -> tuple[int, str] | None:  # fmt: skip
    """The checks that need two inputs (the same as ``run``'s)."""
    lens = _lengths(lengths)
    if source == SOURCES[1]:
        n = len(str(text or "").encode("utf-8"))
        if not 3 <= n <= 2048:
            return 1, f"text must be 3 to 2048 UTF-8 bytes long, got {n}"
        if sum(lens) > n:
            return 4, f"segment lengths must sum to at most the text's {n} bytes, got {sum(lens)}"
    try:
        ui.check_int("head", head, 0, 3 if source == SOURCES[1] else 1)
    except gr.Error as e:
        return 5, guard.message_of(e)
    return None


@ui.study_errors
def run(
    source: str = SOURCES[0],
    text: str = DEFAULT_TEXT,
    seed: float = 0,
    chunk_size: float = 64,
    lengths: str = "16, 16, 16",
    head: float = 0,
):
    """Returns the summary and five (figure, csv) pairs."""
    source = ui.check_choice("source", source, SOURCES)
    sd = ui.check_int("seed", seed, 0, 2**31 - 1)
    C = ui.check_int("chunk size", chunk_size, 1, 256)
    lens = _lengths(lengths)
    if source == SOURCES[1]:
        text = str(text or "")
        n = len(text.encode("utf-8"))
        if not 3 <= n <= 2048:
            raise gr.Error(f"text must be 3 to 2048 UTF-8 bytes long, got {n}")
        if sum(lens) > n:
            raise gr.Error(
                f"segment lengths must sum to at most the text's {n} bytes, got {sum(lens)}"
            )
        hd = ui.check_int("head", head, 0, 3)
        study = cs.chunk_scan_study(text=text, chunk_size=C)
        comp = cs.composition(lengths=lens, text=text, head=hd)
    else:
        hd = ui.check_int("head", head, 0, 1)
        study = cs.chunk_scan_study(seed=sd, chunk_size=C)
        comp = cs.composition(lengths=lens, seed=sd, head=hd)
    figs = [
        fig_agreement(study.agreement, C),
        fig_cost(study.cost, C),
        fig_groupings(comp),
        fig_orders(comp),
        fig_maps(comp),
    ]
    return (summary_markdown(study, comp), *[x for pair in figs for x in pair])


@ui.study_errors
def measure(
    chunk_size: float = 64,
    repeats: float = 3,
    runs: list | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
):
    """Time both forms (best of ``repeats``); the session keeps the last MAX_TIMINGS runs."""
    C = ui.check_int("chunk size", chunk_size, 1, 256)
    r = ui.check_int("repeats", repeats, 1, 5)
    progress(0.1, desc="timing recurrent and chunked forms")
    t = cs.timing(chunk_sizes=tuple(sorted({16, 64, C})), repeats=r)
    kept = (list(runs or []) + [t])[-MAX_TIMINGS:]
    fig, csv = fig_timing(kept)
    return fig, csv, kept


class Controls(NamedTuple):
    """The left column's components (`_controls`), by name."""

    source: gr.Radio
    text: gr.Textbox
    run_btn: gr.Button
    summary: gr.Markdown
    speed_md: gr.Markdown
    repeats: gr.Number
    time_btn: gr.Button
    seed: gr.Number
    chunk: gr.Number
    lengths: gr.Textbox
    head: gr.Number


def _controls() -> Controls:
    """The left column: the inputs, Run, the summary and the speed measurement."""
    source = gr.Radio(list(SOURCES), value=SOURCES[0], label="inputs", elem_id=f"{NAME}-source")
    text = gr.Textbox(
        DEFAULT_TEXT,
        lines=3,
        label="text (tiny model, 3-2048 bytes)",
        elem_id=f"{NAME}-text",
    )
    with gr.Row():
        seed = gr.Number(0, label="seed", step=1)
        chunk = gr.Number(64, label="chunk size C (1-256)", step=1, elem_id=f"{NAME}-chunk")
    with gr.Row():
        lengths = gr.Textbox(
            "16, 16, 16",
            label="segment lengths (2-5 values)",
            elem_id=f"{NAME}-lengths",
        )
        head = gr.Number(0, label="head", step=1)
    run_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
    summary = gr.Markdown(label="Summary", elem_id=f"{NAME}-summary")
    speed_md = gr.Markdown("**Speed** (wall clock on this machine)")
    repeats = gr.Number(3, label="repeats (1-5)", step=1)
    time_btn = gr.Button("Measure speed", elem_id=f"{NAME}-time")
    return Controls(
        source=source,
        text=text,
        run_btn=run_btn,
        summary=summary,
        speed_md=speed_md,
        repeats=repeats,
        time_btn=time_btn,
        seed=seed,
        chunk=chunk,
        lengths=lengths,
        head=head,
    )


def build() -> gr.Blocks:
    with gr.Blocks(title="Chunk scan · KDA State Lab") as demo:
        lang = ui.header(NAME, "Chunk scan · 分块扫描", EN, ZH)
        timings = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                ctl = _controls()
            with gr.Column(scale=2):
                s1 = ui.figure_slot(f"{NAME}-agreement", "Chunked vs recurrent")
                s2 = ui.figure_slot(f"{NAME}-cost", "What chunking buys")
                s3 = ui.figure_slot(f"{NAME}-groupings", "Groupings")
                s4 = ui.figure_slot(f"{NAME}-orders", "Orders")
                s5 = ui.figure_slot(f"{NAME}-maps", "Transition matrices")
                no_timing = ui.empty_figure("Measured speed", "press “Measure speed”")
                s6 = ui.figure_slot(
                    f"{NAME}-timing",
                    "Measured speed",
                    no_timing,
                    csv_visible=False,  # no dead download button before a measurement
                )
        inputs = [ctl.source, ctl.text, ctl.seed, ctl.chunk, ctl.lengths, ctl.head]
        outputs = [ctl.summary, *s1.outputs, *s2.outputs, *s3.outputs, *s4.outputs, *s5.outputs]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, outputs)
        run_in = [*inputs, lang.radio]
        run_v = guard.validator(
            lambda v: ui.check_choice("source", v, SOURCES),
            None,
            lambda v: ui.check_int("seed", v, 0, 2**31 - 1),
            lambda v: ui.check_int("chunk size", v, 1, 256),
            _lengths,
            None,
            cross=_cross_run,
        )
        ctl.run_btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        time_fn, time_out = loc.wrap(measure, [*s6.outputs, timings])
        ctl.time_btn.click(
            time_fn,
            [ctl.chunk, ctl.repeats, timings, lang.radio],
            time_out,
            api_name=f"{NAME}_time",
            validator=guard.validator(
                lambda v: ui.check_int("chunk size", v, 1, 256),
                lambda v: ui.check_int("repeats", v, 1, 5),
            ),
        ).then(lambda: gr.update(visible=True), None, s6.csv, api_visibility="private")
        loc.initial(s6.plot, no_timing)
        loc.finish()
        lang.labels(
            {
                ctl.source: "输入",
                ctl.text: "文本（小模型，3-2048 字节）",
                ctl.chunk: "块大小 C (1-256)",
                ctl.lengths: "段长度（2-5 个值）",
                ctl.head: "头",
                ctl.seed: "随机种子",
                ctl.repeats: "重复次数 (1-5)",
                ctl.run_btn: "运行",
                ctl.time_btn: "测量速度",
                ctl.speed_md: "**速度**（本机实测耗时）",
                **{s.csv: ui.CSV_ZH for s in (s1, s2, s3, s4, s5, s6)},
            },
            tr=TR,
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
