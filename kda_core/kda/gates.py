"""KDA gates and normalisation: fla's l2norm, the Kimi-Linear softplus gate, the K3 lower-bound
gate (a log decay in (lower_bound, 0), so a 16-token sub-chunk decays by at most 16 * |lb|).
"""

from __future__ import annotations

import numpy as np


def l2norm(x, eps: float = 1e-6) -> np.ndarray:
    """x / sqrt(sum(x^2) + eps) over the last axis (fla's in-kernel form)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def _check_head_bias(dt_bias, H: int, K: int) -> np.ndarray:
    b = np.asarray(dt_bias, dtype=np.float64)
    if b.size != H * K:
        raise ValueError(
            f"dt_bias must have H*K = {H * K} elements ([H, K] or [H*K]), got {b.shape}"
        )
    return b.reshape(H, K)


def softplus_gate(f, A_log, dt_bias) -> np.ndarray:
    """Kimi-Linear gate: g = -exp(A_log)[h] * softplus(f + dt_bias). f [T, H, K] -> g [T, H, K]."""
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3:
        raise ValueError(f"f must have shape [T, H, K], got rank {f.ndim}")
    _, H, K = f.shape
    A = np.asarray(A_log, dtype=np.float64)
    if A.shape != (H,):
        raise ValueError(f"A_log must have shape [H] = {(H,)}, got {A.shape}")
    return -np.exp(A)[:, None] * np.logaddexp(0.0, f + _check_head_bias(dt_bias, H, K))


def lowerbound_gate(f, dt_bias, lower_bound: float = -5.0, A_log=None) -> np.ndarray:
    """Kimi K3 "safe" gate: g = lower_bound * sigmoid(exp(A_log)[h] * (f + dt_bias)) in (lb, 0)."""
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3:
        raise ValueError(f"f must have shape [T, H, K], got rank {f.ndim}")
    if not (-50.0 <= lower_bound < 0):
        raise ValueError(f"lower_bound must be in [-50, 0), got {lower_bound}")
    _, H, K = f.shape
    z = f + _check_head_bias(dt_bias, H, K)
    if A_log is not None:
        A = np.asarray(A_log, dtype=np.float64)
        if A.shape != (H,):
            raise ValueError(f"A_log must have shape [H] = {(H,)}, got {A.shape}")
        z = np.exp(A)[:, None] * z
    return lower_bound * (0.5 * (1.0 + np.tanh(0.5 * z)))  # sigmoid without overflow
