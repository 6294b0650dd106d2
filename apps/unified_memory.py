"""unified_memory: one byte buffer, MLA KV from one end, KDA state slots from the other.

Draws ``kda_core.studies.memory.compare`` (a unified two-ended pool vs static partitions over
a workload whose mix shifts from chat to long-context): the buffer at any step (animated with
``gr.Timer``), both frontiers over time with the moments the ends meet and compaction moves,
running / queued requests over time, and mean concurrency vs the static ratio.

Main actions: ``unified_memory_run`` (workload + pool knobs -> every figure; the comparison is
kept in ``gr.State`` per session) and ``unified_memory_step`` (the buffer at one step).
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.figures.unified_memory import (
    NAME,
    buffer_figure,
    frontier_figure,
    pool_color,
    ratio_figure,
    running_figure,
)
from apps.text.unified_memory import EN, TR, ZH, summary_markdown
from apps.ui import guard, i18n, player
from kda_core.studies import memory as mem

MODES = ("eager", "lazy")
DEFAULT_RATIOS = "0.1, 0.3, 1, 3"
FRAMES = 60  # a Play pass shows about this many steps


def _parse_ratios(text: str) -> list[float]:
    parts = [x for x in str(text or "").replace(";", ",").split(",") if x.strip()]
    if not 1 <= len(parts) <= 8:
        raise gr.Error(
            f"static ratios: give 1 to 8 comma-separated numbers, got {ui.clip_text(text)}"
        )
    return sorted({ui.check_float("static ratio", x.strip(), 0.01, 100) for x in parts})


def _cross_counts(n_chat: object, n_long: object, *_: object) -> tuple[int, str] | None:
    if int(float(n_chat)) + int(float(n_long)) == 0:  # type: ignore[arg-type]
        return 0, "chat requests + long-context requests must be >= 1"
    return None


def _cross_step(step: object, session: object, *_: object) -> tuple[int, str] | None:
    if not session:
        return 0, "run a replay first (press Run)"
    last = max(session["cmp"].unified.makespan - 1, 0)  # type: ignore[index]
    try:
        ui.check_int("step", step, 0, last)
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


@ui.study_errors
def run(
    n_chat: float = 300,
    n_long: float = 15,
    chat_rate: float = 15.0,
    long_rate: float = 0.6,
    total_gib: float = 28.0,
    mode: str = "eager",
    ratios: str = DEFAULT_RATIOS,
    seed: float = 0,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
):
    """Replay the workload; returns (summary, 4 figures + CSVs, step slider, session state)."""
    nc = ui.check_int("chat requests", n_chat, 0, 3000)
    nl = ui.check_int("long-context requests", n_long, 0, 150)
    if nc + nl == 0:
        raise gr.Error("chat requests + long-context requests must be >= 1")
    cr = ui.check_float("chat arrivals per step", chat_rate, 0.1, 100)
    lr = ui.check_float("long arrivals per step", long_rate, 0.01, 10)
    gib = ui.check_float("buffer size (GiB)", total_gib, 4, 192)
    mode = ui.check_choice("unified mode", mode, MODES)
    grid = _parse_ratios(ratios)
    sd = ui.check_int("seed", seed, 0, 2**31 - 1)
    progress(0.05, desc="building the workload")
    wl = mem.shifting_mix(n_chat=nc, n_long=nl, seed=sd, chat_rate=cr, long_rate=lr)
    cfg = mem.k3_config(total_gib=gib)
    progress(0.2, desc=f"replaying the unified pool and {len(grid) + 2} static partitions")
    c = mem.compare(wl, cfg, ratios=grid, mode=mode)
    session = {"cmp": c, "slot": cfg.state_slot_bytes}
    peak = mem.busiest_step(c)  # open on the busiest step
    f0, c0 = buffer_figure(c, peak, cfg.state_slot_bytes)
    f1, c1 = frontier_figure(c)
    f2, c2 = running_figure(c)
    f3, c3 = ratio_figure(c)
    slider = gr.update(maximum=max(c.unified.makespan - 1, 1), value=peak)
    return summary_markdown(c), f0, c0, f1, c1, f2, c2, f3, c3, slider, session


def show_step(step: float, session: dict | None):
    """The buffer at ``step`` of this session's replay (``unified_memory_step``)."""
    if not session:
        raise gr.Error("run a replay first (press Run)")
    c = session["cmp"]
    s = ui.check_int("step", step, 0, max(c.unified.makespan - 1, 0))
    fig, csv = buffer_figure(c, s, session["slot"])
    return fig, csv


