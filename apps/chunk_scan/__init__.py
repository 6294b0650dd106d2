"""chunk_scan: the chunkwise form equals the token recurrence, and why segment maps compose.

Draws ``kda_core.studies.chunk_scan``: chunked vs recurrent errors over T x chunk size, what
chunking buys (sequential steps vs FLOPs at K3 scale), segment maps composed in different
groupings (same map) and orders (different map), the map of a head in the true order vs with
the last two segments swapped, and, on demand, measured speed.

Main actions: ``chunk_scan_run`` (inputs -> five figures + CSVs) and ``chunk_scan_time``
(measures both forms; every measurement of the session is kept in ``gr.State`` and overlaid).
The page (layout, checks, events); its figures are ``figures``, its summary ``tables``; every
word comes from ``words.chunk_scan.MSG`` in the page's language.
"""

from __future__ import annotations

from typing import NamedTuple

import gradio as gr

from apps import ui
from apps.chunk_scan.figures import (
    NAME,
    fig_agreement,
    fig_cost,
    fig_groupings,
    fig_maps,
    fig_orders,
    fig_timing,
)
from apps.chunk_scan.tables import summary_markdown
from apps.ui import guard
from apps.ui.catalog import T, UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import chunk_scan as cs
from words.chunk_scan import MSG

SOURCES = ("random inputs", "tiny model on text")
DEFAULT_TEXT = (
    "KDA 为每个请求保存固定大小的状态。A token prefix hit is not a state hit: "
    "the request resumes at a checkpoint and replays the tokens up to the match."
)
MAX_TIMINGS = 6


