"""Context parallelism for KDA: bytes per rank, modelled speed-up, and exactness of the scan.

Four panels (``kda_core.studies.context_parallel.figure_data``):
  * bytes one rank sends over the context length at P = 8: the log-depth and all-gather scans
    are flat (a few [H, K, K + V] maps), a ring all-gather of one MLA layer's KV grows with T;
    the crossover marked;
  * the modelled speed-up of one KDA layer at T = 32k over P (from measured per-step costs);
  * where a rank's time goes at each P (local pass, scan, finish; log-depth);
  * the in-process ranks' outputs against single-rank chunked, per rank (float64).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kda_core.studies import context_parallel as study
from plots import style
from words.catalog import T as Lang
from words.context_parallel import MSG

NAME = "context_parallel"
# categories: the two scans and the KV all-gather they are compared with
SCAN_COLORS = {"logdepth": style.SERIES[0], "allgather": style.SERIES[1]}
KV_COLOR = style.COLORS["kv"]
# phases are another comparison: SERIES colours the scans do not use
PHASE_COLORS = {"local": style.SERIES[4], "scan": style.SERIES[3], "finish": style.SERIES[2]}


def compute(quick: bool = False) -> study.FigureData:
    return study.figure_data(quick=quick)


def _bytes_panel(ax: Axes, b: study.BytesVsContext, t: Lang) -> None:
    for scan in ("logdepth", "allgather"):
        y = np.full(b.T.shape, b.scan_bytes[scan], dtype=float)
        ax.plot(b.T, y, color=SCAN_COLORS[scan], label=t(f"scan_{scan}"), gid=f"bytes_{scan}")
    ax.plot(b.T, b.kv_bytes, color=KV_COLOR, label=t("fig_kv"), gid="bytes_kv")
    cross = b.crossover["logdepth"]
    # a drop line from the crossing down, labelled below the flat scan lines and right of it
    # (a full-height line ran through the legend; a label higher up sat on the KV line)
    at = float(np.interp(np.log2(cross), np.log2(b.T), b.kv_bytes))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi)  # frozen: the drop line below is drawn in axes fraction
    frac = float(np.log(at / lo) / np.log(hi / lo))
    ax.axvline(cross, ymax=frac, color=style.COLORS["neutral"], ls=":", lw=1.1, gid="crossover")
    ax.annotate(
        t("fig_cross", T=cross),
        (cross, 0.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, 3),
        textcoords="offset points",
        fontsize=7.5,
        va="bottom",
        color=style.COLORS["neutral"],
    )
    style.bytes_axis(ax.yaxis, log=True)
    ax.set_xlabel(t("fig_x_b"))
    ax.set_ylabel(t("fig_y_b"))
    ax.set_title(t("fig_title_b", P=b.P), loc="left")
    ax.legend(loc="upper left", fontsize=7)


def _speedup_panel(ax: Axes, m: study.CostModel, t: Lang) -> None:
    ax.plot(m.P, m.P, color=style.COLORS["neutral"], ls="--", lw=1, label=t("l_ideal"))
    for scan in ("logdepth", "allgather"):
        ax.plot(
            m.P,
            m.speedup[scan],
            marker="o",
            ms=3.5,
            color=SCAN_COLORS[scan],
            label=t(f"scan_{scan}"),
            gid=f"speedup_{scan}",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(m.P, [str(p) for p in m.P.tolist()])
    ticks = [1, 2, 4, 8, 16, 32, 64]
    ax.set_yticks(ticks, [str(v) for v in ticks])
    ax.minorticks_off()
    ax.set_xlabel(t("x_P"))
    ax.set_ylabel(t("y_speedup"))
    ax.set_title(t("fig_title_s", T=f"{m.T // 1024}k" if m.T % 1024 == 0 else m.T), loc="left")
    ax.legend(loc="upper left", fontsize=7.5)


def _time_panel(ax: Axes, m: study.CostModel, t: Lang) -> None:
    phases = study.phase_shares(m, "logdepth")
    phases_words = {"local": t("local"), "scan": t("fig_phase_scan"), "finish": t("finish")}
    x = np.arange(m.P.size)
    bottom = np.zeros(m.P.size)
    for name in ("local", "scan", "finish"):
        ax.bar(
            x,
            phases[name],
            bottom=bottom,
            color=PHASE_COLORS[name],
            width=0.7,
            label=phases_words[name],
            gid=f"phase_{name}",
        )
        bottom += phases[name]
    ax.set_xticks(x, [str(p) for p in m.P.tolist()])
    ax.set_ylim(0, 1.3)  # headroom for the legend above the bars
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel(t("x_P"))
    ax.set_ylabel(t("fig_y_t"))
    ax.set_title(t("fig_title_t"), loc="left")
    ax.legend(loc="upper center", ncol=3, fontsize=7, handlelength=1.2, columnspacing=0.8)


def _exact_panel(ax: Axes, d: study.Demo, t: Lang) -> None:
    floor = 1e-18  # rank 0 runs plain chunked: 0 error, drawn at the floor
    ax.bar(
        np.arange(d.P),
        np.maximum(d.o_rel, floor),
        color=SCAN_COLORS[d.scan],
        width=0.7,
        gid="exact",
    )
    ax.axhline(1e-10, color=style.COLORS["neutral"], ls=":", lw=1.1)
    ax.annotate(
        t("bound"),
        (0, 1e-10),
        xycoords=("axes fraction", "data"),
        xytext=(3, 3),
        textcoords="offset points",
        fontsize=7.5,
        color=style.COLORS["neutral"],
    )
    ax.set_yscale("log")
    ax.set_ylim(1e-18, 1e-8)
    ax.set_xticks(np.arange(d.P))
    ax.set_xlabel(t("x_rank"))
    ax.set_ylabel(t("fig_y_e"))
    ax.set_title(t("fig_title_e", P=d.P), loc="left")


def make_figure(data: study.FigureData, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    c = data.model.costs
    dtype = {4: "float32", 8: "float64", 2: "bf16"}.get(c.itemsize, f"{c.itemsize}-byte")
    fig = style.new_figure("grid", t("fig_source", H=c.H, K=c.K, dtype=dtype))
    fig.suptitle(t("fig_suptitle"))
    (a, b), (cc, d) = fig.subplots(2, 2)
    _bytes_panel(a, data.bytes, t)
    _speedup_panel(b, data.model, t)
    _time_panel(cc, data.model, t)
    _exact_panel(d, data.demo, t)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