def tick(step: float, session: dict | None):
    """Timer tick: advance about 1/FRAMES of the makespan; stop the timer at the end."""
    if not session:
        return gr.update(), gr.update(), gr.update(), player.stopped()
    last = max(session["cmp"].unified.makespan - 1, 0)
    s = min(int(step or 0) + max(last // FRAMES, 1), last)
    fig, csv = buffer_figure(session["cmp"], s, session["slot"])
    return s, fig, csv, player.after_tick(s >= last)


def _controls() -> tuple:
    """The left column: the buffer, the pools compared, the workload mix and Run."""
    with gr.Row():
        n_chat = gr.Number(300, label="chat requests (0-3000)", step=1, elem_id=f"{NAME}-nchat")
        n_long = gr.Number(15, label="long-context requests (0-150)", step=1)
    with gr.Row():
        chat_rate = gr.Number(15, label="chat arrivals / step")
        long_rate = gr.Number(0.6, label="long arrivals / step")
    total = gr.Number(28, label="buffer per GPU (GiB, 4-192)")
    mode = gr.Radio(list(MODES), value="eager", label="unified pool compaction")
    ratios = gr.Textbox(
        DEFAULT_RATIOS,
        label="static ratios state:KV (1-8 values)",
        elem_id=f"{NAME}-ratios",
    )
    seed = gr.Number(0, label="seed", step=1)
    go_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
    return total, mode, ratios, seed, go_btn, n_chat, n_long, chat_rate, long_rate


def build() -> gr.Blocks:
    with gr.Blocks(title="Unified memory · KDA State Lab") as demo:
        lang = ui.header(NAME, "Unified memory · 统一显存池", EN, ZH)
        session = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                total, mode, ratios, seed, go_btn, n_chat, n_long, chat_rate, long_rate = (
                    _controls()
                )
            with gr.Column(scale=2):
                summary = gr.Markdown(
                    label="Pool comparison", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"]
                )
                with gr.Row():
                    step = gr.Slider(0, 100, value=0, step=1, label="step", elem_id=f"{NAME}-step")
                    play = gr.Button("Play", scale=0, min_width=90, elem_id=f"{NAME}-play")
                    pause = gr.Button("Pause", scale=0, min_width=90)
                s0 = ui.figure_slot(f"{NAME}-buffer", "Buffer")
                s1 = ui.figure_slot(f"{NAME}-frontiers", "Frontiers")
                s2 = ui.figure_slot(f"{NAME}-running", "Running requests")
                s3 = ui.figure_slot(f"{NAME}-ratio-fig", "Concurrency vs ratio")
        timer = gr.Timer(0.4, active=False)
        inputs = [n_chat, n_long, chat_rate, long_rate, total, mode, ratios, seed]
        outputs = [summary, *s0.outputs, *s1.outputs, *s2.outputs, *s3.outputs, step, session]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, outputs)
        run_in = [*inputs, lang.radio]
        run_v = guard.validator(
            lambda v: ui.check_int("chat requests", v, 0, 3000),
            lambda v: ui.check_int("long-context requests", v, 0, 150),
            lambda v: ui.check_float("chat arrivals per step", v, 0.1, 100),
            lambda v: ui.check_float("long arrivals per step", v, 0.01, 10),
            lambda v: ui.check_float("buffer size (GiB)", v, 4, 192),
            lambda v: ui.check_choice("unified mode", v, MODES),
            _parse_ratios,
            lambda v: ui.check_int("seed", v, 0, 2**31 - 1),
            cross=_cross_counts,
        )
        go_btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        step_fn, step_out = loc.wrap(show_step, s0.outputs)
        step.release(
            step_fn, [step, session, lang.radio], step_out, api_name=f"{NAME}_step",
            show_progress="hidden", validator=guard.validator(cross=_cross_step),
        )  # fmt: skip
        tick_fn, tick_out = loc.wrap(tick, [step, *s0.outputs, timer])
        player.wire(timer, play, pause, tick_fn, [step, session, lang.radio], tick_out)
        loc.finish()
        lang.labels(
            {
                n_chat: "短对话请求数 (0-3000)",
                n_long: "长上下文请求数 (0-150)",
                chat_rate: "每步到达的对话数",
                long_rate: "每步到达的长请求数",
                total: "每卡缓冲区 (GiB, 4-192)",
                mode: "统一池整理方式",
                ratios: "静态比例 状态:KV（1-8 个值）",
                seed: "随机种子",
                step: "步",
                go_btn: "运行",
                play: "播放",
                pause: "暂停",
                **{s.csv: ui.CSV_ZH for s in (s0, s1, s2, s3)},
            },
            tr=TR,
        )
    return demo


__all__ = [
    "FRAMES",
    "build",
    "pool_color",
    "run",
    "show_step",
    "tick",
]  # what the tests read as app.<name>


if __name__ == "__main__":
    ui.main(build)
