"""unified_memory: one byte buffer, MLA KV from one end, KDA state slots from the other.

Draws ``kda_core.studies.memory.compare`` (a unified two-ended pool vs static partitions over
a workload whose mix shifts from chat to long-context): the buffer at any step (animated with
``gr.Timer``), both frontiers over time with the moments the ends meet and compaction moves,
running / queued requests over time, and mean concurrency vs the static ratio.

Main actions: ``unified_memory_run`` (workload + pool knobs -> every figure; the comparison is
kept in ``gr.State`` per session) and ``unified_memory_step`` (the buffer at one step). The page
(layout, checks, events); its figures are ``figures``, its table ``tables``, its panel
``calculator`` (+ ``calculator_view``); every word is in ``words.unified_memory``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.ui import guard, player
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from apps.unified_memory.calculator import calculator_panel
from apps.unified_memory.figures import (
    NAME,
    buffer_figure,
    frontier_figure,
    pool_color,
    ratio_figure,
    running_figure,
)
from apps.unified_memory.tables import summary_markdown
from kda_core.studies import memory as mem
from words.catalog import T as Lang
from words.unified_memory import MSG

MODES = ("eager", "lazy")
DEFAULT_RATIOS = "0.1, 0.3, 1, 3"
FRAMES = 60  # a Play pass shows about this many steps


def _parse_ratios(text: str) -> list[float]:
    parts = [x for x in str(text or "").replace(";", ",").split(",") if x.strip()]
    if not 1 <= len(parts) <= 8:
        raise fail("e_ratios", MSG, got=ui.clip_text(text))
    return sorted({ui.check_float(MSG("v_ratio"), x.strip(), 0.01, 100) for x in parts})


def _cross_counts(n_chat: object, n_long: object, *_: object) -> tuple[int, object] | None:
    if int(float(n_chat)) + int(float(n_long)) == 0:  # type: ignore[arg-type]
        return 0, MSG("e_counts")
    return None


def _cross_step(step: object, session: object, *_: object) -> tuple[int, object] | None:
    if not session:
        return 0, MSG("e_no_run")
    last = max(session["cmp"].unified.makespan - 1, 0)  # type: ignore[index]
    try:
        ui.check_int(MSG("v_step"), step, 0, last)
    except ui.UserError as e:
        return 0, e.msg
    return None


def compute_run(
    n_chat: float = 300,
    n_long: float = 15,
    chat_rate: float = 15.0,
    long_rate: float = 0.6,
    total_gib: float = 28.0,
    mode: str = "eager",
    ratios: str = DEFAULT_RATIOS,
    seed: float = 0,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
) -> dict:
    """Replay the workload; the session: the comparison, the state slot size, the peak step."""
    nc = ui.check_int(MSG("v_nchat"), n_chat, 0, 3000)
    nl = ui.check_int(MSG("v_nlong"), n_long, 0, 150)
    if nc + nl == 0:
        raise fail("e_counts", MSG)
    cr = ui.check_float(MSG("v_chat_rate"), chat_rate, 0.1, 100)
    lr = ui.check_float(MSG("v_long_rate"), long_rate, 0.01, 10)
    gib = ui.check_float(MSG("v_total"), total_gib, 4, 192)
    mode = ui.check_choice(MSG("v_mode"), mode, MODES)
    grid = _parse_ratios(ratios)
    sd = ui.check_int(MSG("v_seed"), seed, 0, 2**31 - 1)
    progress(0.05, desc=MSG("progress_build").render(language))
    wl = mem.shifting_mix(n_chat=nc, n_long=nl, seed=sd, chat_rate=cr, long_rate=lr)
    cfg = mem.k3_config(total_gib=gib)
    progress(0.2, desc=MSG("progress_replay", n=len(grid) + 2).render(language))
    c = mem.compare(wl, cfg, ratios=grid, mode=mode)
    return {"cmp": c, "slot": cfg.state_slot_bytes, "step": mem.busiest_step(c)}


def draw_run(session: dict, t: Lang) -> tuple:
    """(summary, 4 figures + CSVs, step slider, session state); opens on the busiest step."""
    c, peak = session["cmp"], session["step"]
    f0, c0 = buffer_figure(c, peak, session["slot"], t)
    f1, c1 = frontier_figure(c, t)
    f2, c2 = running_figure(c, t)
    f3, c3 = ratio_figure(c, t)
    slider = gr.update(maximum=max(c.unified.makespan - 1, 1), value=peak)
    return summary_markdown(c, t), f0, c0, f1, c1, f2, c2, f3, c3, slider, session


run = rendered(compute_run, draw_run, MSG)


def compute_step(step: float, session: dict | None) -> tuple[dict, int]:
    """The buffer at ``step`` of this session's replay (``unified_memory_step``)."""
    if not session:
        raise fail("e_no_run", MSG)
    c = session["cmp"]
    return session, ui.check_int(MSG("v_step"), step, 0, max(c.unified.makespan - 1, 0))


