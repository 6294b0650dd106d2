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
import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.i18n_tables import UNIFIED_MEMORY as TR
from apps.ui import COLORS, SERIES, guard, i18n
from kda_core.studies import memory as mem

NAME = "unified_memory"
GIB = float(1 << 30)
MODES = ("eager", "lazy")
DEFAULT_RATIOS = "0.1, 0.3, 1, 3"
FRAMES = 60  # a Play pass shows about this many steps

EN = """**Two caches, one buffer.** A KDA hybrid needs two kinds of GPU memory: per-token MLA KV
pages (blue, growing from the top end) and fixed-size KDA state slots (red, growing from the bottom
end). A *static* split (SGLang's ratio) fixes the border in advance; a *unified* pool lets the
two ends grow toward each other until they meet. The workload first sends many short chats
(state-hungry: many requests), then a few long documents (KV-hungry). **Look at:** the buffer
bars while you play the timeline (where the ends meet, which static region fills first), the
running-requests curve in each phase, and how no single static ratio matches the unified pool
in both phases."""

ZH = """**两种缓存，一块显存。** KDA 混合模型需要两类显存：
按 token 增长的 MLA KV 页（蓝色，从顶端增长）和固定大小的 KDA 状态槽（红色，从底端增长）。
*静态*划分（SGLang 的比例）事先固定边界；*统一*池让两端相向增长，直到相遇。
负载先是大量短对话（请求多、吃状态槽），再是少量长文档（吃 KV）。**请看：**
播放时间轴时的显存条（两端在何处相遇，哪个静态区域先满），两个阶段中的并发请求曲线，以及为什么
没有任何一个静态比例能在两个阶段都追上统一池。"""


# ---------------------------------------------------------------------------------------------
# Pure figure makers
# ---------------------------------------------------------------------------------------------


def pool_color(i: int) -> str:
    """Categorical colours of the running/ratio figures: 0 unified (black), 1 best static,
    2.. static tuned for each phase (palette.SERIES in a fixed order, never a semantic colour)."""
    return "black" if i == 0 else SERIES[(i + 1) % len(SERIES)]


def _pools(c: mem.Comparison) -> list[tuple[str, mem.ReplayResult]]:
    rows = [(f"unified ({c.unified.kind})", c.unified)]
    rows += [(f"static r={r:.3g}", res) for r, res in zip(c.ratios.tolist(), c.static)]
    return rows


def buffer_figure(c: mem.Comparison, step: int, state_slot_bytes: int) -> tuple[go.Figure, str]:
    """Every pool's buffer at ``step`` (``memory.buffer_at``): state live | state holes | free |
    KV holes | KV live; a black tick marks each static partition's border."""
    T = c.unified.total_bytes
    b = mem.buffer_at(c, step, state_slot_bytes)
    names = [label for label, _ in _pools(c)]
    cols = {
        k: getattr(b, k)
        for k in (
            "state_live",
            "state_holes",
            "free",
            "kv_holes",
            "kv_live",
            "running",
            "queued",
            "blocked",
        )
    }
    fig = go.Figure()
    base = np.zeros(len(names))
    segs = (
        ("state_live", "KDA state slots (live)", COLORS["state"]),
        ("state_holes", "freed state slots (holes)", "#f4a6a6"),
        ("free", "free", COLORS["free"]),
        ("kv_holes", "freed KV pages (holes)", "#a9c8e8"),
        ("kv_live", "MLA KV pages (live)", COLORS["kv"]),
    )
    for key, label, color in segs:
        w = np.asarray(cols[key], dtype=np.float64) / GIB
        fig.add_bar(
            y=names,
            x=w,
            base=base.copy(),
            orientation="h",
            name=label,
            marker_color=color,
            customdata=np.stack([cols["running"], cols["queued"]], axis=1),
            hovertemplate=f"%{{y}}<br>{label}: %{{x:.2f}} GiB<br>running %{{customdata[0]}}, "
            "queued %{customdata[1]}<extra></extra>",
        )
        base = base + w
    for i, e in enumerate(b.state_edge.tolist()):
        if not np.isfinite(e):
            continue
        edge = e / GIB
        fig.add_shape(
            type="line",
            x0=edge,
            x1=edge,
            y0=i - 0.45,
            y1=i + 0.45,
            line={"color": "black", "width": 2},
        )
    met = [n for n, bl in zip(names, cols["blocked"].tolist()) if bl]
    title = f"The buffer at step {step} of {c.unified.makespan}"
    if met:
        title += f" · full: {', '.join(met[:3])}{'…' if len(met) > 3 else ''}"
    ui.style(fig, title, "byte offset in the buffer (GiB)", "", height=170 + 34 * len(names))
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(range=[0, T / GIB])
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(f"{NAME}-buffer-step{step}", {"pool": names, **cols})
    return fig, csv


