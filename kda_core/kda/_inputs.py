"""Argument checks shared by every KDA entry point: dtypes, shapes, ranges, chunk sizes.

float32 inputs stay float32 (everything else computes in float64); one read-only pass proves
the inputs finite. Messages name the argument and the allowed range (tests match on them).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kda_core.kda._threads import reduce_rows

MAX_TOKENS = 1 << 20
MAX_ELEMENTS = 1 << 28  # cap on T*H*max(K, V), i.e. ~2 GiB of float64 per tensor
MAX_SEQS = 1 << 16  # sequences in one packed (varlen) call
SUB = 16  # sub-chunk rows for the pairwise decays (fla's BC)


def check_float(name: str, x: np.ndarray, dtype: np.dtype, finite: bool = True) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(dtype, copy=False)
    if not finite:
        return arr
    # one read-only pass (split over threads for large inputs): a finite sum proves every entry
    # finite; otherwise check exactly (finite entries can still overflow the sum)
    with np.errstate(over="ignore", invalid="ignore"):
        total = sum(reduce_rows(np.sum, arr))
    if not np.isfinite(total) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def _common_dtype(*arrays: object) -> np.dtype:
    dt = np.result_type(*[np.asarray(a) for a in arrays if a is not None])
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


def validate(q, k, v, g, beta, initial_state, scale, *, deferred: bool = False):
    """Every check of the KDA entry points, in a fixed order (the first failure is the error).
    ``deferred=True`` skips the passes over q, k, v and g (their finiteness, and g <= 0):
    `chunked` proves those from what its run measures instead (see `validate_deferred`)."""
    dtype = _common_dtype(q, k, v, g, beta, initial_state)
    names = ["q", "k", "v", "g", "beta"]
    q, k, v, g, beta = (
        check_float(n, x, dtype, not deferred or n == "beta")
        for n, x in zip(names, (q, k, v, g, beta))
    )
    if q.ndim != 3:
        raise ValueError(f"q must have shape [T, H, K], got rank {q.ndim}")
    T, H, K = q.shape
    if T < 1 or T > MAX_TOKENS:
        raise ValueError(f"q: T must be in [1, {MAX_TOKENS}], got {T}")
    if H < 1 or K < 1:
        raise ValueError(f"q must have H >= 1 heads of K >= 1 channels, got {q.shape}")
    if k.shape != (T, H, K):
        raise ValueError(f"k must have shape [T, H, K] = {(T, H, K)}, got {k.shape}")
    if v.ndim != 3 or v.shape[:2] != (T, H):
        raise ValueError(f"v must have shape [T, H, V] with T={T}, H={H}, got {v.shape}")
    V = v.shape[2]
    if V < 1:
        raise ValueError(f"v must have V >= 1 channels, got {v.shape}")
    if T * H * max(K, V) > MAX_ELEMENTS:
        raise ValueError(f"q/v: T*H*max(K, V) must be <= {MAX_ELEMENTS}, got {T * H * max(K, V)}")
    if g.shape != (T, H, K):
        raise ValueError(f"g must have shape [T, H, K] = {(T, H, K)}, got {g.shape}")
    if beta.shape != (T, H):
        raise ValueError(f"beta must have shape [T, H] = {(T, H)}, got {beta.shape}")
    g_max = -np.inf if deferred else np.max(reduce_rows(np.max, g))  # NaN partials stay
    if g_max > 0:
        raise ValueError(f"g is a log decay and must be <= 0, got max {g_max:.3g}")
    if np.any(beta < 0) or np.any(beta > 2):
        raise ValueError(f"beta must be in [0, 2], got range [{beta.min():.3g}, {beta.max():.3g}]")
    if initial_state is None:
        S0 = np.zeros((H, K, V), dtype)
    else:
        S0 = check_float("initial_state", initial_state, dtype)
        if S0.shape != (H, K, V):
            raise ValueError(
                f"initial_state must have shape [H, K, V] = {(H, K, V)}, got {S0.shape}"
            )
    if scale is None:
        scale = K**-0.5
    elif (
        isinstance(scale, (bool, np.bool_))
        or not isinstance(scale, (int, float, np.integer, np.floating))
        or not np.isfinite(scale)
    ):
        raise ValueError(f"scale must be a finite real number, got {scale!r}")
    return q, k, v, g, beta, S0, float(scale)


def validate_deferred(q, k, v, g, beta, initial_state, scale):
    """`validate` without the passes over q, k, v and g; any failure is reported as the full
    check reports it (same message, same order). The caller must call `check_deferred` with
    what its run measured: a NaN or inf in q, k or v always reaches o or S (products with it
    are inf or NaN, and dense products spread NaN; docs/kda.md), and g's max and chunk sums
    show a g that is positive, NaN or infinite."""
    try:
        return validate(q, k, v, g, beta, initial_state, scale, deferred=True)
    except ValueError:
        validate(q, k, v, g, beta, initial_state, scale)  # the first failure of the full check
        raise


def check_deferred(revalidate: Callable[[], object], o, S, seen: Measured) -> None:
    """After a run on deferred-validation inputs (`validate_deferred`, varlen's), with what
    the run measured; ``revalidate`` runs the entry's full check (it raises the first failure
    in the usual order):

    * g: its max is <= 0 (False for NaN), and no chunk's sum of g is -inf or NaN (a -inf in g
      makes its chunk's sum -inf).
    * q, k, v (and varlen's initial states): finite o and S prove them finite.

    Otherwise the full check runs and names the first bad argument. It passes only if finite
    inputs overflowed (a chunk's sum of g, or values inside the run): then the results stand,
    with one RuntimeWarning if o or S is not finite, as they would without the deferral.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        total = seen.o_sum + S.sum()
    g_ok = seen.g_max <= 0 and np.isfinite(seen.least_chunk_sum)
    if g_ok and np.isfinite(total):
        return
    finite = bool(np.all(np.isfinite(o)) and np.all(np.isfinite(S)))
    if g_ok and finite:
        return
    revalidate()
    if not finite:
        warnings.warn("kda.chunked: finite inputs overflowed to NaN or inf", RuntimeWarning, 3)


@dataclass(slots=True)
class Measured:
    """What a `chunked` run measures for `check_deferred`, per head group then combined."""

    g_max: float = -np.inf  # max of g (NaN if g holds one)
    least_chunk_sum: float = np.inf  # least sum of g over a chunk (per head and channel)
    o_sum: float = 0.0  # sum of o

    def add(self, other: Measured) -> Measured:
        # np.maximum / np.minimum keep a NaN (Python's max and min may drop it)
        return Measured(
            float(np.maximum(self.g_max, other.g_max)),
            float(np.minimum(self.least_chunk_sum, other.least_chunk_sum)),
            self.o_sum + other.o_sum,
        )


def effective_chunk(C: int, T: int) -> int:
    """min(C, T), rounded up to whole sub-chunks of 16 (results do not depend on C)."""
    C = min(C, T)
    return C if C <= SUB else -(-C // SUB) * SUB


def check_chunk_size(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if chunk_size < 1 or chunk_size > 1024:
        raise ValueError(f"chunk_size must be in [1, 1024], got {chunk_size}")
    return int(chunk_size)


def validate_map_inputs(k, v, g, beta):
    if np.ndim(k) != 3:
        raise ValueError(f"k must have shape [T, H, K], got rank {np.ndim(k)}")
    T, H, K = np.shape(k)
    q = np.zeros((T, H, K))
    _, k, v, g, beta, _, _ = validate(q, k, v, g, beta, None, 1.0)
    return k, v, g, beta


def check_x_w(x, w) -> tuple[np.ndarray, np.ndarray]:
    """x [T, D] and taps w [D, W >= 1] as float64 (``conv`` and ``conv_varlen``)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] < 1:
        raise ValueError(f"w must have shape [D, W] with W >= 1, got {w.shape}")
    if x.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"x must have shape [T, D] with D={w.shape[0]}, got {x.shape}")
    return x, w


def check_cu_seqlens(cu_seqlens, total: int) -> np.ndarray:
    """int64 offsets ``[N + 1]``: 0 first, non-decreasing, ``total`` last (N in [1, 65536])."""
    cu = np.asarray(cu_seqlens)
    if cu.ndim != 1 or cu.dtype.kind not in "iu":
        raise ValueError(f"cu_seqlens must be a 1-d integer array, got {cu.dtype} rank {cu.ndim}")
    if not 2 <= cu.size <= MAX_SEQS + 1:
        raise ValueError(f"cu_seqlens must hold N + 1 offsets with N in [1, {MAX_SEQS}]")
    cu = cu.astype(np.int64)
    if cu[0] != 0 or cu[-1] != total or np.any(np.diff(cu) < 0):
        raise ValueError(
            f"cu_seqlens must start at 0, never decrease and end at T = {total}, "
            f"got [{cu[0]}, ..., {cu[-1]}]"
        )
    return cu