def draw_step(view: tuple[dict, int], t: Lang) -> tuple:
    session, s = view
    return buffer_figure(session["cmp"], s, session["slot"], t)


show_step = rendered(compute_step, draw_step, MSG)


def compute_tick(step: float, session: dict | None) -> tuple[dict | None, int, bool]:
    """Timer tick: advance about 1/FRAMES of the makespan (done at the end)."""
    if not session:
        return None, 0, True
    last = max(session["cmp"].unified.makespan - 1, 0)
    s = min(int(step or 0) + max(last // FRAMES, 1), last)
    return session, s, s >= last


def draw_tick(view: tuple[dict | None, int, bool], t: Lang) -> tuple:
    session, s, done = view
    if session is None:
        return gr.update(), gr.update(), gr.update(), player.stopped()
    fig, csv = buffer_figure(session["cmp"], s, session["slot"], t)
    return s, fig, csv, player.after_tick(done)


tick = rendered(compute_tick, draw_tick, MSG)


def _controls(page: Page) -> tuple:
    """The left column: the buffer, the pools compared, the workload mix and Run."""
    L = page.label
    with gr.Row():
        n_chat = L(gr.Number(300, step=1, elem_id=f"{NAME}-nchat"), "f_nchat")
        n_long = L(gr.Number(15, step=1), "f_nlong")
    with gr.Row():
        chat_rate = L(gr.Number(15), "f_chat_rate")
        long_rate = L(gr.Number(0.6), "f_long_rate")
    total = L(gr.Number(28), "f_total")
    mode = page.choices(
        L(gr.Radio(list(MODES), value="eager"), "f_mode"), [(f"mode_{m}", m) for m in MODES]
    )
    ratios = L(gr.Textbox(DEFAULT_RATIOS, elem_id=f"{NAME}-ratios"), "f_ratios")
    seed = L(gr.Number(0, step=1), "f_seed")
    go_btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_run")
    return total, mode, ratios, seed, go_btn, n_chat, n_long, chat_rate, long_rate


def _checks() -> list:
    return [
        lambda v: ui.check_int(MSG("v_nchat"), v, 0, 3000),
        lambda v: ui.check_int(MSG("v_nlong"), v, 0, 150),
        lambda v: ui.check_float(MSG("v_chat_rate"), v, 0.1, 100),
        lambda v: ui.check_float(MSG("v_long_rate"), v, 0.01, 10),
        lambda v: ui.check_float(MSG("v_total"), v, 4, 192),
        lambda v: ui.check_choice(MSG("v_mode"), v, MODES),
        _parse_ratios,
        lambda v: ui.check_int(MSG("v_seed"), v, 0, 2**31 - 1),
    ]


def build() -> gr.Blocks:
    with gr.Blocks(title="Unified memory · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        session = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                total, mode, ratios, seed, go_btn, n_chat, n_long, chat_rate, long_rate = _controls(
                    page
                )
            with gr.Column(scale=2):
                summary = gr.Markdown(
                    label="Pool comparison", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"]
                )
                with gr.Row():
                    step = page.label(
                        gr.Slider(0, 100, value=0, step=1, elem_id=f"{NAME}-step"), "f_step"
                    )
                    play_btn = gr.Button(scale=0, min_width=90, elem_id=f"{NAME}-play")
                    play = page.label(play_btn, "b_play")
                    pause = page.label(gr.Button(scale=0, min_width=90), "b_pause")
                slots = (
                    ("buffer", "buffer"),
                    ("frontiers", "frontiers"),
                    ("running", "running"),
                    ("ratio-fig", "ratio"),
                )
                s0, s1, s2, s3 = (page.figure_slot(f"{NAME}-{k}", f"n_{n}") for k, n in slots)
        timer = gr.Timer(0.4, active=False)
        inputs = [n_chat, n_long, chat_rate, long_rate, total, mode, ratios, seed, page.radio]
        outputs = [summary, *s0.outputs, *s1.outputs, *s2.outputs, *s3.outputs, step, session]
        run_fn, run_out = page.event(compute_run, draw_run, outputs)
        run_v = guard.validator(*_checks(), cross=_cross_counts)
        go_btn.click(run_fn, inputs, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, inputs, run_out, api_visibility="private")
        step_fn, step_out = page.event(compute_step, draw_step, s0.outputs)
        step.release(
            step_fn,
            [step, session, page.radio],
            step_out,
            api_name=f"{NAME}_step",
            show_progress="hidden",
            validator=guard.validator(cross=_cross_step),
        )
        tick_fn, tick_out = page.event(compute_tick, draw_tick, [step, *s0.outputs, timer])
        player.wire(timer, play, pause, tick_fn, [step, session, page.radio], tick_out)
        calculator_panel(page, demo)
        page.finish()
    return demo


__all__ = [
    "MSG",
    "FRAMES",
    "build",
    "pool_color",
    "run",
    "show_step",
    "tick",
]  # what the tests read as app.<name>