def frontier_figure(c: mem.Comparison, step: int | None = None) -> tuple[go.Figure, str]:
    tl = c.unified.timeline
    t = np.arange(tl.running.shape[0])
    T = c.unified.total_bytes / GIB
    fig = go.Figure()
    fig.add_scatter(
        x=t,
        y=tl.state_frontier / GIB,
        name="state frontier (grows up)",
        line={"color": COLORS["state"], "width": 2},
        hovertemplate="step %{x}<br>state end %{y:.2f} GiB<extra></extra>",
    )
    fig.add_scatter(
        x=t,
        y=tl.kv_frontier / GIB,
        name="KV frontier (grows down)",
        line={"color": COLORS["kv"], "width": 2},
        hovertemplate="step %{x}<br>KV end %{y:.2f} GiB<extra></extra>",
    )
    b = np.flatnonzero(tl.blocked)
    if b.size:
        fig.add_scatter(
            x=b,
            y=tl.state_frontier[b] / GIB,
            mode="markers",
            name=f"ends met: head of queue blocked ({b.size} steps)",
            marker={"color": "black", "symbol": "x", "size": 7},
            hovertemplate="step %{x}: blocked<extra></extra>",
        )
    mv = np.flatnonzero(tl.moves)
    fig.add_bar(
        x=t[mv],
        y=tl.moves[mv],
        name=f"compaction moves ({c.unified.total_moves:,})",
        marker_color=COLORS["neutral"],
        yaxis="y2",
        opacity=0.6,
        hovertemplate="step %{x}<br>%{y:,} moves<extra></extra>",
    )
    if step is not None:
        fig.add_vline(x=step, line={"color": COLORS["neutral"], "dash": "dot"})
    ui.style(
        fig,
        f"Unified pool ({c.unified.kind}): where the two ends are",
        "scheduler step",
        "byte offset (GiB)",
    )
    fig.update_yaxes(range=[0, T])
    fig.update_layout(
        yaxis2={
            "title": "moves per step",
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "rangemode": "tozero",
        }
    )
    csv = ui.write_csv(
        f"{NAME}-frontiers",
        {
            "step": t,
            "state_frontier_bytes": tl.state_frontier,
            "kv_frontier_bytes": tl.kv_frontier,
            "state_bytes": tl.state_bytes,
            "kv_bytes": tl.kv_bytes,
            "blocked": tl.blocked,
            "moves": tl.moves,
        },
    )
    return fig, csv


def running_figure(c: mem.Comparison) -> tuple[go.Figure, str]:
    fig = go.Figure()
    series = {}
    pools = [(f"unified ({c.unified.kind})", c.unified)]
    pools.append((f"best static r={c.best_ratio:.3g}", c.best_static))
    for name, r, res in zip(c.phase_names, c.phase_ratios, c.phase_static):
        pools.append((f"static tuned for {name} r={r:.3g}", res))
    # the x axis shows the unified pool's and the best static split's runs; a slower split
    # (one tuned for a single phase can take 10x longer) would squeeze both phases to the left
    base = max(c.unified.makespan, c.best_static.makespan)
    x_end = 1.05 * max(r.makespan for _, r in pools if r.makespan <= 2 * base)
    for i, (label, res) in enumerate(pools):
        tl = res.timeline
        t = np.arange(tl.running.shape[0])
        color = pool_color(i)
        if res.makespan > x_end:
            label = f"{label} (ends at step {res.makespan:,}, off the axis)"
        fig.add_scatter(
            x=t,
            y=tl.running,
            name=label,
            line={"color": color, "width": 3 if i == 0 else 2},
            hovertemplate=f"{label}<br>step %{{x}}<br>running %{{y}}<extra></extra>",
        )
        series[f"{label} running"] = (t, tl.running)
        series[f"{label} queued"] = (t, tl.queued)
    tl = c.unified.timeline
    fig.add_scatter(
        x=np.arange(tl.queued.shape[0]),
        y=tl.queued,
        name="queued (unified)",
        line={"color": COLORS["neutral"], "dash": "dot"},
        hovertemplate="step %{x}<br>queued %{y}<extra></extra>",
    )
    ui.style(
        fig,
        "Running requests over time (chat phase, then long-context)",
        "scheduler step",
        "requests",
    )
    fig.update_xaxes(range=[0, x_end])
    csv = ui.series_csv(f"{NAME}-running", series, "step", "requests")
    return fig, csv


