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


def step(S, q, k, v, g, beta, *, scale=None):
    """One token, all heads: S [H, K, V]; q, k, g [H, K]; v [H, V]; beta [H] -> (o [H, V], S'):
    ``kda.recurrent`` on a one-token sequence (the decode step the twins loop over)."""
    from kda_core.kda import recurrent

    q, k, v, g, beta = (np.asarray(x)[None] for x in (q, k, v, g, beta))
    o, S_new = recurrent(q, k, v, g, beta, scale=scale, initial_state=S)
    return o[0], S_new


def conv_naive(x, w, window=None, activation: str = "silu"):
    """Token-by-token twin of ``short_conv``: roll the window, dot with w (fla's decode
    kernel, with its dead oldest slot). x [T, D], w [D, W], window [W-1, D] or None."""
    from kda_core.kda.conv import silu

    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    window = np.zeros((w.shape[1] - 1, w.shape[0])) if window is None else window
    buf = np.concatenate([np.zeros((1, w.shape[0])), window], axis=0)  # [W, D], dead slot 0
    y = np.empty_like(x)
    for t in range(x.shape[0]):
        buf = np.roll(buf, -1, axis=0)
        buf[-1] = x[t]
        acc = np.sum(buf * w.T, axis=0)
        y[t] = silu(acc) if activation == "silu" else acc
    return y, buf[1:].copy()
