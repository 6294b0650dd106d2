"""Checkpoint density on a real trace: memory ~1/K, replay per hit, and the TTFT optimum.

Compares (``kda_core.studies.density.density_sweep``: the trace-driven simulator with the shared
radix cache, ``policy.make("interval", every=K)``, Kimi K3 per GPU at TP8) over the checkpoint
interval K and four state budgets per GPU:
  * peak checkpoint memory (unlimited: ~1/K, the analytic distinct-prefix / K beside it);
  * state hit rate (restorable prefix / input tokens);
  * mean replayed tokens per state hit, with the study's ONE analytic curve
    (``DensityAnalytic.replay_curve``: the trace's ideal match points floored to K, the same
    curve the app draws) and the study's on-chart note (``density.replay_note``) on why the
    simulated replay stays flat on this trace (a follow-up turn usually matches exactly at a
    checkpoint); the suptitle (``density.headline``) says "replay ~K" only if the data shows it;
  * mean time to first token, the best interval of each budget marked.
Trace: the first 4,000 requests (~19 min) of the bundled Mooncake conversation trace; the whole
trace (12,031 requests) gives the same optima but takes ~45 s with the retention figure, over
the 60 s budget of ``python -m plots``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies import density
from kda_core.workloads import bundled_trace
from plots import style

NAME = "checkpoint_density"
TRACE_REQUESTS = 4000
QUICK_REQUESTS = 400
INTERVALS = (512, 1024, 2048, 4096, 8192, 16384)
BUDGETS_GIB = (8.0, 32.0, 128.0, None)

TEXT = {
    "en": {
        "k": "checkpoint interval K (tokens)",
        "title_mem": "Peak checkpoint memory",
        "mem": "bytes per GPU",
        "title_hit": "State hit rate",
        "hit": "restorable / input tokens",
        "title_rep": "Replay per state hit",
        "rep": "mean replayed tokens",
        "title_ttft": "Mean time to first token",
        "ttft": "seconds",
        "budget": "state budget {b}",
        "unlimited": "unlimited",
        "an_mem": "distinct prefix / K (analytic)",
        "an_rep": "ideal match − floor to K (analytic)",
        "source": "Data: simulated prefix cache on the first {n:,} requests of the Mooncake "
        "conversation trace · {model} TP8 · block {block} tokens · {ckpt} per checkpoint",
        "opt": "best K for the budget",
    },
    "zh": {
        "k": "检查点间隔 K（token）",
        "title_mem": "检查点显存峰值",
        "mem": "每卡字节数",
        "title_hit": "状态命中率",
        "hit": "可恢复 / 输入 token",
        "title_rep": "每次状态命中的重放量",
        "rep": "平均重放 token 数",
        "title_ttft": "平均首 token 延迟",
        "ttft": "秒",
        "budget": "状态预算 {b}",
        "unlimited": "不限",
        "an_mem": "不同前缀 / K（解析）",
        "an_rep": "理想匹配点 − 向下取整到 K（解析）",
        "source": "数据：在 Mooncake 对话 trace 的前 {n:,} 个请求上模拟前缀缓存 · {model} TP8 · "
        "块 {block} token · 每个检查点 {ckpt}",
        "opt": "该预算下最佳 K",
    },
}


def trace(quick: bool = False):  # noqa: ANN201 - kda_core.workloads.Trace
    """The first TRACE_REQUESTS requests of the bundled Mooncake conversation trace."""
    return bundled_trace("conversation").head(QUICK_REQUESTS if quick else TRACE_REQUESTS)


def compute(quick: bool = False) -> density.DensitySweep:
    """Interval x budget sweep (24 simulations, ~8 s; ``quick``: 400 requests, 3 x 2 runs)."""
    if quick:
        return density.density_sweep(trace(True), (512, 2048, 8192), (8.0, None))
    return density.density_sweep(trace(), INTERVALS, BUDGETS_GIB)


def _n_requests(trace_name: str) -> int:
    """Request count from a head trace's name (``name[:N]``), else TRACE_REQUESTS."""
    tail = trace_name.rsplit("[:", 1)[-1].rstrip("]")
    return int(tail) if tail.isdigit() else TRACE_REQUESTS


