"""Varlen (packed) short conv: many sequences in one call, each with its own conv window.

* ``short_conv_varlen`` - ``conv.short_conv`` with one window per sequence: each window is laid
  in front of its rows, then W shifted gathers with multiply-adds.
* ``_conv_packed`` / ``_conv_step`` - the same without validation (the serving runner's calls;
  one token per window for an all-decode step).
* the twin, ``conv.short_conv`` per sequence, is in tests/test_varlen.py.

Offsets follow ``_inputs.check_cu_seqlens`` (fla / flash-attn's ``cu_seqlens``). Left out:
float32 paths (float64 only, like the model).
"""

from __future__ import annotations

import numpy as np

from kda_core.kda._inputs import check_cu_seqlens, check_x_w
from kda_core.kda.conv import ACTIVATIONS, silu

__all__ = ["short_conv_varlen"]


def _check_conv_args(x, w, cu_seqlens, windows, activation):
    x, w = check_x_w(x, w)
    D, W = w.shape
    cu = check_cu_seqlens(cu_seqlens, x.shape[0])
    N = cu.size - 1
    if windows is None:
        win = np.zeros((N, W - 1, D))
    else:
        win = np.asarray(windows, dtype=np.float64)
        if win.shape != (N, W - 1, D):
            raise ValueError(
                f"windows must have shape [N, W-1, D] = {(N, W - 1, D)}, got {win.shape}"
            )
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    for name, arr in (("x", x), ("w", w), ("windows", win)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite (found NaN or inf)")
    return x, w, cu, win


def short_conv_varlen(
    x, w, cu_seqlens, windows=None, activation: str = "silu"
) -> tuple[np.ndarray, np.ndarray]:
    """Packed causal conv: x [T, D], w [D, W], cu_seqlens [N + 1], windows [N, W-1, D] (oldest
    first; zeros if None). Returns (y [T, D], new windows [N, W-1, D]).

    Each sequence's window is laid in front of its rows (``full``: N*(W-1) + T rows), then W
    shifted gathers with multiply-adds, as ``short_conv`` does for one sequence."""
    x, w, cu, win = _check_conv_args(x, w, cu_seqlens, windows, activation)
    return _conv_packed(x, w, cu, win, activation)


def _conv_step(x: np.ndarray, w: np.ndarray, win: np.ndarray, activation: str):
    """One token per window, no validation (the runner's decode path): x [N, D], win
    [N, W-1, D] -> (y [N, D], new windows)."""
    W = w.shape[1]
    y = x * w[:, W - 1]
    for i in range(W - 1):  # tap i multiplies the window row i (oldest first)
        y += win[:, i] * w[:, i]
    new = np.concatenate([win[:, 1:], x[:, None]], axis=1)
    return (silu(y) if activation == "silu" else y), new


def _conv_packed(x, w, cu, win, activation: str):
    """``short_conv_varlen`` after validation (the runner calls it directly)."""
    D, W = w.shape
    N, T = cu.size - 1, x.shape[0]
    lens = np.diff(cu)
    if N == T and W > 1 and np.all(lens == 1):  # all decodes: one token per window
        return _conv_step(x, w, win, activation)
    seq_of = np.repeat(np.arange(N), lens)
    # row of token t in `full`: its packed index + (W-1) rows of window per sequence up to it
    at = np.arange(T) + (W - 1) * (seq_of + 1)
    starts = cu[:-1] + (W - 1) * np.arange(N)  # where each sequence's window begins in full
    full = np.empty((T + N * (W - 1), D))
    full[at] = x
    if W > 1:
        wrows = (starts[:, None] + np.arange(W - 1)).reshape(-1)
        full[wrows] = win.reshape(-1, D)
    y = np.zeros((T, D))
    for i in range(W):  # tap i reads the row W-1-i before the token
        y += full[at - (W - 1 - i)] * w[:, i]
    if activation == "silu":
        y = silu(y)
    # new window: the last W-1 rows of each sequence's [window, x] block
    ends = starts + (W - 1) + lens  # one past each block
    new = full[(ends[:, None] - (W - 1) + np.arange(W - 1)).reshape(-1)]
    return y, new.reshape(N, W - 1, D)
