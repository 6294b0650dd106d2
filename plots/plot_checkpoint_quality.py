"""What a compressed checkpoint costs in quality: held-out bits per byte after restores.

Draws ``kda_core.studies.quality.quality_study`` (trained TinyHybrid, held-out passages of the
stdlib-docstring corpus):
  * left: extra bits per byte over an exact restore after k park/restore cycles (k = 1, 4, 16)
    for every format (INT8 per key channel / head / tensor, fp8-e4m3, bf16);
  * right: the same extra bits per byte for INT8 per key channel after 16 cycles and for the
    inconsistent restore (MLA KV at the match, KDA state ``lag`` tokens earlier, no replay).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from kda_core.studies import quality
from plots import style
from words.int8_checkpoint import MSG

NAME = "checkpoint_quality"
# formats are categories (SERIES, as in int8_checkpoint); the inconsistent restore is the cost of
# a skipped replay, so it takes the replay colour
WRONG_COLOR = style.COLORS["replay"]


def compute(quick: bool = False) -> quality.QualityStudy:
    """Six 512-byte passages (quick: one 128-byte passage, restores every 4 bytes)."""
    if quick:
        return quality.quality_study(1, 128, 48, 4, (1, 4, 16), (8, 32))
    return quality.quality_study()


def make_figure(data: quality.QualityStudy, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    source = t("fig_q_source", n=data.passages, scored=data.scored, exact=data.exact_bpb)
    fig = style.new_figure("double", source)
    fig.suptitle(t("fig_q_suptitle"))
    gs = fig.add_gridspec(2, 2, width_ratios=(1.3, 1.0), height_ratios=(1.0, 0.22))
    ad, ab, lg = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[:, 1]), fig.add_subplot(gs[1, 0])
    x = np.arange(len(data.cycles))
    for i, label in enumerate(data.labels):
        color = style.SERIES[i % len(style.SERIES)]
        name = t.word("var", label)
        ad.plot(x, data.delta[i], marker="o", color=color, label=name, gid=f"delta_{i}")
    ad.axhline(0.0, color="black", lw=0.8)
    ad.set_xticks(x, [str(k) for k in data.cycles])
    ad.set_xlabel(t("fig_q_cycles"))
    ad.set_ylabel(t("fig_q_delta"))
    ad.set_title(t("fig_q_title_delta"), loc="center")
    ad.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    # in its own row under the panel (inside it the falling curves ran through the entries)
    lg.axis("off")
    handles, labels = ad.get_legend_handles_labels()
    lg.legend(handles, labels, loc="center", ncols=2, fontsize=7, borderaxespad=0)

    j16 = data.cycles.index(max(data.cycles))
    first = t("fig_q_int8_16", label=t.word("var", data.labels[0]), k=data.cycles[j16])
    names = [first] + [t("fig_q_wrong", lag=g) for g in data.lags]
    vals = [float(data.delta[0, j16])] + list(data.inconsistent_bpb - data.exact_bpb)
    colors = [style.SERIES[0]] + [WRONG_COLOR] * len(data.lags)
    y = np.arange(len(names))
    ab.barh(y, vals, color=colors, height=0.62, gid="bpb")
    for yi, v in zip(y.tolist(), vals):
        at = (max(v, 0.0), yi)
        ab.annotate(
            f"{v:+.4f}", at, xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5
        )
    ab.axvline(0.0, color="black", lw=0.8)
    ab.set_yticks(y, names, fontsize=8)
    ab.invert_yaxis()
    ab.grid(False, axis="y")
    ab.margins(x=0.3)
    ab.set_xlabel(t("fig_q_delta"))
    ab.set_title(t("fig_q_title_bpb"), loc="center")
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
