"""Unified two-ended memory pool vs static partitions, over a workload whose mix shifts.

Compares (``kda_core.studies.memory.compare`` on ``memory.shifting_mix()``: a chat phase of short
prompts, then a long-context phase; Kimi K3 per GPU at TP8, bf16, 28 GiB):
  * the unified pool over time: KDA state slots grow from the bottom of one byte buffer, MLA KV
    pages from the top; x marks the steps where the two ends met (the head of the queue waited);
  * running requests over time: unified vs the best static ratio in hindsight and the ratios
    tuned for each phase alone;
  * mean concurrency vs the static ratio, against the unified pool.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import memory
from plots import style

NAME = "unified_memory"

TEXT = {
    "en": {
        "suptitle": "One buffer, two ends: unified pool vs static partitions",
        "title_tl": "Unified pool ({kind}): state grows from the bottom, KV from the top",
        "step": "scheduler step",
        "offset": "byte offset in the buffer",
        "state": "KDA state slots",
        "kv": "MLA KV pages",
        "met": "ends met: head of queue waits",
        "title_run": "Running requests",
        "running": "requests",
        "unified": "unified",
        "best": "best static r={r:.2g}",
        "tuned": "static for {phase} r={r:.2g}",
        "title_ratio": "Concurrency vs static ratio",
        "best_pt": "best static {c:.1f}",
        "makespan": "{name} · {n:,} steps",
        "ratio": "static ratio r (state : KV bytes)",
        "conc": "mean running requests",
        "phase": {"chat": "chat", "long-context": "long ctx"},
        "more": "→ runs to step {n:,}",
        "source": "Data: simulated scheduler on a chat-then-long-context workload · "
        "Kimi K3 per GPU, TP8, bf16, {size} buffer, full reservation, FIFO",
    },
    "zh": {
        "suptitle": "一块显存，两端增长：统一池 vs 静态划分",
        "title_tl": "统一池（{kind}）：状态从底端增长，KV 从顶端增长",
        "step": "调度步",
        "offset": "显存中的字节偏移",
        "state": "KDA 状态槽",
        "kv": "MLA KV 页",
        "met": "两端相遇：队首请求等待",
        "title_run": "运行中的请求",
        "running": "请求数",
        "unified": "统一池",
        "best": "最佳静态 r={r:.2g}",
        "tuned": "为{phase}调优 r={r:.2g}",
        "title_ratio": "并发与静态比例",
        "best_pt": "最佳静态 {c:.1f}",
        "makespan": "{name} · {n:,} 步",
        "ratio": "静态比例 r（状态 : KV 字节）",
        "conc": "平均运行请求数",
        "phase": {"chat": "对话阶段", "long-context": "长上下文阶段"},
        "more": "→ 持续到第 {n:,} 步",
        "source": "数据：先对话后长上下文负载的调度模拟 · Kimi K3 每卡，TP8，bf16，{size} 缓冲区，"
        "全量预留，FIFO",
    },
}


def compute(quick: bool = False) -> memory.Comparison:
    """The unified_memory app's default comparison (~6 s); ``quick``: 10x fewer requests."""
    mix = memory.shifting_mix(n_chat=300, n_long=15) if quick else memory.shifting_mix()
    return memory.compare(mix, memory.ReplayConfig(), mode="eager")


