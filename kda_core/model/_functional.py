"""The elementwise pieces of TinyHybrid's forward: RMSNorm and the logistic sigmoid (numpy).

The model's definitions (`kda_core.model.tiny`). The serving loop's batched passes use their
own exp-form logistic and SiLU with fewer temporaries (`kda_core.model._fused`), tested equal to
these to rounding (tests/test_serve_fastpaths.py). SiLU lives with the short convolution
(`kda_core.conv.silu`). Left out: any lower-precision variant.
"""

from __future__ import annotations

import numpy as np


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x**2, last axis) + eps) * w``."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))``, written with tanh so large ``|x|`` cannot overflow ``exp``."""
    t = np.tanh(0.5 * x)
    t += 1.0  # in place: one temporary (the batched serving path calls this per layer)
    t *= 0.5
    return t
