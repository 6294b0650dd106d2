"""Prefix replay in a multi-turn chat: a token hit is not a state hit.

Compares, for the ``multi_turn`` scenario served by the real caching engine on TinyHybrid
(``kda_core.studies.prefix_replay``: checkpoint every 32 tokens plus one at each request's end):
  * per turn: the restore point (deepest checkpoint on the path), the token match, the replayed
    span between them, the fresh prefill and the decode, and the checkpoints each turn parks;
  * the last turn's replay, token by token: distance of all KDA states to the uncached state at
    the match, exactly 0 when the replay reaches it;
  * the logits of the last turn vs an uncached run when restored exactly, from INT8 checkpoints,
    and inconsistently (MLA KV at the match, KDA state at the checkpoint, no replay).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kda_core.studies import prefix_replay
from plots import style

NAME = "prefix_replay"
SCENARIO = "multi_turn"
PHASE_COLORS = {
    "restore": style.COLORS["hit"],
    "replay": style.COLORS["replay"],
    "prefill": style.COLORS["prefill"],
    "decode": style.COLORS["decode"],
}
# How the last turn was restored: categories, so the SERIES colours in legend order.
# The app colours them the same way: SERIES in the study's ARMS order (exact, int8, inconsistent).
_ARM = {"exact": "exact", "int8": "int8", "bad": "inconsistent"}
DRIFT_COLORS = {key: style.SERIES[prefix_replay.ARMS.index(arm)] for key, arm in _ARM.items()}

TEXT = {
    "en": {
        "suptitle": "A token hit is not a state hit: restore, replay, then prefill",
        "title_tl": "{title}: a checkpoint every {k} tokens",
        "turn": "turn {i}",
        "tokens": "position in the conversation (tokens)",
        "replay_x": "token position (tokens): replay {r} → {m}",
        "restore": "restored from a checkpoint",
        "replay": "replayed (checkpoint → token match)",
        "prefill": "prefilled",
        "decode": "decoded",
        "ckpt": "checkpoint parked",
        "match": "token match",
        "row": "restore {r} · match {m}",
        "title_dist": "Turn {i}: replay reaches the uncached state",
        "dist": "relative distance of all KDA states",
        "title_drift": "Turn {i}: logits vs an uncached run",
        "gen": "generated token",
        "diff": "max |Δ logit|",
        "exact": "exact restore + replay",
        "int8": "INT8 checkpoint + replay",
        "bad": "MLA at match, KDA at checkpoint, no replay",
        "source": "Data: the lab's caching engine serving TinyHybrid (trained k3-mini, greedy "
        "decoding), a checkpoint every {k} tokens",
    },
    "zh": {
        "suptitle": "前缀命中不等于状态命中：恢复、重放，再预填充",
        "title_tl": "{title}：每 {k} 个 token 一个检查点",
        "turn": "第 {i} 轮",
        "tokens": "对话中的位置（token）",
        "replay_x": "token 位置（token）：重放 {r} → {m}",
        "restore": "从检查点恢复",
        "replay": "重放（检查点 → 前缀匹配点）",
        "prefill": "预填充",
        "decode": "解码",
        "ckpt": "保存的检查点",
        "match": "前缀匹配点",
        "row": "恢复 {r} · 匹配 {m}",
        "title_dist": "第 {i} 轮：重放到达未缓存状态",
        "dist": "全部 KDA 状态的相对距离",
        "title_drift": "第 {i} 轮：与未缓存运行的 logit 差",
        "gen": "生成的 token",
        "diff": "max |Δ logit|",
        "exact": "精确恢复 + 重放",
        "int8": "INT8 检查点 + 重放",
        "bad": "MLA 在匹配点、KDA 在检查点、不重放",
        "source": "数据：本实验室的缓存引擎运行 TinyHybrid（训练后的 k3-mini，贪心解码），"
        "每 {k} 个 token 一个检查点",
    },
}


class Data(NamedTuple):
    """The two study results this figure draws."""

    scenario: prefix_replay.ScenarioResult
    drift: prefix_replay.DriftStudy


def compute(quick: bool = False) -> Data:
    """``run_scenario("multi_turn")`` and ``restore_drift`` of its last turn (~2 s)."""
    return Data(
        prefix_replay.run_scenario(SCENARIO, policy="interval", spacing=32, max_new_tokens=6),
        prefix_replay.restore_drift(SCENARIO, -1, spacing=32, max_new_tokens=8 if quick else 16),
    )


def make_figure(data: Data, lang: str = "en") -> Figure:
    t = style.translations(TEXT, lang)
    sc, dr = data.scenario, data.drift
    meta = prefix_replay.SCENARIOS[sc.name]
    title = meta.title_zh if lang == "zh" else meta.title
    fig = style.new_figure("tall", t["source"].format(k=sc.spacing))
    fig.suptitle(t["suptitle"])
    gs = fig.add_gridspec(2, 2, height_ratios=(0.95, 1.0))
    ax = fig.add_subplot(gs[0, :])
    n = len(sc.requests)
    seen: set[str] = set()
    for i, req in enumerate(sc.requests):
        tl = req.timeline
        y = n - 1 - i
        for a, b, phase in tl.segments:
            label = None if phase in seen else t[phase]
            seen.add(phase)
            ax.barh(y, b - a, left=a, height=0.5, color=PHASE_COLORS[phase], label=label,
                    gid=f"turn{i}_{phase}")  # fmt: skip
        ax.plot(tl.checkpoints, [y + 0.36] * len(tl.checkpoints), "v", ms=5,
                color=style.COLORS["checkpoint"], label=None if i else t["ckpt"])  # fmt: skip
        if tl.token_match:
            ax.plot([tl.token_match] * 2, [y - 0.33, y + 0.33], color="black", lw=1.6,
                    label=t["match"] if i == 1 else None)  # fmt: skip
        ax.annotate(
            t["row"].format(m=tl.token_match, r=tl.restore_at),
            (tl.decode[1], y), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8,
        )  # fmt: skip
    ax.set_yticks(range(n), [t["turn"].format(i=n - k) for k in range(n)])
    ax.set_ylim(-0.6, n - 0.3)
    ax.margins(x=0.0)
    ax.set_xlim(0, None)
    ax.set_xlabel(t["tokens"])
    ax.grid(False, axis="y")
    ax.set_title(t["title_tl"].format(title=title, k=sc.spacing))
    handles, names = ax.get_legend_handles_labels()
    order = [t[k] for k in ("restore", "replay", "prefill", "decode", "ckpt", "match")]
    pairs = sorted(zip(handles, names), key=lambda hn: order.index(hn[1]))
    ax.legend(*zip(*pairs), loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3, fontsize=8)
    ax.set_xlim(0, sc.requests[-1].timeline.decode[1] * 1.45)

    last = sc.requests[-1]
    tr = last.replay_steps
    bx = fig.add_subplot(gs[1, 0])
    bx.plot(tr.positions, tr.dist, marker="o", ms=3.5, color=style.COLORS["replay"], gid="dist")
    # positions, not token text: the tokenizer is byte-level (a Chinese character is 3 tokens)
    bx.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 4, 5, 10]))
    bx.set_xlim(tr.positions[0] - 0.5, tr.positions[-1] + 0.5)
    bx.set_xlabel(t["replay_x"].format(r=last.timeline.restore_at, m=last.timeline.token_match))
    bx.set_ylim(bottom=0)
    bx.set_ylabel(t["dist"])
    bx.set_title(t["title_dist"].format(i=last.index + 1), fontsize=9.5)

    cx = fig.add_subplot(gs[1, 1])
    steps = np.arange(1, dr.exact.shape[0] + 1)
    for key, y in (("bad", dr.inconsistent), ("int8", dr.int8), ("exact", dr.exact)):
        cx.plot(steps, y, color=DRIFT_COLORS[key], label=t[key], gid=key)
    cx.set_yscale("log")
    cx.set_ylim(1e-17, 1e3)
    cx.xaxis.set_major_locator(MaxNLocator(integer=True))
    cx.set_xlabel(t["gen"])
    cx.set_ylabel(t["diff"])
    cx.set_title(t["title_drift"].format(i=dr.request + 1), fontsize=9.5)
    cx.legend(loc="center right", fontsize=7.5)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