def make_figure(data: memory.Comparison, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    u = data.unified
    fig = style.new_figure(
        "tall",
        t["source"].format(size=style.format_bytes(u.total_bytes)),
    )
    fig.suptitle(t["suptitle"])
    # a legend row under the buffer panel (inside the panel the legend covered the KV area)
    gs = fig.add_gridspec(3, 2, height_ratios=(1.0, 0.07, 1.05))
    ax = fig.add_subplot(gs[0, :])
    _draw_buffer(ax, u, t)
    lg = fig.add_subplot(gs[1, :])
    lg.axis("off")
    handles, names = ax.get_legend_handles_labels()
    lg.legend(handles, names, loc="center", ncols=3, fontsize=8, frameon=False, markerscale=3,
              borderaxespad=0)  # fmt: skip
    _draw_running(fig.add_subplot(gs[2, 0]), data, t)
    _draw_ratio_sweep(fig.add_subplot(gs[2, 1]), data, t)
    return fig


def _draw_buffer(ax: Axes, u: memory.ReplayResult, t: dict) -> None:
    """The one byte buffer over time: state slots from the bottom, MLA KV from the top."""
    tl = u.timeline
    steps = range(tl.state_frontier.shape[0])
    ax.fill_between(steps, 0, tl.state_frontier, step="post", color=style.COLORS["state"],
                    alpha=0.85, lw=0, label=t["state"], gid="state")  # fmt: skip
    ax.fill_between(steps, tl.kv_frontier, u.total_bytes, step="post", color=style.COLORS["kv"],
                    alpha=0.85, lw=0, label=t["kv"], gid="kv")  # fmt: skip
    blocked = tl.blocked.astype(bool)
    if blocked.any():
        ax.plot(tl.blocked.nonzero()[0], tl.state_frontier[blocked], ".", color="black", ms=2.2,
                label=t["met"], gid="met")  # fmt: skip
    ax.set_xlim(0, tl.state_frontier.shape[0])
    ax.set_ylim(0, u.total_bytes)
    style.bytes_axis(ax.yaxis)
    ax.set_xlabel(t["step"])
    ax.set_ylabel(t["offset"])
    ax.set_title(t["title_tl"].format(kind=u.kind))
    ax.grid(False)


def _draw_running(br: Axes, data: memory.Comparison, t: dict) -> None:
    """Running requests per step: the unified pool against the static partitions."""
    u = data.unified
    # categorical colours (palette.SERIES in a fixed order; unified black), as in the app
    pools = [(t["unified"], u, "black", 2.2)]
    pools.append((t["best"].format(r=data.best_ratio), data.best_static, style.SERIES[2], 1.4))
    for i, (ph, r, res) in enumerate(zip(data.phase_names, data.phase_ratios, data.phase_static)):
        name = t["tuned"].format(phase=t["phase"].get(ph, ph), r=r)
        pools.append((name, res, style.SERIES[3 + i], 1.4))
    for name, res, color, lw in pools:
        br.plot(res.timeline.running, color=color, lw=lw, gid=f"running_{res.kind}_{res.ratio}",
                label=t["makespan"].format(name=name, n=res.makespan))  # fmt: skip
    br.set_xlabel(t["step"])
    br.set_ylabel(t["running"])
    br.set_title(t["title_run"])
    br.legend(loc="upper right", fontsize=7.5)
    br.set_ylim(0, 1.4 * u.peak_concurrency)  # room for the legend above the curves
    x_end = 2 * u.makespan  # the slowest static pool runs on past the edge: mark where it ends
    br.set_xlim(0, x_end)
    for n_cut, (_name, res, color, _lw) in enumerate(p for p in pools if p[1].makespan > x_end):
        y_cut = float(res.timeline.running[x_end - 1])
        br.plot([x_end], [y_cut], ">", color=color, ms=7, clip_on=False, gid=f"cut{n_cut}")
        br.annotate(t["more"].format(n=res.makespan), (x_end, y_cut), xytext=(-4, 6 + 11 * n_cut),
                    textcoords="offset points", ha="right", fontsize=7.5, color=color)  # fmt: skip


def _draw_ratio_sweep(cr: Axes, data: memory.Comparison, t: dict) -> None:
    """Mean concurrency of static partitions over the KV:state ratio, unified as a line."""
    u = data.unified
    top = u.mean_concurrency * 1.45  # the legend sits above the unified line
    cr.plot(data.ratios, data.static_mean_concurrency, marker="o", color=style.SERIES[2],
            lw=1.6, ms=4, label="static", gid="static")  # fmt: skip
    cr.axhline(u.mean_concurrency, color="black", lw=2.2, label=t["unified"],
               gid="unified_mean")  # fmt: skip
    cr.annotate(f"{t['unified']} {u.mean_concurrency:.1f}", (data.ratios[-1], u.mean_concurrency),
                xytext=(0, 4), textcoords="offset points", color="black",
                ha="right", fontsize=8.5)  # fmt: skip
    for i, (ph, r) in enumerate(zip(data.phase_names, data.phase_ratios)):
        # named in the legend, not by text on the line: a label there overlapped the
        # best-static label and the curve (unified_memory_zh.png)
        # up to the best static point only: above it sit the labels and the legend
        cr.axvline(r, ymax=data.best_static.mean_concurrency / top, color=style.SERIES[3 + i],
                   ls=":", lw=1.3, gid=f"phase_{i}",
                   label=t["tuned"].format(phase=t["phase"].get(ph, ph), r=r))  # fmt: skip
    cr.plot([data.best_ratio], [data.best_static.mean_concurrency], "D", color="black", ms=6)
    cr.annotate(t["best_pt"].format(c=data.best_static.mean_concurrency),
                (data.best_ratio, data.best_static.mean_concurrency), xytext=(0, 8),
                textcoords="offset points", ha="center", fontsize=8.5)  # fmt: skip
    cr.set_xscale("log")
    cr.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    cr.set_ylim(0, top)
    handles = [h for h in cr.get_legend_handles_labels()[0] if h.get_gid() not in ("static",)]
    cr.legend(handles=[h for h in handles if str(h.get_gid()).startswith("phase_")],
              loc="upper left", fontsize=7.5, framealpha=0.9)  # fmt: skip
    cr.set_xlabel(t["ratio"])
    cr.set_ylabel(t["conc"])
    cr.set_title(t["title_ratio"])


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