def ratio_figure(c: mem.Comparison) -> tuple[go.Figure, str]:
    fig = go.Figure()
    fig.add_scatter(
        x=c.ratios,
        y=c.static_mean_concurrency,
        mode="lines+markers",
        name="static partition",
        line={"color": SERIES[2], "width": 2},
        hovertemplate="ratio %{x:.3g}<br>mean running %{y:.1f}<extra></extra>",
    )
    lo = float(min(c.ratios.min(), min(c.phase_ratios))) / 1.3
    hi = float(max(c.ratios.max(), max(c.phase_ratios))) * 1.3
    top = float(max(c.static_mean_concurrency.max(), c.unified.mean_concurrency)) * 1.08
    fig.add_scatter(  # lines with legend names: a label box would cover another line
        x=[lo, hi], y=[c.unified.mean_concurrency] * 2, mode="lines",
        name=f"unified pool {c.unified.mean_concurrency:.1f}",
        line={"color": pool_color(0), "width": 3},
        hovertemplate=f"unified pool<br>mean running {c.unified.mean_concurrency:.1f}"
        "<extra></extra>",
    )  # fmt: skip
    for j, (name, r) in enumerate(zip(c.phase_names, c.phase_ratios)):
        fig.add_scatter(
            x=[float(r), float(r)], y=[0, top], mode="lines",
            name=f"static tuned for {name} (r={float(r):.3g})",
            line={"color": pool_color(2 + j), "dash": "dash", "width": 1.5},
            hovertemplate=f"tuned for {name}<br>ratio {float(r):.3g}<extra></extra>",
        )  # fmt: skip
    fig.add_scatter(
        x=[c.best_ratio],
        y=[c.best_static.mean_concurrency],
        mode="markers",
        name=f"best static in hindsight (r={c.best_ratio:.3g})",
        marker={"color": "black", "size": 11, "symbol": "diamond"},
        hovertemplate="best static<br>ratio %{x:.3g}<br>%{y:.1f}<extra></extra>",
    )
    ui.style(
        fig,
        "Mean running requests: unified pool vs static ratios",
        "static ratio state : KV (log scale)",
        "mean running requests",
    )
    ticks = np.concatenate([c.ratios, np.asarray(c.phase_ratios)])
    ui.log_axis(fig, "x", ticks, fmt=lambda v: f"{v:.3g}")
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[0, top], rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-ratios",
        {
            "ratio": c.ratios,
            "static_mean_concurrency": c.static_mean_concurrency,
            "static_queue_delay_steps": c.static_queue_delay,
            "static_makespan": c.static_makespan,
            "unified_mean_concurrency": np.full(c.ratios.shape, c.unified.mean_concurrency),
        },
    )
    return fig, csv


def summary_markdown(c: mem.Comparison) -> str:
    rows = [("unified (" + c.unified.kind + ")", c.unified)]
    rows.append((f"best static r={c.best_ratio:.3g}", c.best_static))
    rows += [
        (f"static for {n} r={r:.3g}", s)
        for n, r, s in zip(c.phase_names, c.phase_ratios, c.phase_static)
    ]
    out = [
        "| pool | mean running | peak | mean queueing (steps) | makespan | ends met "
        "(steps) | moves |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        out.append(
            f"| {label} | {r.mean_concurrency:.1f} | {r.peak_concurrency} | "
            f"{r.mean_queue_delay:.1f} | {r.makespan} | {r.blocked_steps} | "
            f"{r.total_moves:,} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Callbacks
# ---------------------------------------------------------------------------------------------


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
        return gr.update(), gr.update(), gr.update(), gr.Timer(active=False)
    last = max(session["cmp"].unified.makespan - 1, 0)
    s = min(int(step or 0) + max(last // FRAMES, 1), last)
    fig, csv = buffer_figure(session["cmp"], s, session["slot"])
    return s, fig, csv, gr.Timer(active=s < last)


def build() -> gr.Blocks:
    with gr.Blocks(title="Unified memory · KDA State Lab") as demo:
        lang = ui.header(NAME, "Unified memory · 统一显存池", EN, ZH)
        session = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                with gr.Row():
                    n_chat = gr.Number(
                        300, label="chat requests (0-3000)", step=1, elem_id=f"{NAME}-nchat"
                    )
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
        play.click(lambda: gr.Timer(active=True), None, timer, api_visibility="private")
        pause.click(lambda: gr.Timer(active=False), None, timer, api_visibility="private")
        tick_fn, tick_out = loc.wrap(tick, [step, *s0.outputs, timer])
        timer.tick(
            tick_fn,
            [step, session, lang.radio],
            tick_out,
            api_visibility="private",
            show_progress="hidden",
        )
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


if __name__ == "__main__":
    ui.main(build)
