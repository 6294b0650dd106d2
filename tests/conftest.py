"""Test-wide settings: offline Gradio, single-threaded BLAS (the tiny model's matmuls are small;
on a busy 2-core machine a multi-threaded BLAS spends more time waking threads than computing)."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


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
