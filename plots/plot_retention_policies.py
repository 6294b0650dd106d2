"""Checkpoint placement and retention policies on a real trace, over the state budget per GPU.

Compares (``kda_core.studies.density.policy_sweep``: the trace-driven simulator, Kimi K3 per GPU
at TP8) the lab's policies — a checkpoint at every block, every 4096 tokens, SGLang (chunk
boundaries + branch points), Marconi (speculative insertion + FLOP-aware eviction), vLLM
(block-aligned) — at four state budgets:
  * state hit rate (restorable prefix / input tokens), against the token hit rate an infinite
    KV cache would get (the ceiling: a token hit is not a state hit);
  * checkpoints stored over the run.
Trace: the first 4,000 requests of the bundled Mooncake conversation trace (see
``plot_checkpoint_density``: the whole trace would not fit the 60 s budget of all figures).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies import density
from plots import style
from plots.plot_checkpoint_density import BUDGETS_GIB, trace
from words import phrases
from words.checkpoint_density import MSG

NAME = "retention_policies"


def compute(quick: bool = False) -> density.PolicySweep:
    """Every default policy at 8 / 32 / 128 GiB and unlimited (20 simulations, ~4 s after the
    density figure, which shares two policies' runs); ``quick``: 400 requests, two budgets."""
    if quick:
        return density.policy_sweep(trace(True), density.DEFAULT_POLICIES, (8.0, None))
    return density.policy_sweep(trace(), density.DEFAULT_POLICIES, BUDGETS_GIB)


def make_figure(data: density.PolicySweep, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    name = phrases.trace_name(data.trace_name, t)
    fig = style.new_figure(
        (style.COLUMN_WIDTH, 4.3), t("fig_ret_source", trace=name, model=data.model)
    )
    fig.suptitle(t("fig_ret_suptitle"))
    gs = fig.add_gridspec(2, 2, height_ratios=(1.0, 0.2))
    ah, ac = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
    lg = fig.add_subplot(gs[1, :])
    x = np.arange(len(data.budget_labels))
    names = [t.word("budget", b) for b in data.budget_labels]
    markers = "osD^vP*X"
    for i, label in enumerate(data.labels):
        kw = {"color": style.SERIES[i], "marker": markers[i % len(markers)], "ms": 4.5, "lw": 1.7}
        ah.plot(x, data.state_hit_rate[i], label=t.word("pol", label), gid=f"hit{i}", **kw)
        ac.plot(x, data.checkpoints_stored[i], gid=f"ck{i}", **kw)
    ideal = {"color": style.COLORS["neutral"], "ls": "--", "lw": 1.3, "gid": "ideal"}
    ah.axhline(data.ideal_token_hit_rate, label=t("fig_ret_ideal"), **ideal)
    ah.yaxis.set_major_formatter(ticker.PercentFormatter(1.0, decimals=0))
    ah.set_ylim(0, None)
    ah.set_ylabel(t("fig_hit"))
    ah.set_title(t("fig_title_hit"))
    ac.set_yscale("log")
    ac.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ac.yaxis.set_minor_locator(ticker.NullLocator())
    style.count_axis(ac.yaxis)
    ac.set_ylabel(t("fig_ret_ck"))
    ac.set_title(t("fig_ret_title_ck"))
    for ax in (ah, ac):
        ax.set_xticks(x, names)
        ax.set_xlabel(t("fig_ret_budget"))
        ax.margins(x=0.08)
    handles, labels = ah.get_legend_handles_labels()
    lg.axis("off")
    lg.legend(handles, labels, loc="center", ncols=3, fontsize=8, borderaxespad=0)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
