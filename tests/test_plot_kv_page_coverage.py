"""plots/plot_kv_page_coverage.py draws exactly what kda_core.studies.host_coverage returns (the
file / determinism / translation / layout checks run for it in tests/test_plots.py and
tests/test_plot_layout.py via SCRIPTS)."""

from __future__ import annotations

import numpy as np
from plot_helpers import figure, quick

from plots import plot_kv_page_coverage as mod
from plots.__main__ import SCRIPTS


def _ys(fig, gid: str) -> np.ndarray:
    (line,) = fig.findobj(lambda a: a.get_gid() == gid)
    return np.asarray(line.get_ydata())


def test_draws_the_study() -> None:
    assert "plot_kv_page_coverage" in SCRIPTS
    data = quick("plot_kv_page_coverage")
    assert data.n_requests == 300 and data.sizes.tolist() == list(mod.RATIOS)
    fig = figure("plot_kv_page_coverage", "zh")
    np.testing.assert_array_equal(_ys(fig, "device"), data.device_share)
    np.testing.assert_array_equal(_ys(fig, "host"), data.host_share)
    np.testing.assert_array_equal(_ys(fig, "any"), data.any_share)
    np.testing.assert_array_equal(_ys(fig, "hit_rate"), data.state_hit_rate)
    # no host: nothing on it; the device ends full whatever the host: its 64 states
    assert data.host_share[0] == 0 and data.host_states[0] == 0
    np.testing.assert_allclose(data.device_share * data.resident_pages, 64)
    # HiCache's host pool: int(ratio x 64) + 1 slots
    assert data.host_states.tolist() == [0, 33, 65, 129, 257, 513]
