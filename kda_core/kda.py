"""Kimi Delta Attention (KDA): the recurrence, its chunkwise (WY/UT) form, gates and affine maps.

Per value head, with alpha_t = exp(g_t) (a K-vector) and a state S of shape [K, V]:

    S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T
    o_t = scale * S_t^T q_t

Decay comes before the delta correction and the read-out sees the current token's write
(flash-linear-attention `naive_recurrent_kda`; see shared/reference/kda-math.md §2).

Shapes: q, k [T, H, K]; v [T, H, V]; g [T, H, K] (log decay, <= 0); beta [T, H];
state [H, K, V]; o [T, H, V]. q and k are used as given (callers L2-normalise them).

`recurrent` is the naive twin every fast path is tested against; `chunked` processes C tokens at
a time with batched matmuls over heads and chunks. Left out: grouped value heads (GVA), varlen
batches and the V-first state layout — a single sequence with H = HV is all the lab needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_TOKENS = 1 << 20
MAX_ELEMENTS = 1 << 28  # cap on T*H*max(K, V), i.e. ~2 GiB of float64 per tensor

_SUB = 16  # sub-chunk rows for the pairwise decays (fla's BC)
# Largest decay spread inside one sub-chunk for which the diagonal block is factorised around its
# middle row; beyond it the block's pairwise exponents are masked, then exp'd (exact, slower).
_BLOCK_SPREAD = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 80.0}


# --------------------------------------------------------------------------------------------
# validation


def _as_float(name: str, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = arr.astype(dtype, copy=False)
    if not np.all(np.isfinite(arr)):
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
    if np.any(g > 0):
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
    elif not np.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
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


@dataclass(slots=True)
class _Intra:
    """Per-chunk quantities that do not depend on the incoming state. Chunks on axis 1."""

    WQ: np.ndarray  # [H, N, 2C, K]  rows 0..C: Wm = (I + L)^-1 Diag(beta) (k * exp(Gam));
    #                                 rows C..2C: Qg = scale * q * exp(Gam)
    U: np.ndarray  # [H, N, C, V]    (I + L)^-1 Diag(beta) v
    Aqk: np.ndarray  # [H, N, C, C]  causal q-k scores with decay (diagonal included), scaled
    Kd: np.ndarray  # [H, N, C, K]   k * exp(gam - Gam)
    decay: np.ndarray  # [H, N, K]   exp(gam), the chunk's total decay


def _to_chunks(x: np.ndarray, C: int) -> np.ndarray:
    """[T, H, *] -> [H, N, C, *] contiguous, zero padded (zero k, v, g, beta leave S unchanged)."""
    T = x.shape[0]
    N = -(-T // C)
    if N * C != T:
        x = np.concatenate([x, np.zeros((N * C - T,) + x.shape[1:], x.dtype)], axis=0)
    x = x.reshape((N, C) + x.shape[1:])
    return np.ascontiguousarray(np.moveaxis(x, 2, 0))


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


def _times_exp(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """x * exp(e), in place on the fresh array e."""
    np.exp(e, out=e)
    e *= x
    return e


def _decayed_scores(k: np.ndarray, q: np.ndarray, Gam: np.ndarray) -> np.ndarray:
    """Lower triangles (diagonal included) of the decayed k-k and q-k scores of every chunk:

        P[i, j] = sum_c x[i,c] k[j,c] exp(Gam[i,c] - Gam[j,c]),   x = k (rows 0..C) or q (C..2C)

    k, q, Gam [H, N, C, K], Gam decreasing along C. Returns [H, N, 2C, C]; entries above the
    diagonal are garbage. As in fla the chunk is cut into sub-chunks of 16 rows, each with its
    first row r as reference: exp(Gam_i - Gam_r) <= 1 for its rows, and exp(Gam_r - Gam_j) <= 1
    for earlier columns, <= exp(spread) inside the block. That is bounded while the sub-chunk's
    decay spread stays below _BLOCK_SPREAD (always so for K3's lower-bound gate: 15 * 5 = 75);
    a sub-chunk beyond it is masked before exp instead, exactly.
    """
    H, N, C, K = Gam.shape
    B = min(C, _SUB)
    nb = C // B
    out = np.zeros((H, N, 2 * C, C), k.dtype)
    causal = np.tril(np.ones((B, B), bool))
    refs = Gam[:, :, ::B]  # [H, N, nb, K] the first row of every sub-chunk
    with np.errstate(over="ignore", invalid="ignore"):  # only above-diagonal garbage overflows
        # k_j exp(ref_b - Gam_j) for j in sub-chunk b; moved to another block's reference below
        # by a per-channel factor exp(ref_s - ref_b) <= 1 (a multiply, no exp on big arrays)
        kn = refs[:, :, :, None, :] - Gam.reshape(H, N, nb, B, K)
        np.exp(kn, out=kn)
        kn *= k.reshape(H, N, nb, B, K)
    spread = (refs - Gam[:, :, B - 1 :: B]).max(axis=(0, 3))  # [N, nb]
    limit = _BLOCK_SPREAD[Gam.dtype]
    wild = np.flatnonzero(spread.max(axis=1) > limit)  # chunks where kn may have overflowed
    for blk in range(nb):
        s = blk * B
        rows = np.exp(Gam[:, :, s : s + B] - refs[:, :, blk : blk + 1])  # <= 1
        shift = np.exp(refs[:, :, blk : blk + 1] - refs[:, :, : blk + 1])  # [H, N, blk+1, K] <= 1
        with np.errstate(invalid="ignore"):  # inf * 0 only where `wild` recomputes below
            right = (kn[:, :, : blk + 1] * shift[:, :, :, None, :]).reshape(H, N, s + B, K)
        if wild.size:  # exp(ref_s - Gam_j) directly: <= 1 left of the diagonal block
            with np.errstate(over="ignore"):
                ref = refs[:, wild, blk : blk + 1]
                right[:, wild] = k[:, wild, : s + B] * np.exp(ref - Gam[:, wild, : s + B])
        rightT = np.swapaxes(right, -1, -2)
        with np.errstate(over="ignore", invalid="ignore"):
            out[:, :, s : s + B, : s + B] = np.matmul(k[:, :, s : s + B] * rows, rightT)
            out[:, :, C + s : C + s + B, : s + B] = np.matmul(q[:, :, s : s + B] * rows, rightT)
        for n in np.flatnonzero(spread[:, blk] > limit):
            G = Gam[:, n, s : s + B]  # [H, B, K]
            E = np.exp(np.where(causal[None, :, :, None], G[:, :, None] - G[:, None], -np.inf))
            kb = k[:, n, s : s + B]
            out[:, n, s : s + B, s : s + B] = np.einsum("hik,hjk,hijk->hij", kb, kb, E)
            qk = np.einsum("hik,hjk,hijk->hij", q[:, n, s : s + B], kb, E)
            out[:, n, C + s : C + s + B, s : s + B] = qk
    return out


def _intra_chunk(q, k, v, g, beta, scale: float, C: int) -> _Intra:
    # [T, H, *] -> [H, N, C, *]
    q, k, v, g, beta = (_to_chunks(x, C) for x in (q, k, v, g, beta))  # beta [H, N, C]
    dtype = q.dtype
    # inclusive cumsum within each chunk (decreasing), as a matmul: numpy's strided cumsum is slow
    Gam = np.matmul(np.tril(np.ones((C, C), dtype)), g)
    gam = Gam[:, :, -1, :]  # [H, N, K]
    eG = np.exp(Gam)  # <= 1
    lower = np.tril(np.ones((C, C), bool), -1)
    causal = np.tril(np.ones((C, C), bool), 0)
    H, N = Gam.shape[:2]
    kq = np.empty((H, N, 2 * C, k.shape[-1]), dtype)  # rows: k exp(Gam), then scale q exp(Gam)
    np.multiply(k, eG, out=kq[:, :, :C])
    np.multiply(q, eG, out=kq[:, :, C:])
    kq[:, :, C:] *= scale
    P = _decayed_scores(k, q, Gam)  # [H, N, 2C, C]: k-k rows, then q-k rows (unscaled)

    L = np.where(lower, beta[..., :, None] * P[:, :, :C], 0.0)
    Tm = _unit_lower_inverse(L)  # the UT transform
    Tb = Tm * beta[..., None, :]  # (I + L)^-1 Diag(beta), scaled on the small C x C side
    kq[:, :, :C] = np.matmul(Tb, kq[:, :, :C])
    return _Intra(
        WQ=kq,
        U=np.matmul(Tb, v),
        Aqk=np.where(causal, P[:, :, C:] * scale, 0.0),
        Kd=_times_exp(k, gam[:, :, None, :] - Gam),
        decay=np.exp(gam),
    )


def chunked(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64):
    """Chunkwise KDA (WY/UT transform, fla `chunk_kda`). Any T; the last chunk may be ragged.

    Per chunk of C tokens with incoming state S0 (all heads at once):
        Vn = U - Wm S0                 pseudo-values: each token's actual rank-1 write
        O  = Qg S0 + Aqk Vn
        S1 = Diag(exp(gam)) S0 + Kd^T Vn
    Everything independent of S0 is computed for all chunks in one batched pass.
    """
    C = _check_chunk_size(chunk_size)
    q, k, v, g, beta, S, scale = _validate(q, k, v, g, beta, initial_state, scale)
    T = q.shape[0]
    C = _effective_chunk(C, T)
    it = _intra_chunk(q, k, v, g, beta, scale, C)
    H, N = it.U.shape[:2]
    o = np.empty((H, N, C, v.shape[2]), S.dtype)
    for n in range(N):
        R = np.matmul(it.WQ[:, n], S)  # [H, 2C, V]: Wm S0 and Qg S0 in one product
        Vn = it.U[:, n] - R[:, :C]
        o[:, n] = R[:, C:] + np.matmul(it.Aqk[:, n], Vn)
        S = it.decay[:, n, :, None] * S + np.matmul(np.swapaxes(it.Kd[:, n], -1, -2), Vn)
    o = np.moveaxis(o.reshape(H, N * C, -1), 0, 1)[:T]
    return np.ascontiguousarray(o), S


def chunked_flops(T: int, H: int, K: int, V: int, chunk_size: int = 64) -> int:
    """Matmul FLOPs (2 per multiply-add) of `chunked`, for the fraction-of-peak benchmark."""
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
    it = _intra_chunk(np.zeros_like(k), k, v, g, beta, 1.0, _effective_chunk(C, T))
    KdT = np.swapaxes(it.Kd, -1, -2)  # [H, N, K, C]
    Wm = it.WQ[:, :, : it.U.shape[2]]
    M = np.einsum("hnk,kj->hnkj", it.decay, np.eye(K)) - np.matmul(KdT, Wm)
    b = np.matmul(KdT, it.U)
    out = AffineMap(M[:, 0], b[:, 0])
    for n in range(1, M.shape[1]):
        out = out.then(AffineMap(M[:, n], b[:, n]))
    return out
