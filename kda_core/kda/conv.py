"""Short causal depthwise convolution with a carried window (fla `ShortConvolution`).

    y_t[d] = act( sum_{i=0}^{W-1} w[d, i] * x_{t-W+1+i}[d] )

x [T, D] are raw projections (pre-conv, pre-activation); w [D, W] (the last column multiplies the
current token); the window [W-1, D] holds the last W-1 raw inputs, oldest first (zeros before the
sequence starts). The window plus the recurrent state fully determine a KDA layer's continuation.

Left out: a bias (KDA uses none) and fla's [N, D, W] cache layout with its dead oldest slot: the
window here is vLLM's W-1 rows.
"""

from __future__ import annotations

import numpy as np

from kda_core.kda._inputs import check_x_w

ACTIVATIONS = ("silu", "identity")


def silu(x: np.ndarray) -> np.ndarray:
    # x * sigmoid(x), written with tanh so large |x| cannot overflow exp
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


def _check(x, w, window, activation):
    x, w = check_x_w(x, w)
    D, W = w.shape
    if window is None:
        window = np.zeros((W - 1, D))
    else:
        window = np.asarray(window, dtype=np.float64)
        if window.shape != (W - 1, D):
            raise ValueError(f"window must have shape [W-1, D] = {(W - 1, D)}, got {window.shape}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    for name, arr in (("x", x), ("w", w), ("window", window)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite (found NaN or inf)")
    return x, w, window


def short_conv(x, w, window=None, activation: str = "silu") -> tuple[np.ndarray, np.ndarray]:
    """Whole-sequence causal conv. Returns (y [T, D], new_window [W-1, D])."""
    x, w, window = _check(x, w, window, activation)
    W = w.shape[1]
    T = x.shape[0]
    full = np.concatenate([window, x], axis=0)  # [W-1+T, D]
    y = np.zeros_like(x)
    for i in range(W):  # W shifted multiply-adds instead of a per-token loop
        y += full[i : i + T] * w[:, i]
    if activation == "silu":
        y = silu(y)
    return y, full[T:].copy()