def _lengths(text: str) -> tuple[int, ...]:
    parts = [p for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 2 <= len(parts) <= cs.MAX_SEGMENTS:
        raise fail("e_lengths", MSG, n=cs.MAX_SEGMENTS, got=ui.clip_text(text))
    return tuple(ui.check_int(MSG("v_length"), p.strip(), 1, 256) for p in parts)


def _text_checks(source: str, text: object, lens: tuple[int, ...]) -> tuple[int, object] | None:
    """(input index, error) of the checks that need the source and the text, or None."""
    if source != SOURCES[1]:
        return None
    n = len(str(text or "").encode("utf-8"))
    if not 3 <= n <= 2048:
        return 1, fail("e_text", MSG, n=n)
    if sum(lens) > n:
        return 4, fail("e_sum", MSG, n=n, got=sum(lens))
    return None


def _cross_run(source: str, text: object, *rest: object) -> tuple[int, object] | None:
    """The checks that need two inputs (the same as ``run``'s): the text against the source
    and the lengths, the head against the source."""
    lengths, head = rest[2], rest[3]
    bad = _text_checks(source, text, _lengths(lengths))
    if bad is not None:
        return bad[0], bad[1].msg  # type: ignore[attr-defined]
    try:
        ui.check_int(MSG("v_head"), head, 0, 3 if source == SOURCES[1] else 1)
    except UserError as e:
        return 5, e.msg
    return None


def compute_run(
    source: str = SOURCES[0],
    text: str = DEFAULT_TEXT,
    seed: float = 0,
    chunk_size: float = 64,
    lengths: str = "16, 16, 16",
    head: float = 0,
) -> tuple[cs.ChunkScanStudy, cs.Composition]:
    source = ui.check_choice(MSG("v_source"), source, SOURCES)
    sd = ui.check_int(MSG("v_seed"), seed, 0, 2**31 - 1)
    C = ui.check_int(MSG("v_chunk"), chunk_size, 1, 256)
    lens = _lengths(lengths)
    bad = _text_checks(source, text, lens)
    if bad is not None:
        raise bad[1]  # type: ignore[misc]
    if source == SOURCES[1]:
        hd = ui.check_int(MSG("v_head"), head, 0, 3)
        study = cs.chunk_scan_study(text=str(text), chunk_size=C)
        return study, cs.composition(lengths=lens, text=str(text), head=hd)
    hd = ui.check_int(MSG("v_head"), head, 0, 1)
    study = cs.chunk_scan_study(seed=sd, chunk_size=C)
    return study, cs.composition(lengths=lens, seed=sd, head=hd)


def draw_run(view: tuple[cs.ChunkScanStudy, cs.Composition], t: T) -> tuple:
    """The summary and five (figure, csv) pairs."""
    study, comp = view
    figs = [
        fig_agreement(study.agreement, study.chunk_size, t),
        fig_cost(study.cost, study.chunk_size, t),
        fig_groupings(comp, t),
        fig_orders(comp, t),
        fig_maps(comp, t),
    ]
    return (summary_markdown(study, comp, t), *[x for pair in figs for x in pair])


run = rendered(compute_run, draw_run, MSG)


def compute_measure(
    chunk_size: float = 64,
    repeats: float = 3,
    runs: list | None = None,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
) -> list[cs.Timing]:
    """Time both forms (best of ``repeats``); the session keeps the last MAX_TIMINGS runs."""
    C = ui.check_int(MSG("v_chunk"), chunk_size, 1, 256)
    r = ui.check_int(MSG("v_repeats"), repeats, 1, 5)
    progress(0.1, desc=MSG("progress_time").render(language))
    t = cs.timing(chunk_sizes=tuple(sorted({16, 64, C})), repeats=r)
    return (list(runs or []) + [t])[-MAX_TIMINGS:]


def draw_measure(kept: list[cs.Timing], t: T) -> tuple:
    fig, csv = fig_timing(kept, t)
    return fig, csv, kept


measure = rendered(compute_measure, draw_measure, MSG)


class Controls(NamedTuple):
    """The left column's components (`_controls`), by name."""

    source: gr.Radio
    text: gr.Textbox
    run_btn: gr.Button
    summary: gr.Markdown
    repeats: gr.Number
    time_btn: gr.Button
    seed: gr.Number
    chunk: gr.Number
    lengths: gr.Textbox
    head: gr.Number


def _controls(page: Page) -> Controls:
    """The left column: the inputs, Run, the summary and the speed measurement."""
    L = page.label
    source = page.choices(
        L(gr.Radio(list(SOURCES), value=SOURCES[0], elem_id=f"{NAME}-source"), "f_source"),
        [("o_random", SOURCES[0]), ("o_text", SOURCES[1])],
    )
    text = L(gr.Textbox(DEFAULT_TEXT, lines=3, elem_id=f"{NAME}-text"), "f_text")
    with gr.Row():
        seed = L(gr.Number(0, step=1), "f_seed")
        chunk = L(gr.Number(64, step=1, elem_id=f"{NAME}-chunk"), "f_chunk")
    with gr.Row():
        lengths = L(gr.Textbox("16, 16, 16", elem_id=f"{NAME}-lengths"), "f_lengths")
        head = L(gr.Number(0, step=1), "f_head")
    run_btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
    summary = gr.Markdown(label="Summary", elem_id=f"{NAME}-summary")  # named in the API
    L(gr.Markdown(), "md_speed")
    repeats = L(gr.Number(3, step=1), "f_repeats")
    time_btn = L(gr.Button(elem_id=f"{NAME}-time"), "b_time")
    return Controls(source, text, run_btn, summary, repeats, time_btn, seed, chunk, lengths, head)


def build() -> gr.Blocks:
    with gr.Blocks(title="Chunk scan · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        timings = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                ctl = _controls(page)
            with gr.Column(scale=2):
                slots = [
                    page.figure_slot(f"{NAME}-{k}", f"n_{k}")
                    for k in ("agreement", "cost", "groupings", "orders", "maps")
                ]
                s6 = page.figure_slot(f"{NAME}-timing", "n_timing", csv=False)
        page.initial(s6.plot, lambda t: ui.empty_figure(t("t_no_timing"), t("no_timing")))
        inputs = [ctl.source, ctl.text, ctl.seed, ctl.chunk, ctl.lengths, ctl.head, page.radio]
        run_fn, run_out = page.event(
            compute_run, draw_run, [ctl.summary, *(o for s in slots for o in s.outputs)]
        )
        run_v = guard.validator(
            lambda v: ui.check_choice(MSG("v_source"), v, SOURCES),
            None,
            lambda v: ui.check_int(MSG("v_seed"), v, 0, 2**31 - 1),
            lambda v: ui.check_int(MSG("v_chunk"), v, 1, 256),
            _lengths,
            None,
            cross=_cross_run,
        )
        ctl.run_btn.click(run_fn, inputs, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, inputs, run_out, api_visibility="private")
        time_fn, time_out = page.event(compute_measure, draw_measure, [*s6.outputs, timings])
        ctl.time_btn.click(
            time_fn,
            [ctl.chunk, ctl.repeats, timings, page.radio],
            time_out,
            api_name=f"{NAME}_time",
            validator=guard.validator(
                lambda v: ui.check_int(MSG("v_chunk"), v, 1, 256),
                lambda v: ui.check_int(MSG("v_repeats"), v, 1, 5),
            ),
        ).then(lambda: gr.update(visible=True), None, s6.csv, api_visibility="private")
        page.finish()
    return demo


__all__ = ["MSG", "build", "fig_orders", "measure", "run"]
