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
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kda_core.studies import prefix_replay
from plots import style
from words.catalog import T as Lang
from words.prefix_replay import MSG

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


def _timeline(ax: Axes, sc: prefix_replay.ScenarioResult, t: Lang) -> None:
    """One bar per turn: restore, replay, prefill, decode; the checkpoints it parks and its
    token match; the legend under the panel in a fixed order."""
    n = len(sc.requests)
    seen: set[str] = set()
    for i, req in enumerate(sc.requests):
        tl = req.timeline
        y = n - 1 - i
        for a, b, phase in tl.segments:
            label = None if phase in seen else t(f"fig_{phase}")
            seen.add(phase)
            color = PHASE_COLORS[phase]
            ax.barh(y, b - a, left=a, height=0.5, color=color, label=label, gid=f"turn{i}_{phase}")
        ckpt = {"ms": 5, "color": style.COLORS["checkpoint"], "label": None if i else t("fig_ckpt")}
        ax.plot(tl.checkpoints, [y + 0.36] * len(tl.checkpoints), "v", **ckpt)
        if tl.token_match:
            match = t("fig_match") if i == 1 else None
            ax.plot([tl.token_match] * 2, [y - 0.33, y + 0.33], color="black", lw=1.6, label=match)
        row = t("fig_row", m=tl.token_match, r=tl.restore_at)
        ax.annotate(
            row,
            (tl.decode[1], y),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(n), [t("fig_turn", i=n - k) for k in range(n)])
    ax.set_ylim(-0.6, n - 0.3)
    ax.margins(x=0.0)
    ax.set_xlabel(t("fig_tokens"))
    ax.grid(False, axis="y")
    ax.set_title(t("fig_title_tl", title=t(f"scen_{sc.name}"), k=sc.spacing))
    handles, names = ax.get_legend_handles_labels()
    keys = ("restore", "replay", "prefill", "decode", "ckpt", "match")
    order = [t(f"fig_{k}") for k in keys]
    pairs = sorted(zip(handles, names), key=lambda hn: order.index(hn[1]))
    ax.legend(*zip(*pairs), loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=3, fontsize=8)
    ax.set_xlim(0, sc.requests[-1].timeline.decode[1] * 1.45)


def _replay(bx: Axes, last: prefix_replay.RequestView, t: Lang) -> None:
    """The last turn's replay, token by token: the distance to the uncached state."""
    tr = last.replay_steps
    bx.plot(tr.positions, tr.dist, marker="o", ms=3.5, color=style.COLORS["replay"], gid="dist")
    # positions, not token text: the tokenizer is byte-level (a Chinese character is 3 tokens)
    bx.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 4, 5, 10]))
    bx.set_xlim(tr.positions[0] - 0.5, tr.positions[-1] + 0.5)
    bx.set_xlabel(t("fig_replay_x", r=last.timeline.restore_at, m=last.timeline.token_match))
    bx.set_ylim(bottom=0)
    bx.set_ylabel(t("fig_dist"))
    bx.set_title(t("fig_title_dist", i=last.index + 1), fontsize=9.5)


def _drift(cx: Axes, dr: prefix_replay.DriftStudy, t: Lang) -> None:
    """The last turn's logits against an uncached run, per way of restoring."""
    steps = np.arange(1, dr.exact.shape[0] + 1)
    for key, y in (("bad", dr.inconsistent), ("int8", dr.int8), ("exact", dr.exact)):
        cx.plot(steps, y, color=DRIFT_COLORS[key], label=t(f"fig_{key}"), gid=key)
    cx.set_yscale("log")
    cx.set_ylim(1e-17, 1e3)
    cx.xaxis.set_major_locator(MaxNLocator(integer=True))
    cx.set_xlabel(t("fig_gen"))
    cx.set_ylabel(t("fig_diff"))
    cx.set_title(t("fig_title_drift", i=dr.request + 1), fontsize=9.5)
    cx.legend(loc="center right", fontsize=7.5)


def make_figure(data: Data, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    sc = data.scenario
    fig = style.new_figure("tall", t("fig_source", k=sc.spacing))
    fig.suptitle(t("fig_suptitle"))
    gs = fig.add_gridspec(2, 2, height_ratios=(0.95, 1.0))
    _timeline(fig.add_subplot(gs[0, :]), sc, t)
    _replay(fig.add_subplot(gs[1, 0]), sc.requests[-1], t)
    _drift(fig.add_subplot(gs[1, 1]), data.drift, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
