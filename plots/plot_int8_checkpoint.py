"""INT8 checkpoints: the error of parking a real KDA state, and how it propagates while decoding.

Compares (``kda_core.studies.int8.int8_study``, TinyHybrid on the default bilingual text):
  * the signed error of one (layer, head) state after an INT8 round trip with one scale per key
    channel (SGLang's layout);
  * how many checkpoints fit 8 GiB per GPU for Kimi K3 at TP8, native bf16 vs each format;
  * decoding on after the restore (teacher-forced): the state's distance to an exact run and the
    max logit difference, when the state is quantized once at parking ("park once", one rounding
    per hit) vs re-quantized after every decode step ("every step").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import MaxNLocator

from kda_core.studies import int8
from plots import style
from words.catalog import T as Lang
from words.int8_checkpoint import MSG

NAME = "int8_checkpoint"
# Park once vs every step is a comparison, not a concept: the first two SERIES colours, in this
# order (palette rule; the int8 app should draw the same two).
ONCE_COLOR, EVERY_COLOR = style.SERIES[0], style.SERIES[1]


def compute(quick: bool = False) -> int8.Int8Study:
    """Park 64 tokens of the default text, INT8 per key channel, decode 32 steps (8 if quick)."""
    return int8.int8_study(n_tokens=64, steps=8 if quick else 32, budget_gib=8.0, tp=8)


def _error_map(top: SubFigure, ae: Axes, e: int8.ErrorMap, t: Lang) -> None:
    """The signed round-trip error of one (layer, head) state."""
    im = ae.imshow(
        e.error, cmap="RdBu_r", norm=CenteredNorm(), interpolation="nearest", gid="error"
    )
    label = t.word("var", e.label)
    ae.set_title(t("fig_title_err", label=label, layer=e.layer, head=e.head), loc="center")
    ae.set_xlabel(t("x_value"))
    ae.set_ylabel(t("y_key"))
    ae.grid(False)
    cb = top.colorbar(im, ax=ae, shrink=0.9, pad=0.02)
    cb.formatter.set_powerlimits((-2, 2))
    cb.set_label(t("fig_cbar"), fontsize=8.5)
    cb.ax.tick_params(labelsize=8)


def _capacity(ac: Axes, cap: int8.Capacity, t: Lang) -> None:
    """Checkpoints that fit the budget per format (every bar counts checkpoint slots: the
    concept colour; the format is on the y axis), each with its gain over native."""
    native = t("fig_native", dtype=cap.native_dtype)
    labels = [native if x == "native" else t.word("var", x) for x in cap.labels]
    y = np.arange(len(labels))
    ac.barh(y, cap.capacity, color=style.COLORS["checkpoint"], height=0.62, gid="capacity")
    ac.set_yticks(y, labels, fontsize=8)
    ac.invert_yaxis()
    ac.grid(False, axis="y")
    for yi, c, g in zip(y.tolist(), cap.capacity.tolist(), cap.gain.tolist()):
        text = f"{c:,}  ({g:.2f}×)"
        ac.annotate(
            text, (c, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5
        )
    ac.margins(x=0.45)
    ac.xaxis.set_major_locator(MaxNLocator(3))
    ac.set_xlabel(t("l_fit"))
    budget = style.format_bytes(cap.budget_bytes)
    ac.set_title(t("fig_title_cap", budget=budget, tp=cap.tp), loc="center")


def _divergence(axes: tuple[Axes, Axes], d: int8.Divergence, t: Lang) -> None:
    """State distance and logit difference to an exact run, park once vs every step; an x
    where the greedy token differs."""
    a_s, al = axes
    panels = (
        (a_s, "state", d.park_once_state_dist, d.every_step_state_dist, None, None),
        (
            al,
            "logit",
            d.park_once_logit_diff,
            d.every_step_logit_diff,
            d.park_once_agree,
            d.every_step_agree,
        ),
    )
    titles = {"state": ("y_dist", "fig_title_state"), "logit": ("fig_logit_y", "fig_title_logit")}
    for ax, kind, once, every, once_ok, every_ok in panels:
        ax.plot(d.steps, once, color=ONCE_COLOR, label=t("fig_once"), gid=f"{kind}_once")
        ax.plot(d.steps, every, color=EVERY_COLOR, label=t("fig_every"), gid=f"{kind}_every")
        if once_ok is not None:
            for vals, ok in ((once, once_ok), (every, every_ok)):
                if (~ok).any():
                    ax.plot(d.steps[~ok], vals[~ok], "x", color="black", ms=6, label=t("fig_flip"))
        ylabel, title = titles[kind]
        ax.set_xlabel(t("fig_steps"))
        ax.set_ylabel(t(ylabel))
        ax.set_title(t(title), loc="center")
        ax.set_ylim(bottom=0)
        ax.set_xlim(d.steps[0], d.steps[-1])


def make_figure(data: int8.Int8Study, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    fig = style.new_figure((style.COLUMN_WIDTH, 6.6), t("fig_source", n=data.n_tokens))
    fig.suptitle(t("fig_suptitle"))
    top, bottom = fig.subfigures(2, 1, height_ratios=(1.0, 1.0))
    ae, ac = top.subplots(1, 2, width_ratios=(1.0, 1.05))
    a_s, al = bottom.subplots(1, 2)
    _error_map(top, ae, data.errors, t)
    _capacity(ac, data.memory_k3, t)
    _divergence((a_s, al), data.divergence, t)
    handles, names = al.get_legend_handles_labels()
    bottom.legend(handles, names, loc="outside lower center", ncols=len(names))
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
