"""Companion coverage on the Mooncake conversation trace: of the resident KV pages, the share
whose prefix ends on a held state, against the HiCache host size.

Draws ``kda_core.studies.host_coverage.host_coverage`` (Kimi K3 at TP8, 29 MB states per GPU,
SGLang placement, a device budget of 64 states; the host sized as HiCache sizes its mamba host
pool, ``int(ratio x device) + 1`` slots, each holding a request's last state): left, the share
of resident KV pages with a state on the device, the host, or either; right, the state hit rate
the same runs reach.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from matplotlib import ticker
from matplotlib.figure import Figure

from kda_core.studies.host_coverage import HostCoverage, host_coverage
from kda_core.workloads import bundled_trace
from plots import style
from words.trace_hits import MSG

NAME = "kv_page_coverage"
RATIOS = (0, 0.5, 1, 2, 4, 8)


def compute(quick: bool = False) -> HostCoverage:
    """The whole trace (12,031 requests) or its first 300 for tests."""
    trace = bundled_trace("conversation").head(300 if quick else 12031)
    return host_coverage(trace, sizes=RATIOS)


def make_figure(data: HostCoverage, lang: str = "en") -> Figure:
    t = MSG.lang(lang)
    src = t(
        "fig_cov_source",
        n=data.n_requests,
        pages=data.resident_pages,
        d=data.device_states,
        ck=style.format_bytes(data.checkpoint_bytes),
    )
    fig = style.new_figure("double", src)
    fig.suptitle(t("fig_cov_suptitle"))
    ax, bx = fig.subplots(1, 2)
    x = list(range(len(data.sizes)))  # evenly spaced: the ratios double from 0.5 on
    lines = (  # "either" first, under the others: a line it equals stays visible
        (data.any_share, "any", style.COLORS["hit"], "-", 2.4),
        (data.host_share, "host", style.SERIES[0], "--", 1.6),
        (data.device_share, "device", style.COLORS["state"], ":", 1.6),
    )
    for y, key, color, ls, lw in lines:
        ax.plot(x, y, ls, color=color, lw=lw, marker="o", ms=3.5, label=t(f"l_cov_{key}"), gid=key)
    ax.set_title(t("fig_cov_pages"))
    ax.yaxis.set_major_formatter(ticker.PercentFormatter(1.0))  # decimals from the tick step
    ax.legend(loc="upper left", fontsize=8)
    bx.plot(x, data.state_hit_rate, "-", color=style.SERIES[2], marker="o", ms=3.5, gid="hit_rate")
    bx.set_title(t("fig_cov_hit"))
    bx.yaxis.set_major_formatter(ticker.PercentFormatter(1.0))
    for a in (ax, bx):
        a.set_xlabel(t("fig_cov_x"))
        a.set_xticks(x, [f"{s:g}" for s in data.sizes])
        a.set_ylim(bottom=0)
        a.margins(y=0.15)
    return fig


def main(argv: Sequence[str] | None = None) -> list[Path]:
    return style.main_for(sys.modules[__name__], argv)


if __name__ == "__main__":
    main()
