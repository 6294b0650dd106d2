"""plots/plot_hit_reasons.py draws exactly what kda_core.studies.hit_reasons returns (the file /
determinism / translation / layout checks run for it in tests/test_plots.py and
tests/test_plot_layout.py via SCRIPTS)."""

from __future__ import annotations

import numpy as np
from plot_helpers import figure, quick

from kda_core.studies.hit_reasons import REASONS
from plots import plot_hit_reasons as mod
from plots.__main__ import SCRIPTS


def _segments(fig, gid: str) -> tuple[np.ndarray, np.ndarray]:
    bars = fig.findobj(lambda a: a.get_gid() == gid)
    return np.array([b.get_width() for b in bars]), np.array([b.get_x() for b in bars])


def test_draws_the_study() -> None:
    assert "plot_hit_reasons" in SCRIPTS
    data = quick("plot_hit_reasons")
    assert data.budgets_gib == (None, mod.BUDGET_GIB) and len(data.runs[0].input_len) == 300
    bars, shares = mod.bar_shares(data)
    assert bars == [("sglang", None), ("vllm", None), ("sglang", 8.0), ("vllm", 8.0)]
    req, tok = data.runs[1].share_arrays()
    np.testing.assert_array_equal(shares[0, 2:], req)
    np.testing.assert_array_equal(shares[1, 2:], tok)
    fig = figure("plot_hit_reasons", "zh")
    for m, key in enumerate(("requests", "tokens")):
        left = np.zeros(len(bars))
        for k, name in enumerate(REASONS):
            if not shares[:, :, k].any():
                assert not fig.findobj(lambda a, g=f"{key}_{name}": a.get_gid() == g)
                continue
            width, x = _segments(fig, f"{key}_{name}")
            # barh draws from the top row down: bars are listed in drawing order
            np.testing.assert_allclose(width, shares[m, :, k])
            np.testing.assert_allclose(x, left)
            left += shares[m, :, k]
        np.testing.assert_allclose(left, 1.0)
    # the quick trace's 512-token common prefix is below vLLM's 768-token block
    below = REASONS.index("below_one_block")
    assert shares[0, 1, below] > 0.5 and shares[0, 0, below] == 0
