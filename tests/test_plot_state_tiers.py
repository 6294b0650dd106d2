"""plots/plot_state_tiers.py draws exactly what kda_core.studies.transfer.tier_rates returns
(the file / determinism / translation checks run for it in tests/test_plots.py via SCRIPTS)."""

from __future__ import annotations

import numpy as np

from plots import plot_state_tiers as mod
from plots import style
from plots.__main__ import SCRIPTS


def _heights(fig, gid: str) -> np.ndarray:
    return np.array([p.get_height() for p in fig.findobj(lambda a: a.get_gid() == gid)])


def test_draws_the_study():
    assert "plot_state_tiers" in SCRIPTS
    data = mod.compute(quick=True)
    with style.rc(40, "en"):
        fig = mod.make_figure(data)
    np.testing.assert_array_equal(_heights(fig, "hit_rate"), data.state_hit_rate)
    np.testing.assert_array_equal(_heights(fig, "ttft_mean"), data.ttft_mean_s)
    np.testing.assert_array_equal(_heights(fig, "ttft_p95"), data.ttft_p95_s)
    np.testing.assert_array_equal(_heights(fig, "from_host"), data.bytes_loaded[:, 0])
    np.testing.assert_array_equal(_heights(fig, "from_remote"), data.bytes_loaded[:, 1])
    assert data.n_requests == 300 and data.setups[0] == "device"
    assert data.state_hit_rate[0] <= data.state_hit_rate[2]
