"""Chunkwise KDA (WY/UT transform, fla `chunk_kda`): `chunked` and its FLOP yardstick.

Tokens go in slabs of whole chunks: `intra` computes every state-independent quantity of a slab
at once, then `_scan` carries the state across its chunks with four small matmuls each while
the slab is still in cache. Large inputs split their heads over threads (every available core
by default, KDA_THREADS to choose); a head's arithmetic is the same either way. Left out:
grouped value heads (GVA) and the V-first state layout. Design, measurements and sources:
docs/kda.md.
"""

from __future__ import annotations

import functools

import numpy as np

from kda_core.kda._inputs import (
    Measured,
    check_chunk_size,
    check_deferred,
    effective_chunk,
    validate,
    validate_deferred,
)
from kda_core.kda._intra import Intra, block_rows, intra_chunk
from kda_core.kda._threads import for_each, kda_threads

# `chunked` works through the sequence in slabs of whole chunks holding about this many bytes per
# [tokens, H, K] tensor, so a slab's ~20 intermediates stay in cache between the batched pass
# and the scan (1 MiB measured best on a 2 MiB-L2 machine, ~1.3x faster than one slab).
_SLAB_BYTES = 1 << 20

# Heads are independent, so `chunked` hands groups of heads to a few threads (numpy releases the
# GIL in BLAS and in ufunc loops): each thread runs the whole slab pipeline on its heads with
# single-threaded BLAS calls (see _GEMM_MNK), instead of OpenBLAS splitting each small GEMM. Only
# above _THREAD_ELEMENTS (T*H*max(K, V)) does that pay for the thread hand-off. The count is
# threads.kda_threads(): every available core unless KDA_THREADS says otherwise.
_THREAD_ELEMENTS = 1 << 18
# ... and only while every group keeps at least this many state elements (heads * K * V): with
# small heads each numpy call is a few microseconds and two threads mostly pass the GIL back
# and forth (measured: H = 4, K = V = 32 at T = 8192 ran 1.2x slower on two threads than a loop
# of single-thread calls; H = 8, K = V = 128 scales).
_GROUP_STATE = 1 << 14  # one 128 x 128 head


