"""Seeded KDA inputs shared by the test modules (a plain module: two conftest.py files would
shadow each other under pytest's rootdir imports)."""

from __future__ import annotations

import numpy as np


def kda_inputs(rng: np.random.Generator, T: int, H: int = 3, K: int = 8, V: int = 6, g_scale=1.0):
    """Seeded KDA inputs the way fla's tests make them: normalised q/k, logsigmoid gates."""
    from kda_core.kda import l2norm

    q = l2norm(rng.random((T, H, K)))
    k = l2norm(rng.random((T, H, K)))
    v = rng.standard_normal((T, H, V))
    g = -np.logaddexp(0.0, -rng.standard_normal((T, H, K))) * g_scale  # logsigmoid
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((T, H))))
    S0 = rng.standard_normal((H, K, V))
    return q, k, v, g, beta, S0
