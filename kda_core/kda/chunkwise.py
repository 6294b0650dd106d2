"""Kimi Delta Attention (KDA): the recurrence, its chunkwise (WY/UT) form, gates and affine maps.

Per value head, with alpha_t = exp(g_t) (a K-vector) and a state S of shape [K, V]:

    S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T
    o_t = scale * S_t^T q_t

Decay comes before the delta correction and the read-out sees the current token's write
(flash-linear-attention `naive_recurrent_kda`; see shared/reference/kda-math.md §2).

Shapes: q, k [T, H, K]; v [T, H, V]; g [T, H, K] (log decay, <= 0); beta [T, H];
state [H, K, V]; o [T, H, V]. q and k are used as given (callers L2-normalise them).

`recurrent` is the naive twin every fast path is tested against; `chunked` processes C tokens at
a time with batched matmuls over heads and chunks (WY/UT transform, kda-math.md §6): per slab of
a few chunks it computes every state-independent quantity at once (decayed k-k / q-k scores
factorised per 16-row sub-chunk as fla does, the unit-lower inverse), then carries the state
across the slab's chunks with four small matmuls each. Inputs are never transposed: chunk views
of the [T, H, K] arrays go to BLAS as strided matrices. Left out: grouped value heads (GVA),
varlen batches and the V-first state layout — a single sequence with H = HV is all the lab needs.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

MAX_TOKENS = 1 << 20
MAX_ELEMENTS = 1 << 28  # cap on T*H*max(K, V), i.e. ~2 GiB of float64 per tensor

# `chunked` works through the sequence in slabs of whole chunks holding about this many bytes per
# [tokens, H, K] tensor, so a slab's ~20 intermediates stay in cache between the batched pass
# and the scan (1 MiB measured best on a 2 MiB-L2 machine, ~1.3x faster than one slab).
_SLAB_BYTES = 1 << 20
# The scan cuts its two big products (kq S: 2C x K x V, Kd^T Vn: K x C x V) into row blocks of
# at most this many multiply-adds. OpenBLAS runs a GEMM above ~2^19 of them on all its threads;
# for 128-sized products that costs more than it gains, and on a busy machine the waiting
# threads made `chunked` 1.8x to 40x slower in wall time (load-dependent). Below it BLAS stays
# on the calling thread, and the blocked products were also a little faster single-threaded
# (measured, K = V = 128; OPENBLAS_NUM_THREADS=1 makes the cut irrelevant).
_GEMM_MNK = 1 << 19
# Heads are independent, so `chunked` hands groups of heads to a few threads (numpy releases the
# GIL in BLAS and in ufunc loops): each thread runs the whole slab pipeline on its heads with
# single-threaded BLAS calls (see _GEMM_MNK), instead of OpenBLAS splitting each small GEMM. Only
# above _THREAD_ELEMENTS (T*H*max(K, V)) does that pay for the thread hand-off. KDA_THREADS
# sets the count (default min(2, cores); see _threads).
_THREAD_ELEMENTS = 1 << 18
_SUB = 16  # sub-chunk rows for the pairwise decays (fla's BC)
# Largest decay spread inside one sub-chunk for which its scores are factorised around its first
# row; beyond it the block's pairwise exponents are masked, then exp'd (exact, slower).
_BLOCK_SPREAD = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 80.0}
# Largest decay of a whole chunk (-min gam) for which a slab takes `_intra_smooth`, the scores
# factorised around the chunk start: factors reach exp(+-spread), kept well inside the normal
# range (float32 down to 1e-38, so exp(-60) leaves 11 decades for small entries of k and q).
_CHUNK_SPREAD = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 60.0}


# --------------------------------------------------------------------------------------------
# validation


def _as_float(name: str, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(dtype, copy=False)
    # one read-only pass: a finite sum proves every entry finite; otherwise check exactly
    # (finite entries can still overflow the sum)
    with np.errstate(over="ignore", invalid="ignore"):
        total = arr.sum()
    if not np.isfinite(total) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def _common_dtype(*arrays: object) -> np.dtype:
    dt = np.result_type(*[np.asarray(a) for a in arrays if a is not None])
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


def _validate(q, k, v, g, beta, initial_state, scale):
    dtype = _common_dtype(q, k, v, g, beta, initial_state)
    q, k, v, g, beta = (
        _as_float(n, x, dtype) for n, x in zip(["q", "k", "v", "g", "beta"], (q, k, v, g, beta))
    )
    if q.ndim != 3:
        raise ValueError(f"q must have shape [T, H, K], got rank {q.ndim}")
    T, H, K = q.shape
    if T < 1 or T > MAX_TOKENS:
        raise ValueError(f"q: T must be in [1, {MAX_TOKENS}], got {T}")
    if k.shape != (T, H, K):
        raise ValueError(f"k must have shape [T, H, K] = {(T, H, K)}, got {k.shape}")
    if v.ndim != 3 or v.shape[:2] != (T, H):
        raise ValueError(f"v must have shape [T, H, V] with T={T}, H={H}, got {v.shape}")
    V = v.shape[2]
    if T * H * max(K, V) > MAX_ELEMENTS:
        raise ValueError(f"q/v: T*H*max(K, V) must be <= {MAX_ELEMENTS}, got {T * H * max(K, V)}")
    if g.shape != (T, H, K):
        raise ValueError(f"g must have shape [T, H, K] = {(T, H, K)}, got {g.shape}")
    if beta.shape != (T, H):
        raise ValueError(f"beta must have shape [T, H] = {(T, H)}, got {beta.shape}")
    if g.max() > 0:
        raise ValueError(f"g is a log decay and must be <= 0, got max {g.max():.3g}")
    if np.any(beta < 0) or np.any(beta > 2):
        raise ValueError(f"beta must be in [0, 2], got range [{beta.min():.3g}, {beta.max():.3g}]")
    if initial_state is None:
        S0 = np.zeros((H, K, V), dtype)
    else:
        S0 = _as_float("initial_state", initial_state, dtype)
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


# --------------------------------------------------------------------------------------------
# token recurrence (the naive twin)


def step(S, q, k, v, g, beta, *, scale=None):
    """One token, all heads: S [H, K, V]; q, k, g [H, K]; v [H, V]; beta [H] -> (o [H, V], S')."""
    q, k, v, g, beta = (np.asarray(x)[None] for x in (q, k, v, g, beta))
    o, S_new = recurrent(q, k, v, g, beta, scale=scale, initial_state=S)
    return o[0], S_new


def recurrent(q, k, v, g, beta, *, scale=None, initial_state=None):
    """Token-by-token KDA (fla `naive_recurrent_kda`). Returns (o [T, H, V], S [H, K, V])."""
    q, k, v, g, beta, S, scale = _validate(q, k, v, g, beta, initial_state, scale)
    S = S.copy()
    alpha = np.exp(g)
    o = np.empty(v.shape, S.dtype)
    for t in range(q.shape[0]):
        S *= alpha[t][:, :, None]  # decay rows (key channels) first
        kS = np.matmul(k[t][:, None, :], S)[:, 0, :]  # [H, V] = S^T k
        u = beta[t][:, None] * (v[t] - kS)  # delta-rule error on the decayed state
        S += k[t][:, :, None] * u[:, None, :]  # rank-1 write
        o[t] = np.matmul(q[t][:, None, :], S)[:, 0, :] * scale  # read-out after the write
    return o, S


# --------------------------------------------------------------------------------------------
# chunkwise form
#
# Memory layout: every [T, H, *] input is only reshaped to token-major chunks [N, C, H, *] (no
# transpose copy) and elementwise results keep that layout; matmuls take head-major *views*
# [N, H, C, *] (`_heads`), which BLAS reads with a row stride of H*K, and write into such views
# (the output o included). Only the small [N, H, C, C] score matrices are head-major.


@dataclass(slots=True)
class _Intra:
    """Per-chunk quantities of one slab that do not depend on the incoming state."""

    KQ: np.ndarray  # [N, 2C, H, K]  rows 0..C: k * exp(Gam); rows C..2C: scale * q * exp(Gam)
    Tb: np.ndarray  # [N, H, C, C]   (I + L)^-1 Diag(beta), the UT transform
    V: np.ndarray  # [N, C, H, V]    the values, token-major (a view of the input)
    Aqk: np.ndarray  # [N, H, C, C]  causal q-k scores with decay (diagonal included), scaled
    Kd: np.ndarray  # [N, C, H, K]   k * exp(gam - Gam), token-major like the input
    decay: np.ndarray  # [N, H, K]   exp(gam), the chunk's total decay


def _chunk_rows(x: np.ndarray, C: int) -> np.ndarray:
    """[T, H, *] -> [N, C, H, *], a free reshape; zero padded (a copy) only if C does not divide
    T. Zero k, v, g, beta rows leave the state unchanged and their outputs are dropped."""
    T = x.shape[0]
    N = -(-T // C)
    if N * C != T:
        x = np.concatenate([x, np.zeros((N * C - T,) + x.shape[1:], x.dtype)], axis=0)
    return x.reshape((N, C) + x.shape[1:])


def _heads(x: np.ndarray) -> np.ndarray:
    """[N, C, H, *] -> [N, H, C, *] as a view: numpy hands strided rows to BLAS without a copy."""
    return np.swapaxes(x, 1, 2)


def _chunk_cumsum(g: np.ndarray) -> np.ndarray:
    """Inclusive cumsum over each chunk's C axis, g [N, C, H, K] -> Gam (decreasing along C).

    C row additions over [N, H, K] slabs: np.cumsum on a middle axis is ~10x slower here, and a
    lower-triangular matmul does C/2 times the arithmetic."""
    Gam = np.empty_like(g)
    Gam[:, 0] = g[:, 0]
    for i in range(1, g.shape[1]):
        np.add(Gam[:, i - 1], g[:, i], out=Gam[:, i])
    return Gam


@functools.lru_cache(maxsize=16)
def _tril_masks(C: int) -> tuple[np.ndarray, np.ndarray]:
    """Strictly lower and lower (diagonal included) boolean masks [C, C], shared read-only."""
    masks = np.tril(np.ones((C, C), bool), -1), np.tril(np.ones((C, C), bool))
    for m in masks:
        m.flags.writeable = False
    return masks


def _unit_lower_inverse(L: np.ndarray) -> np.ndarray:
    """(I + L)^-1 for strictly lower triangular L [..., C, C] (C a multiple of the sub-chunk).

    Forward substitution row by row inside each 16-row diagonal block (all blocks at once), then
    block rows merged with matmuls: T_ab = -T_aa sum_c L_ac T_cb, as fla's kernels do.
    """
    C = L.shape[-1]
    B = min(C, _SUB)
    nb = C // B
    Lb = np.stack([L[..., i * B : (i + 1) * B, i * B : (i + 1) * B] for i in range(nb)], axis=-3)
    eye = np.eye(B, dtype=L.dtype)
    Tb = np.zeros_like(Lb)  # [..., nb, B, B]
    Tb[..., 0, 0] = 1.0
    for i in range(1, B):
        Tb[..., i, : i + 1] = (
            eye[i, : i + 1] - np.matmul(Lb[..., i : i + 1, :i], Tb[..., :i, : i + 1])[..., 0, :]
        )
    Ti = np.zeros_like(L)
    Ti[..., :B, :B] = Tb[..., 0, :, :]
    for a in range(1, nb):
        s = a * B
        Ti[..., s : s + B, s : s + B] = Tb[..., a, :, :]
        Ti[..., s : s + B, :s] = -np.matmul(
            Tb[..., a, :, :], np.matmul(L[..., s : s + B, :s], Ti[..., :s, :s])
        )
    return Ti


def _intra_chunk(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    g: np.ndarray,
    beta: np.ndarray,
    scale: float,
    C: int,
) -> _Intra:
    """Everything independent of the incoming state, for all chunks of a slab and all heads at
    once; q, k, v, g, beta are the slab's [T, H, *] rows (zero padded to whole chunks here).

    Decayed scores P[i, j] = sum_c x[i,c] k[j,c] exp(Gam[i,c] - Gam[j,c]) (x = k or q) are
    factorised per sub-chunk of B = 16 rows with the sub-chunk's first row as reference r (fla's
    scheme): rows x_i exp(Gam_i - r) <= 1, columns k_j exp(r - Gam_j) <= 1 left of the
    sub-chunk and <= exp(spread) inside it. That is bounded while the sub-chunk's decay spread
    stays below _BLOCK_SPREAD (always for K3's lower-bound gate: 15 * 5 = 75); a sub-chunk beyond
    it gets its diagonal block from masked exponents and its chunk's columns from exponents
    <= 0, both exact. The same factors give k exp(Gam), q exp(Gam) and k exp(gam - Gam) with one
    small per-sub-chunk multiply each, so the big arrays see exp once.
    """
    q, k, v, g = (_chunk_rows(x, C) for x in (q, k, v, g))  # [N, C, H, *]
    beta = _heads(_chunk_rows(beta, C))  # [N, H, C] view
    Gam = _chunk_cumsum(g)  # [N, C, H, K]
    gam = Gam[:, -1]  # [N, H, K]
    if -gam.min() <= _CHUNK_SPREAD[k.dtype]:
        return _intra_smooth(q, k, v, beta, Gam, scale)
    N, _, H, K = k.shape
    dtype = k.dtype
    B = min(C, _SUB)
    nb = C // B
    sub = (N, nb, B, H, K)  # token-major, C split into sub-chunks
    refs = Gam.reshape(sub)[:, :, :1]  # [N, nb, 1, H, K] first row of every sub-chunk
    E = Gam.reshape(sub) - refs  # in [-spread, 0]
    spread = -E[:, :, -1].min(axis=(-2, -1))  # [N, nb]
    wild = spread > _BLOCK_SPREAD[dtype]  # sub-chunks whose factors may over/underflow
    np.exp(E, out=E)
    X = np.empty((N, nb, 2, B, H, K), dtype)  # per sub-chunk: k rows, then q rows, scaled by E
    np.multiply(k.reshape(sub), E, out=X[:, :, 0])
    np.multiply(q.reshape(sub), E, out=X[:, :, 1])
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # wild sub-chunks only
        kn = np.divide(k.reshape(sub), E, out=E)  # k exp(r - Gam), own sub-chunk's reference
    P = _decayed_scores(X.reshape(N, nb, 2 * B, H, K), kn, refs, k, q, Gam, wild)

    lower, causal = (m.reshape(nb, B, C) for m in _tril_masks(C))
    L = np.zeros((N, H, C, C), dtype)  # Diag(beta) (strictly lower k-k scores)
    np.multiply(
        P[:, :, :, :B], beta.reshape(N, H, nb, B, 1), out=L.reshape(N, H, nb, B, C), where=lower
    )
    Aqk = np.zeros((N, H, C, C), dtype)
    np.multiply(P[:, :, :, B:], scale, out=Aqk.reshape(N, H, nb, B, C), where=causal)
    Tb = _unit_lower_inverse(L)  # the UT transform
    Tb *= beta[:, :, None, :]  # (I + L)^-1 Diag(beta), scaled on the small C x C side

    er = np.exp(refs)  # [N, nb, 1, H, K], the factor X misses
    KQ = np.empty((N, 2, nb, B, H, K), dtype)  # token-major [N, 2C, H, K]
    np.multiply(X[:, :, 0], er, out=KQ[:, 0])  # k exp(Gam)
    np.multiply(X[:, :, 1], er * scale, out=KQ[:, 1])  # Qg
    Kd = kn  # k exp(r - Gam) exp(gam - r), in place
    with np.errstate(invalid="ignore"):  # inf * 0 only in the wild chunks fixed below
        Kd *= np.exp(gam[:, None, None] - refs)
    for n in np.flatnonzero(wild.any(axis=1)):  # where k exp(r - Gam) may have overflowed
        Kd[n] = k[n].reshape(nb, B, H, K) * np.exp(gam[n] - Gam[n]).reshape(nb, B, H, K)
    KQ = KQ.reshape(N, 2 * C, H, K)
    return _Intra(KQ=KQ, Tb=Tb, V=v, Aqk=Aqk, Kd=Kd.reshape(N, C, H, K), decay=np.exp(gam))


def _intra_smooth(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, beta: np.ndarray, Gam: np.ndarray, scale: float
) -> _Intra:
    """`_intra_chunk` for a slab whose chunks all decay by at most _CHUNK_SPREAD: the scores
    factorised around each chunk's start, P = (x exp(Gam)) (k exp(-Gam))^T, with both factors
    in [exp(-spread), exp(spread)] |x|, so one [2C, K] x [K, C] product per chunk and head and
    five elementwise passes (the sub-chunk path needs about ten). Gam is overwritten."""
    N, C, H, K = k.shape
    eG = np.exp(Gam, out=Gam)  # in [exp(-spread), 1]
    KQ = np.empty((N, 2, C, H, K), k.dtype)  # token-major [N, 2C, H, K]
    np.multiply(k, eG, out=KQ[:, 0])  # k exp(Gam)
    np.multiply(q, eG, out=KQ[:, 1])
    KQ[:, 1] *= scale  # Qg
    decay = eG[:, -1].copy()  # exp(gam)
    # k exp(-Gam) <= exp(spread) |k|, stored as [N, H, K, C]: BLAS reads it much faster as a
    # row-major right operand here and as the left one of Kd^T Vn in the scan than transposed
    knT = np.empty((N, H, K, C), k.dtype)
    np.divide(k, eG, out=knT.transpose(0, 3, 1, 2))
    KQ = KQ.reshape(N, 2 * C, H, K)
    r = _block_rows(2 * C, C * K)
    P = np.empty((N, H, 2 * C // r, r, C), k.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # right of the diagonal is unused
        np.matmul(_heads(KQ).reshape(P.shape[:-1] + (K,)), knT[:, :, None], out=P)
    P = P.reshape(N, H, 2 * C, C)
    lower, causal = _tril_masks(C)
    L = np.zeros((N, H, C, C), k.dtype)  # Diag(beta) (strictly lower k-k scores)
    np.multiply(P[:, :, :C], beta[..., None], out=L, where=lower)
    Aqk = np.zeros((N, H, C, C), k.dtype)  # scaled through Qg
    np.copyto(Aqk, P[:, :, C:], where=causal)
    Tb = _unit_lower_inverse(L)
    Tb *= beta[:, :, None, :]
    knT *= decay[..., None]  # k exp(gam - Gam)
    return _Intra(KQ=KQ, Tb=Tb, V=v, Aqk=Aqk, Kd=knT.transpose(0, 3, 1, 2), decay=decay)


def _decayed_scores(
    X: np.ndarray,
    kn: np.ndarray,
    refs: np.ndarray,
    k: np.ndarray,
    q: np.ndarray,
    Gam: np.ndarray,
    wild: np.ndarray,
) -> np.ndarray:
    """Per row sub-chunk a, the k-k and q-k scores against columns 0..(a+1)B (see _intra_chunk).

    X [N, nb, 2B, H, K] rows scaled by exp(Gam_i - r_a); kn [N, nb, B, H, K] columns scaled by
    exp(r_b - Gam_j), moved to reference r_a by the per-channel factor exp(r_a - r_b) <= 1 (a
    multiply, no exp on big arrays). Returns P [N, H, nb, 2B, C]: rows 0..B k-k, rows B..2B q-k
    (unscaled); entries right of the diagonal are garbage or unset. k, q, Gam [N, C, H, K] for
    the exact fallbacks; wild [N, nb] marks sub-chunks beyond _BLOCK_SPREAD.
    """
    N, nb, B2, H, K = X.shape
    B = B2 // 2
    C = nb * B
    P = np.empty((N, H, nb, 2 * B, C), X.dtype)
    causal = _tril_masks(B)[1][:, :, None, None]
    for a in range(nb):
        s, w = a * B, (a + 1) * B
        if a == 0:
            right = kn[:, 0]  # [N, B, H, K]
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # inf * 0 only where fixed below
                right = (kn[:, : a + 1] * np.exp(refs[:, a : a + 1] - refs[:, : a + 1])).reshape(
                    N, w, H, K
                )
            for n in np.flatnonzero(wild[:, :a].any(axis=1)):  # exp(r_a - Gam_j) <= 1 directly
                right[n, :s] = k[n, :s] * np.exp(refs[n, a] - Gam[n, :s])
        with np.errstate(over="ignore", invalid="ignore"):  # garbage right of the diagonal
            np.matmul(_heads(X[:, a]), right.transpose(0, 2, 3, 1), out=P[:, :, a, :, :w])
        for n in np.flatnonzero(wild[:, a]):  # diagonal block from masked exponents
            G = Gam[n, s:w]  # [B, H, K]
            E = np.exp(np.where(causal, G[:, None] - G[None, :], -np.inf))  # [B, B, H, K]
            kb = k[n, s:w]
            P[n, :, a, :B, s:w] = np.einsum("ihk,jhk,ijhk->hij", kb, kb, E)
            P[n, :, a, B:, s:w] = np.einsum("ihk,jhk,ijhk->hij", q[n, s:w], kb, E)
    return P


def _scan(it: _Intra, S: np.ndarray, o: np.ndarray) -> np.ndarray:
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
    rq = _block_rows(C2, K * V)  # rows per block of kq S
    rk = _block_rows(K, C * V)  # state rows per block of Kd^T Vn
    R = np.empty((H, C2 // rq, rq, V), S.dtype)
    Rf = R.reshape(H, C2, V)
    Y = np.empty((H, C, V), S.dtype)
    Vn = np.empty((H, C, V), S.dtype)
    KV = np.empty((H, K // rk, rk, V), S.dtype)
    for n in range(N):
        kq = np.swapaxes(it.KQ[n], 0, 1).reshape(H, C2 // rq, rq, K)
        np.matmul(kq, S[:, None], out=R)  # kg S0 and Qg S0 in one product
        np.subtract(np.swapaxes(it.V[n], 0, 1), Rf[:, :C], out=Y)
        np.matmul(it.Tb[n], Y, out=Vn)
        on = np.swapaxes(o[n], 0, 1)  # [H, C, V] view of the output rows
        np.matmul(it.Aqk[n], Vn, out=on)
        on += Rf[:, C:]
        kd = it.Kd[n].transpose(1, 2, 0).reshape(H, K // rk, rk, C)  # Kd^T
        np.matmul(kd, Vn[:, None], out=KV)
        S *= it.decay[n][:, :, None]
        S += KV.reshape(H, K, V)
    return S


def _block_rows(rows: int, per_row: int) -> int:
    """Largest divisor of `rows` with at most _GEMM_MNK / per_row rows, but >= 16 if possible."""
    r = min(rows, max(16, _GEMM_MNK // per_row))
    while rows % r:
        r -= 1
    return r


def chunked(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64):
    """Chunkwise KDA (WY/UT transform, fla `chunk_kda`). Any T; the last chunk may be ragged.

    Tokens are processed in slabs of whole chunks: everything independent of the incoming state
    is computed for all chunks of a slab in one batched pass (`_intra_chunk`), then `_scan`
    carries the state across them with four matmuls per chunk while the slab is still in cache.
    Intermediates scale with the slab, not with T; only the output o is [T, H, V]. Large inputs
    split their heads over a few threads (see _THREAD_ELEMENTS); every head's arithmetic is the
    same either way.
    """
    C = _check_chunk_size(chunk_size)
    q, k, v, g, beta, S, scale = _validate(q, k, v, g, beta, initial_state, scale)
    T, H, K = q.shape
    V = v.shape[2]
    C = _effective_chunk(C, T)
    N = -(-T // C)
    o = np.empty((N, C, H, V), S.dtype)
    S = S.copy()
    groups = _head_groups(H, T * H * max(K, V))
    if len(groups) == 1:
        _chunked_heads(q, k, v, g, beta, scale, C, S, o)
    else:
        pool = _pool(len(groups))
        jobs = [
            pool.submit(
                _chunked_heads,
                q[:, h],
                k[:, h],
                v[:, h],
                g[:, h],
                beta[:, h],
                scale,
                C,
                S[h],
                o[:, :, h],
            )
            for h in groups
        ]
        for job in jobs:
            job.result()  # re-raises a worker's exception
    return o.reshape(N * C, H, -1)[:T], S


def _chunked_heads(q, k, v, g, beta, scale: float, C: int, S: np.ndarray, o: np.ndarray) -> None:
    """The slab pipeline on (a group of) heads: S [h, K, V] and o [N, C, h, V] are written in
    place (views of the caller's arrays)."""
    T, H, K = q.shape
    rows = C * max(1, _SLAB_BYTES // (C * H * max(K, v.shape[2]) * S.dtype.itemsize))
    for t0 in range(0, T, rows):
        t = slice(t0, t0 + rows)
        it = _intra_chunk(q[t], k[t], v[t], g[t], beta[t], scale, C)
        _scan(it, S, o[t0 // C : t0 // C + it.Tb.shape[0]])


def _threads() -> int:
    """KDA_THREADS if set (1-64), else min(2, cores). Two threads measured 1.6x one thread's
    fraction of the 2-thread GEMM peak in one run (bench_kda --quick, load 1.4); only inputs
    above _THREAD_ELEMENTS use them, so tests and small calls stay on the calling thread."""
    env = os.environ.get("KDA_THREADS", "")
    if env.strip().isdigit() and int(env) >= 1:
        return min(int(env), 64)
    return min(2, os.cpu_count() or 1)


def _head_groups(H: int, elements: int) -> list[slice]:
    """Contiguous head ranges, one per thread (a single range for small inputs)."""
    n = min(H, _threads()) if elements >= _THREAD_ELEMENTS else 1
    edges = [H * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _pool(workers: int) -> ThreadPoolExecutor:
    # keyed by process: a pool inherited through fork has no live threads in the child
    return _pool_of(os.getpid(), workers)


@functools.lru_cache(maxsize=4)
def _pool_of(pid: int, workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kda-chunked")


def chunked_flops(T: int, H: int, K: int, V: int, chunk_size: int = 64) -> int:
    """Nominal matmul FLOPs (2 per multiply-add) of the chunkwise algorithm, for the
    fraction-of-peak benchmark: full C x C score blocks, Wm = Tb kg and U = Tb v formed per chunk.
    `chunked` itself does ~15% less at C=64 (only the lower score blocks; Tb applied once to
    v - kg S0 in the scan), so this count is the yardstick, not a measurement."""
    C = _effective_chunk(chunk_size, T)
    N = -(-T // C)
    intra = 2 * (2 * C) * C * K + (2 * C**3) // 3 + 2 * C * C * (K + V)  # KK|QK, inverse, WY
    inter = 3 * (2 * C * K * V) + 2 * C * C * V  # Wm S, Qg S, Kd^T Vn; Aqk Vn
    return H * N * (intra + inter)


def _effective_chunk(C: int, T: int) -> int:
    """min(C, T), rounded up to whole sub-chunks of 16 (results do not depend on C)."""
    C = min(C, T)
    return C if C <= _SUB else -(-C // _SUB) * _SUB


def _check_chunk_size(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if chunk_size < 1 or chunk_size > 1024:
        raise ValueError(f"chunk_size must be in [1, 1024], got {chunk_size}")
    return int(chunk_size)


# --------------------------------------------------------------------------------------------
# gates and normalisation


def l2norm(x, eps: float = 1e-6) -> np.ndarray:
    """x / sqrt(sum(x^2) + eps) over the last axis (fla's in-kernel form)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def _head_bias(dt_bias, H: int, K: int) -> np.ndarray:
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
    return -np.exp(A)[:, None] * np.logaddexp(0.0, f + _head_bias(dt_bias, H, K))


def lowerbound_gate(f, dt_bias, lower_bound: float = -5.0, A_log=None) -> np.ndarray:
    """Kimi K3 "safe" gate: g = lower_bound * sigmoid(exp(A_log)[h] * (f + dt_bias)) in (lb, 0)."""
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3:
        raise ValueError(f"f must have shape [T, H, K], got rank {f.ndim}")
    if not (-50.0 <= lower_bound < 0):
        raise ValueError(f"lower_bound must be in [-50, 0), got {lower_bound}")
    _, H, K = f.shape
    z = f + _head_bias(dt_bias, H, K)
    if A_log is not None:
        A = np.asarray(A_log, dtype=np.float64)
        if A.shape != (H,):
            raise ValueError(f"A_log must have shape [H] = {(H,)}, got {A.shape}")
        z = np.exp(A)[:, None] * z
    return lower_bound * (0.5 * (1.0 + np.tanh(0.5 * z)))  # sigmoid without overflow


# --------------------------------------------------------------------------------------------
# affine maps: S_end = M S_start + b


@dataclass(slots=True)
class AffineMap:
    """The state map of a token segment, per head: S -> M S + b with M [H, K, K], b [H, K, V].

    Composition is associative (any grouping of segments gives the same map) but not
    commutative (segments applied in another order give another map).
    """

    M: np.ndarray
    b: np.ndarray

    def apply(self, S) -> np.ndarray:
        S = np.asarray(S, dtype=self.b.dtype)
        if S.shape != self.b.shape:
            raise ValueError(f"S must have shape [H, K, V] = {self.b.shape}, got {S.shape}")
        return np.matmul(self.M, S) + self.b

    def then(self, later: AffineMap) -> AffineMap:
        """Apply self first, then `later`: (M2 M1, M2 b1 + b2)."""
        if later.M.shape != self.M.shape or later.b.shape != self.b.shape:
            raise ValueError(
                f"later must have M {self.M.shape} and b {self.b.shape}, "
                f"got {later.M.shape} and {later.b.shape}"
            )
        return AffineMap(np.matmul(later.M, self.M), np.matmul(later.M, self.b) + later.b)

    @staticmethod
    def identity(H: int, K: int, V: int) -> AffineMap:
        return AffineMap(np.broadcast_to(np.eye(K), (H, K, K)).copy(), np.zeros((H, K, V)))


def _validate_map_inputs(k, v, g, beta):
    if np.ndim(k) != 3:
        raise ValueError(f"k must have shape [T, H, K], got rank {np.ndim(k)}")
    T, H, K = np.shape(k)
    q = np.zeros((T, H, K))
    _, k, v, g, beta, _, _ = _validate(q, k, v, g, beta, None, 1.0)
    return k, v, g, beta


def token_maps(k, v, g, beta) -> list[AffineMap]:
    """One AffineMap per token: M_t = (I - beta k k^T) Diag(alpha), b_t = beta k v^T."""
    k, v, g, beta = _validate_map_inputs(k, v, g, beta)
    maps = []
    for t in range(k.shape[0]):
        a = np.exp(g[t])  # [H, K]
        bk = beta[t][:, None] * k[t]  # [H, K]
        M = np.einsum("hi,ij->hij", a, np.eye(k.shape[2])) - bk[:, :, None] * (k[t] * a)[:, None]
        maps.append(AffineMap(M, bk[:, :, None] * v[t][:, None, :]))
    return maps


def segment_map_naive(k, v, g, beta) -> AffineMap:
    """Compose the per-token maps one by one (the twin of `segment_map`)."""
    maps = token_maps(k, v, g, beta)
    out = maps[0]
    for m in maps[1:]:
        out = out.then(m)
    return out


def segment_map(k, v, g, beta, *, chunk_size: int = 64) -> AffineMap:
    """Closed-form map of a whole segment: per chunk M = Diag(exp(gam)) - Kd^T Wm, b = Kd^T U."""
    C = _check_chunk_size(chunk_size)
    k, v, g, beta = _validate_map_inputs(k, v, g, beta)
    T, H, K = k.shape
    C = _effective_chunk(C, T)
    it = _intra_chunk(np.zeros_like(k), k, v, g, beta, 1.0, C)
    KdT = it.Kd.transpose(0, 2, 3, 1)  # [N, H, K, C]
    Wm = np.matmul(it.Tb, _heads(it.KQ[:, :C]))  # (I + L)^-1 Diag(beta) k exp(Gam)
    M = np.einsum("nhk,kj->nhkj", it.decay, np.eye(K)) - np.matmul(KdT, Wm)
    b = np.matmul(KdT, np.matmul(it.Tb, _heads(it.V)))
    out = AffineMap(M[0], b[0])
    for n in range(1, M.shape[0]):
        out = out.then(AffineMap(M[n], b[n]))
    return out
