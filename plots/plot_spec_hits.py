"""Speculative decoding and the prefix cache: what a resent prompt still hits in vLLM 0.33.

Cached tokens of the resend over the prompt length (``kda_core.studies.spec_hits``, vLLM's block
for Kimi K3 at TP8), with no drafts, with drafts and lookahead block hashes (the default) and
with drafts and the trailing-block drop (``disable_lookahead_block_hashes``): EAGLE with 3
drafts (left) and multi-module MTP with 3 drafts (right). SGLang 0.5.23 caches the same with
drafts as without (the study's SGLang columns).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import spec_hits
from plots import style
from words.catalog import T as Lang
from words.speculative_replay import MSG

NAME = "spec_hits"
K = 3
METHODS = (("eagle", 1), ("mtp", K))  # (method, n_predict): one EAGLE head, K MTP modules


@dataclass(frozen=True)
class SpecHitsFigure:
    """Per method: the study with lookahead hashes and with the drop."""

    lookahead: tuple[spec_hits.SpecHits, ...]
    drop: tuple[spec_hits.SpecHits, ...]


def _flags(method: str, n_predict: int, drop: bool) -> dict:
    return {
        "method": method,
        "num_speculative_tokens": K,
        "n_predict": n_predict,
        "disable_lookahead_block_hashes": drop,
    }


def compute(quick: bool = False) -> SpecHitsFigure:
    """Lengths around the first 4 blocks (quick), else every 64 tokens up to 3,072 and 1 and
    ``K`` past each of the first 4 blocks of 768 tokens (where the lines step)."""
    steps = {b * 768 + d for b in (1, 2, 3, 4) for d in (1, K)}
    lens = None if quick else sorted({*range(64, 3073, 64), *steps})
    runs = {
        drop: tuple(
            spec_hits.spec_hits(lens, speculative_config=_flags(m, n, drop)) for m, n in METHODS
        )
        for drop in (False, True)
    }
    return SpecHitsFigure(runs[False], runs[True])


def _panel(ax: Axes, on: spec_hits.SpecHits, drop: spec_hits.SpecHits, t: Lang, i: int) -> None:
    x = on.prompt_len
    series = (
        (on.vllm_no_drafts, "fig_hits_off", style.SERIES[0], "-", "off"),
        (on.vllm, "fig_hits_on", style.SERIES[1], "--", "on"),
        (drop.vllm, "fig_hits_drop", style.SERIES[2], ":", "drop"),
    )
    for y, key, color, ls, gid in series:
        ax.step(x, y, where="post", color=color, ls=ls, lw=1.8, label=t(key), gid=f"{gid}_{i}")
    style.count_axis(ax.yaxis)
    style.count_axis(ax.xaxis)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(t("fig_hits_x"))
    cfg = on.speculative_config
    ax.set_title(t("fig_hits_panel", method=cfg["method"], k=cfg["num_speculative_tokens"]))


def make_figure(data: SpecHitsFigure, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    fig = style.new_figure("double", t("fig_hits_source", U=data.lookahead[0].block_size))
    fig.suptitle(t("fig_hits_suptitle"))
    axes = fig.subplots(1, len(METHODS), sharey=True)
    for i, (ax, on, drop) in enumerate(zip(axes, data.lookahead, data.drop, strict=True)):
        _panel(ax, on, drop, t, i)
    axes[0].set_ylabel(t("fig_hits_y"))
    axes[0].legend(loc="upper left", fontsize=7)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