def _scan(it: Intra, S: np.ndarray, o: np.ndarray) -> np.ndarray:
    """The sequential part, chunk by chunk (all heads at once), writing o [N, C, H, V] in place.

    Per chunk with incoming state S0, kg = k exp(Gam) and Qg = scale q exp(Gam):
        Vn = Tb (v - kg S0)            pseudo-values: each token's actual rank-1 write
        O  = Qg S0 + Aqk Vn
        S1 = Diag(exp(gam)) S0 + Kd^T Vn
    Applying Tb here (C x C x V) instead of forming Wm = Tb kg and U = Tb v up front saves one
    C x C x K product per chunk. Buffers are reused and products written in place: this loop
    is about half the run time, nearly all of it in BLAS (see _GEMM_MNK for the row blocks).
    """
    N, C2, H, K = it.KQ.shape
    C = C2 // 2
    V = S.shape[-1]
    rq = block_rows(C2, K * V)  # rows per block of kq S
    rk = block_rows(K, C * V)  # state rows per block of Kd^T Vn
    R = np.empty((H, C2 // rq, rq, V), S.dtype)
    Rf = R.reshape(H, C2, V)
    Rk, Rq = Rf[:, :C], Rf[:, C:]
    Y = np.empty((H, C, V), S.dtype)
    Vn = np.empty((H, C, V), S.dtype)
    Vn4 = Vn[:, None]
    KV = np.empty((H, K // rk, rk, V), S.dtype)
    KVf = KV.reshape(H, K, V)
    S4 = S[:, None]
    # every per-chunk operand as one view of the slab, so the loop indexes it once: on head
    # threads each Python-level step is a chance to wait for (and bounce) the GIL
    kqs = np.swapaxes(it.KQ, 1, 2).reshape(N, H, C2 // rq, rq, K)
    vs = np.swapaxes(it.V, 1, 2)
    kds = it.Kd.transpose(0, 2, 3, 1).reshape(N, H, K // rk, rk, C)  # Kd^T
    decays = it.decay[..., None]
    os_ = np.swapaxes(o, 1, 2)  # [N, H, C, V] view of the output rows
    Tb, Aqk = it.Tb, it.Aqk
    for n in range(N):
        np.matmul(kqs[n], S4, out=R)  # kg S0 and Qg S0 in one product
        np.subtract(vs[n], Rk, out=Y)
        np.matmul(Tb[n], Y, out=Vn)
        on = os_[n]
        np.matmul(Aqk[n], Vn, out=on)
        on += Rq
        np.matmul(kds[n], Vn4, out=KV)
        S *= decays[n]
        S += KVf
    return S


def chunked(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64):
    """Chunkwise KDA (WY/UT transform, fla `chunk_kda`). Any T; the last chunk may be ragged.

    Tokens are processed in slabs of whole chunks: everything independent of the incoming state
    is computed for all chunks of a slab in one batched pass (`intra_chunk`), then `_scan`
    carries the state across them with four matmuls per chunk while the slab is still in cache.
    Intermediates scale with the slab, not with T; only the output o is [T, H, V]. Large inputs
    split their heads over a few threads (see _THREAD_ELEMENTS); every head's arithmetic is the
    same either way.
    """
    C = check_chunk_size(chunk_size)
    args = (q, k, v, g, beta, initial_state, scale)
    # the passes over q, k, v and g happen inside the run, on its threads, while each slab is
    # in cache: q, k and v are proven finite from o and S, g from its max and chunk sums
    q, k, v, g, beta, S, scale = validate_deferred(*args)
    o, S, seen = _run(q, k, v, g, beta, S, scale, C, measure=True)
    check_deferred(lambda: validate(*args), o, S, seen)
    return o, S


def _chunked(q, k, v, g, beta, S, scale: float, C: int) -> tuple[np.ndarray, np.ndarray]:
    """`chunked` after validation, for callers that validated once (varlen, context
    parallelism): float arrays of one dtype, S [H, K, V] (not written), C >= 1."""
    o, S, _ = _run(q, k, v, g, beta, S, scale, C, measure=False)
    return o, S


def _run(q, k, v, g, beta, S, scale: float, C: int, measure: bool):
    """(o, S, what the run measured for `check_deferred`, or None unless ``measure``)."""
    T, H, K = q.shape
    assert S.dtype == q.dtype == v.dtype and S.shape == (H, K, v.shape[2]), "unvalidated input"
    V = v.shape[2]
    C = effective_chunk(C, T)
    N = -(-T // C)
    o = np.empty((N, C, H, V), S.dtype)
    S = S.copy()

    # one job per head group, on the pool when there are several (a head's arithmetic is the
    # same either way); the jobs write their heads of S and o in place
    def job(h: slice) -> Measured | None:
        return _chunked_heads(
            q[:, h], k[:, h], v[:, h], g[:, h], beta[:, h], scale, C, S[h], o[:, :, h], measure
        )

    seen = for_each(_head_groups(T, H, K, V), job)
    total = functools.reduce(Measured.add, seen) if measure else None
    return o.reshape(N * C, H, -1)[:T], S, total


def _chunked_heads(
    q, k, v, g, beta, scale: float, C: int, S: np.ndarray, o: np.ndarray, measure: bool
) -> Measured | None:
    """The slab pipeline on (a group of) heads: S [h, K, V] and o [N, C, h, V] are written in
    place (views of the caller's arrays). With ``measure``, also g's max, its least chunk sum
    and o's sum, each slab's while it is in cache."""
    T, H, K = q.shape
    rows = C * max(1, _SLAB_BYTES // (C * H * max(K, v.shape[2]) * S.dtype.itemsize))
    seen = Measured()
    # silent here (a thread's own errstate): a non-finite q, k or v flows through to o and S,
    # where check_deferred names it, or warns once if finite inputs overflowed
    with np.errstate(over="ignore", invalid="ignore"):
        for t0 in range(0, T, rows):
            t = slice(t0, t0 + rows)
            it = intra_chunk(q[t], k[t], v[t], g[t], beta[t], scale, C)
            os_ = o[t0 // C : t0 // C + it.Tb.shape[0]]
            _scan(it, S, os_)
            if measure:
                seen = seen.add(Measured(it.g_max, it.least_gam, float(os_.sum())))
    return seen if measure else None


def _head_groups(T: int, H: int, K: int, V: int) -> list[slice]:
    """Contiguous head ranges, one per thread (a single range for small inputs or heads)."""
    n = min(H, kda_threads()) if T * H * max(K, V) >= _THREAD_ELEMENTS else 1
    while n > 1 and (H // n) * K * V < _GROUP_STATE:
        n -= 1
    edges = [H * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def chunked_flops(T: int, H: int, K: int, V: int, chunk_size: int = 64) -> int:
    """Nominal matmul FLOPs (2 per multiply-add) of the chunkwise algorithm, for the
    fraction-of-peak benchmark: full C x C score blocks, Wm = Tb kg and U = Tb v formed per chunk.
    `chunked` itself does ~15% less at C=64 (only the lower score blocks; Tb applied once to
    v - kg S0 in the scan), so this count is the yardstick, not a measurement."""
    C = effective_chunk(chunk_size, T)
    N = -(-T // C)
    intra = 2 * (2 * C) * C * K + (2 * C**3) // 3 + 2 * C * C * (K + V)  # KK|QK, inverse, WY
    inter = 3 * (2 * C * K * V) + 2 * C * C * V  # Wm S, Qg S, Kd^T Vn; Aqk Vn
    return H * N * (intra + inter)
