"""The state-independent half of chunkwise KDA: per chunk the decayed k-k / q-k scores, the UT
transform (I + L)^-1 Diag(beta) and the decayed k, q, computed for all chunks of a slab at once.

Two paths, both exact: `_intra_smooth` factorises a whole chunk's scores around its start when
the chunk decays by at most _CHUNK_SPREAD; otherwise `intra_chunk` factorises per 16-row
sub-chunk (fla's scheme) with masked exponents where a sub-chunk exceeds _BLOCK_SPREAD.
Derivation and bounds: docs/kda.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from kda_core.kda._inputs import SUB

# The scan cuts its two big products (kq S: 2C x K x V, Kd^T Vn: K x C x V) into row blocks of
# at most this many multiply-adds. OpenBLAS runs a GEMM above ~2^19 of them on all its threads;
# for 128-sized products that costs more than it gains, and on a busy machine the waiting
# threads made `chunked` 1.8x to 40x slower in wall time (load-dependent). Below it BLAS stays
# on the calling thread, and the blocked products were also a little faster single-threaded
# (measured, K = V = 128; OPENBLAS_NUM_THREADS=1 makes the cut irrelevant).
_GEMM_MNK = 1 << 19

# Largest decay spread inside one sub-chunk for which its scores are factorised around its first
# row; beyond it the block's pairwise exponents are masked, then exp'd (exact, slower).
_BLOCK_SPREAD = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 80.0}

# Largest decay of a whole chunk (-min gam) for which a slab takes `_intra_smooth`, the scores
# factorised around the chunk start: factors reach exp(+-spread), kept well inside the normal
# range (float32 down to 1e-38, so exp(-60) leaves 11 decades for small entries of k and q).
_CHUNK_SPREAD = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 60.0}


# Memory layout: every [T, H, *] input is only reshaped to token-major chunks [N, C, H, *] (no
# transpose copy) and elementwise results keep that layout; matmuls take head-major *views*
# [N, H, C, *] (`heads`), which BLAS reads with a row stride of H*K, and write into such views
# (the output o included). Only the small [N, H, C, C] score matrices are head-major.


@dataclass(slots=True)
class Intra:
    """Per-chunk quantities of one slab that do not depend on the incoming state."""

    KQ: np.ndarray  # [N, 2C, H, K]  rows 0..C: k * exp(Gam); rows C..2C: scale * q * exp(Gam)
    Tb: np.ndarray  # [N, H, C, C]   (I + L)^-1 Diag(beta), the UT transform
    V: np.ndarray  # [N, C, H, V]    the values, token-major (a view of the input)
    Aqk: np.ndarray  # [N, H, C, C]  causal q-k scores with decay (diagonal included), scaled
    Kd: np.ndarray  # [N, C, H, K]   k * exp(gam - Gam), token-major like the input
    decay: np.ndarray  # [N, H, K]   exp(gam), the chunk's total decay
    least_gam: float  # min of gam, the chunks' sums of g (-inf or NaN if g holds one)
    g_max: float  # max of the slab's g (NaN if g holds one), read while the cumsum left it in cache


def _chunk_rows(x: np.ndarray, C: int) -> np.ndarray:
    """[T, H, *] -> [N, C, H, *], a free reshape; zero padded (a copy) only if C does not divide
    T. Zero k, v, g, beta rows leave the state unchanged and their outputs are dropped."""
    T = x.shape[0]
    N = -(-T // C)
    if N * C != T:
        x = np.concatenate([x, np.zeros((N * C - T,) + x.shape[1:], x.dtype)], axis=0)
    return x.reshape((N, C) + x.shape[1:])


def heads(x: np.ndarray) -> np.ndarray:
    """[N, C, H, *] -> [N, H, C, *] as a view: numpy hands strided rows to BLAS without a copy."""
    return np.swapaxes(x, 1, 2)


def _chunk_cumsum(g: np.ndarray) -> np.ndarray:
    """Inclusive cumsum over each chunk's C axis, g [N, C, H, K] -> Gam (decreasing along C).

    Two levels: a batched product with the lower-triangular ones matrix inside each 16-row
    sub-chunk (column blocks below OpenBLAS's threading threshold), then each sub-chunk's
    carry, the sum of the sub-chunks before it (one small product), added to its rows. Three
    calls instead of C - 1 tiny row additions, which on two head threads mostly passed the GIL
    back and forth (measured: the whole `chunked` 11% faster in wall time), and a quarter of
    the multiply-adds of one C x C product at C = 64. np.cumsum on a middle axis is ~4x slower
    still. Its twin is `_chunk_cumsum_naive`."""
    N, C, H, K = g.shape
    B = SUB if C % SUB == 0 else C
    nb = C // B
    b = block_rows(H * K, B * B)
    Gam = np.empty(g.shape, g.dtype)  # C order whatever g's: out= below must be a view of it
    blocks = (N * nb, B, H * K // b, b)
    np.matmul(
        _ones_lower(B, g.dtype),
        g.reshape(blocks).transpose(0, 2, 1, 3),
        out=Gam.reshape(blocks).transpose(0, 2, 1, 3),
    )
    if nb > 1:
        sub = Gam.reshape(N, nb, B, H * K)
        carry = np.matmul(_ones_lower(nb - 1, g.dtype), sub[:, :-1, -1])  # [N, nb-1, HK]
        sub[:, 1:] += carry[:, :, None]
    return Gam


def _chunk_cumsum_naive(g: np.ndarray) -> np.ndarray:
    """The twin: C row additions over [N, H, K] slabs."""
    Gam = np.empty_like(g)
    Gam[:, 0] = g[:, 0]
    for i in range(1, g.shape[1]):
        np.add(Gam[:, i - 1], g[:, i], out=Gam[:, i])
    return Gam


@functools.lru_cache(maxsize=16)
def _ones_lower(C: int, dtype: np.dtype) -> np.ndarray:
    """The [C, C] lower-triangular ones matrix (diagonal included), shared read-only."""
    m = np.tril(np.ones((C, C), dtype))
    m.flags.writeable = False
    return m


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
    B = min(C, SUB)
    nb = C // B
    Ln = np.negative(L)  # -L once: every product below then writes its result in place
    if nb == 1:  # one block (chunks of <= 16 rows: the packed prefill's): substitute in place
        Ti = np.zeros_like(L)
        diag = np.arange(C)
        Ti[..., diag, diag] = 1.0
        for i in range(1, C):
            np.matmul(Ln[..., i : i + 1, :i], Ti[..., :i, :i], out=Ti[..., i : i + 1, :i])
        return Ti
    Lb = np.stack([Ln[..., i * B : (i + 1) * B, i * B : (i + 1) * B] for i in range(nb)], axis=-3)
    Tb = np.zeros_like(Lb)  # [..., nb, B, B]
    diag = np.arange(B)
    Tb[..., diag, diag] = 1.0
    # row i: T[i, :i] = -L[i, :i] T[:i, :i] (one call per row: few numpy calls matter on head
    # threads, where each call is a chance to wait for the GIL)
    for i in range(1, B):
        np.matmul(Lb[..., i : i + 1, :i], Tb[..., :i, :i], out=Tb[..., i : i + 1, :i])
    Ti = np.zeros_like(L)
    Ti[..., :B, :B] = Tb[..., 0, :, :]
    for a in range(1, nb):
        s = a * B
        Ti[..., s : s + B, s : s + B] = Tb[..., a, :, :]
        np.matmul(
            Tb[..., a, :, :],
            np.matmul(Ln[..., s : s + B, :s], Ti[..., :s, :s]),
            out=Ti[..., s : s + B, :s],
        )
    return Ti


def intra_chunk(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    g: np.ndarray,
    beta: np.ndarray,
    scale: float,
    C: int,
) -> Intra:
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
    beta = heads(_chunk_rows(beta, C))  # [N, H, C] view
    Gam = _chunk_cumsum(g)  # [N, C, H, K]
    gam = Gam[:, -1]  # [N, H, K]
    seen = float(gam.min()), float(g.max())  # for chunked's deferred checks of g
    if -seen[0] <= _CHUNK_SPREAD[k.dtype]:
        return _intra_smooth(q, k, v, beta, Gam, scale, seen)
    N, _, H, K = k.shape
    dtype = k.dtype
    B = min(C, SUB)
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
    return Intra(
        KQ=KQ,
        Tb=Tb,
        V=v,
        Aqk=Aqk,
        Kd=Kd.reshape(N, C, H, K),
        decay=np.exp(gam),
        least_gam=seen[0],
        g_max=seen[1],
    )


def _intra_smooth(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    beta: np.ndarray,
    Gam: np.ndarray,
    scale: float,
    seen: tuple[float, float],
) -> Intra:
    """`intra_chunk` for a slab whose chunks all decay by at most _CHUNK_SPREAD: the scores
    factorised around each chunk's start, P = (x exp(Gam)) (k exp(-Gam))^T, with both factors
    in [exp(-spread), exp(spread)] |x|, so one [2C, K] x [K, C] product per chunk and head and
    five elementwise passes (the sub-chunk path needs about ten). Gam is overwritten."""
    N, C, H, K = k.shape
    eG = np.exp(Gam, out=Gam)  # in [exp(-spread), 1]
    KQ = np.empty((N, 2, C, H, K), k.dtype)  # token-major [N, 2C, H, K]
    np.multiply(k, eG, out=KQ[:, 0])  # k exp(Gam)
    np.multiply(q, eG, out=KQ[:, 1])
    if scale != 1.0:  # (the packed prefill folds the scale into q's norm: no pass here)
        KQ[:, 1] *= scale  # Qg
    decay = eG[:, -1].copy()  # exp(gam)
    # k exp(-Gam) <= exp(spread) |k|, stored as [N, H, K, C] for BLAS: handed a transposed view
    # instead, OpenBLAS ran these products on all its threads (measured: its worker burned as
    # much CPU as the caller); dividing straight into the strided layout is ~2x slower than
    # this contiguous divide plus one copy
    kn = np.divide(k, eG, out=eG)  # eG is not needed after this: its buffer is reused
    knT = np.empty((N, H, K, C), k.dtype)
    np.copyto(knT, kn.transpose(0, 2, 3, 1))
    KQ = KQ.reshape(N, 2 * C, H, K)
    L, Aqk = _smooth_scores(heads(KQ).reshape(N, H, 2, C, K), knT, beta)
    Tb = _unit_lower_inverse(L)
    Tb *= beta[:, :, None, :]
    knT *= decay[..., None]  # k exp(gam - Gam)
    return Intra(
        KQ=KQ,
        Tb=Tb,
        V=v,
        Aqk=Aqk,
        Kd=knT.transpose(0, 3, 1, 2),
        decay=decay,
        least_gam=seen[0],
        g_max=seen[1],
    )


def _smooth_scores(X: np.ndarray, knT: np.ndarray, beta: np.ndarray):
    """L = Diag(beta) (k-k scores) and Aqk (q-k scores, causal) from X [N, H, 2, C, K] (k rows,
    q rows) and knT [N, H, K, C]. Only the lower triangle is needed, so rows 0..h of each chunk
    (h = C/2) are multiplied by columns 0..h only: 3/4 of the full product. L is left unset on
    and right of the diagonal (`_unit_lower_inverse` reads only its strictly lower part)."""
    N, H, _, C, K = X.shape
    causal = _tril_masks(C)[1]
    if C <= SUB:  # small chunks: one product (fewer calls beat the quarter of the work)
        P = np.matmul(X.reshape(N, H, 2 * C, K), knT)  # [N, H, 2C, C]
        with np.errstate(over="ignore", invalid="ignore"):  # right of the diagonal is unused
            L = np.multiply(P[:, :, :C], beta[:, :, :, None])
        Aqk = np.zeros((N, H, C, C), X.dtype)
        np.copyto(Aqk, P[:, :, C:], where=causal)
        return L, Aqk
    h = C // 2
    L = np.empty((N, H, C, C), X.dtype)
    Aqk = np.zeros((N, H, C, C), X.dtype)  # scaled through Qg
    with np.errstate(over="ignore", invalid="ignore"):  # right of the diagonal is unused
        for rows, cols in ((slice(0, h), slice(0, h)), (slice(h, C), slice(0, C))):
            P = np.matmul(X[:, :, :, rows], knT[:, :, None, :, cols])  # [N, H, 2, rows, cols]
            np.multiply(P[:, :, 0], beta[:, :, rows, None], out=L[:, :, rows, cols])
            np.copyto(Aqk[:, :, rows, cols], P[:, :, 1], where=causal[rows, cols])
    return L, Aqk


def _decayed_scores(
    X: np.ndarray,
    kn: np.ndarray,
    refs: np.ndarray,
    k: np.ndarray,
    q: np.ndarray,
    Gam: np.ndarray,
    wild: np.ndarray,
) -> np.ndarray:
    """Per row sub-chunk a, the k-k and q-k scores against columns 0..(a+1)B (see intra_chunk).

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
            np.matmul(heads(X[:, a]), right.transpose(0, 2, 3, 1), out=P[:, :, a, :, :w])
        for n in np.flatnonzero(wild[:, a]):  # diagonal block from masked exponents
            G = Gam[n, s:w]  # [B, H, K]
            E = np.exp(np.where(causal, G[:, None] - G[None, :], -np.inf))  # [B, B, H, K]
            kb = k[n, s:w]
            P[n, :, a, :B, s:w] = np.einsum("ihk,jhk,ijhk->hij", kb, kb, E)
            P[n, :, a, B:, s:w] = np.einsum("ihk,jhk,ijhk->hij", q[n, s:w], kb, E)
    return P


def block_rows(rows: int, per_row: int) -> int:
    """Largest divisor of `rows` with at most _GEMM_MNK / per_row rows, but >= 16 if possible."""
    r = min(rows, max(16, _GEMM_MNK // per_row))
    while rows % r:
        r -= 1
    return r
