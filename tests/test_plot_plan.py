"""plots/plot_plan.py draws exactly what kda_core.studies.plan_trace returns (the file /
determinism / translation / layout checks run for it in tests/test_plots.py and
tests/test_plot_layout.py via SCRIPTS)."""

from __future__ import annotations

import numpy as np
from plot_helpers import figure, quick

from plots import plot_plan as mod
from plots.__main__ import SCRIPTS


def _line(fig, gid: str):
    (line,) = fig.findobj(lambda a: a.get_gid() == gid)
    return np.asarray(line.get_xdata()), np.asarray(line.get_ydata())


def test_draws_the_study() -> None:
    assert "plot_plan" in SCRIPTS
    data = quick("plot_plan")
    assert data.sweep.n_requests == 400 and len(data.ratio) == 14
    fig = figure("plot_plan", "zh")
    for c in (4096, 8192):
        sel = (data.chunk == c) & (data.max_running >= 0)
        x, y = _line(fig, f"points-{c}")
        np.testing.assert_array_equal(x, data.max_running[sel])
        np.testing.assert_array_equal(y, data.cached_tokens[sel])
        x, y = _line(fig, f"ttft-{c}")
        np.testing.assert_array_equal(y, data.ttft_p99_s[sel])
    x, y = _line(fig, "pareto")
    assert sorted(x.tolist()) == sorted(data.max_running[data.on_front].tolist())
    b = data.best
    assert b >= 0 and data.max_running[b] >= mod.MIN_RUNNING
    x, y = _line(fig, "best")
    assert (x[0], y[0]) == (data.max_running[b], data.cached_tokens[b])
    # the recommendation is the most cached tokens among points with >= 16 running
    ok = data.max_running >= mod.MIN_RUNNING
    assert data.cached_tokens[b] == data.cached_tokens[ok].max()