def _budget(t: dict, label: str) -> str:
    return t["budget"].format(b=t["unlimited"] if label == "unlimited" else label)


def make_figure(data: density.DensitySweep, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    an = data.analytic
    fig = style.new_figure(
        (style.COLUMN_WIDTH, 6.9),
        t["source"].format(
            n=_n_requests(data.trace_name),
            model=data.model,
            block=data.block_size,
            ckpt=style.format_bytes(data.state_bytes_per_checkpoint),
        ),
    )
    for footer in fig.texts:  # the source line wraps at the figure edge instead of running off
        footer.set_wrap(True)
    fig.suptitle("\n".join(density.wrap(density.headline(data, lang), 38 if lang == "zh" else 66)))
    gs = fig.add_gridspec(3, 2, height_ratios=(0.16, 1.0, 1.0))
    lg = fig.add_subplot(gs[0, :])
    am = fig.add_subplot(gs[1, 0])
    ah = fig.add_subplot(gs[1, 1], sharex=am)
    ar = fig.add_subplot(gs[2, 0], sharex=am)
    at = fig.add_subplot(gs[2, 1], sharex=am)
    k = data.intervals
    for j, label in enumerate(data.budget_labels):
        c = style.SERIES[j]
        kw = {"color": c, "marker": "o", "ms": 3.5, "lw": 1.7}
        am.plot(k, data.peak_state_bytes[:, j], label=_budget(t, label), gid=f"mem{j}", **kw)
        ah.plot(k, data.state_hit_rate[:, j], gid=f"hit{j}", **kw)
        ar.plot(k, data.mean_replay_per_hit[:, j], gid=f"rep{j}", **kw)
        at.plot(k, data.ttft_mean_s[:, j], gid=f"ttft{j}", **kw)
        o = int(data.optimum[j])
        at.plot(k[o], data.ttft_mean_s[o, j], "*", color=c, ms=15, mec="black", mew=0.7,
                label=t["opt"] if j == 0 else None, gid=f"opt{j}")  # fmt: skip
    am.plot(k, an.state_bytes, color=style.COLORS["neutral"], ls="--", lw=1.3, label=t["an_mem"],
            gid="an_mem")  # fmt: skip
    ar.plot(k, an.replay_curve, color=style.COLORS["neutral"], ls="--", lw=1.3,
            label=t["an_rep"], gid="an_rep")  # fmt: skip
    top = max(float(an.replay_curve.max()), float(data.mean_replay_per_hit.max()), 1.0)
    ar.set_ylim(0, top * 2.1)
    note = density.replay_note(data, lang, width=30 if lang == "zh" else 52, detail=False)
    ar.text(0.02, 0.97, note,
            transform=ar.transAxes, va="top", ha="left", fontsize=5.6, linespacing=1.15,
            color="#333", gid="replay_note",
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "#ccc", "lw": 0.5,
                  "alpha": 0.9})  # fmt: skip
    am.set_yscale("log")
    style.bytes_axis(am.yaxis, log=True, subs=(1.0, 4.0, 16.0, 64.0, 256.0))
    ah.yaxis.set_major_formatter(ticker.PercentFormatter(1.0, decimals=0))
    ah.set_ylim(bottom=0)
    for ax in (am, ah):
        ax.tick_params(axis="x", labelbottom=False)
    for ax, title, ylabel in (
        (am, t["title_mem"], t["mem"]),
        (ah, t["title_hit"], t["hit"]),
        (ar, t["title_rep"], t["rep"]),
        (at, t["title_ttft"], t["ttft"]),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(k)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
    ar.set_xlabel(t["k"])
    at.set_xlabel(t["k"])
    handles, names = [], []
    for ax in (am, ar, at):
        h, n = ax.get_legend_handles_labels()
        handles += h
        names += n
    lg.axis("off")
    lg.legend(handles, names, loc="center", ncols=3, fontsize=8, borderaxespad=0)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
