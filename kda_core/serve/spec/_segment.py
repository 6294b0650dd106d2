"""ReplaySSM's segment math: ``ring_verify`` rebuilds every output of a D-token segment from
the checkpoint S0 and the rank-1 writes d (no per-token state; its naive twin keeping a state
per token is in tests/test_spec.py); ``exact_replay`` is the commit's recurrent-order replay
from the exact group. The argument checks (D, L) live here too. docs/speculative.md.
"""

from __future__ import annotations

import numpy as np

from kda_core import kda, sizing
from kda_core._checks import check_int

MAX_DRAFT_TOKENS = 64  # D cap: verify cost and the [D, D, H, K] pairwise decays stay small
MAX_RING_LEN = 1024
RING_FIELDS: tuple[str, ...] = ("d", "k", "g", "rawv", "rawk", "beta")
L2_EPS = 1e-6  # kda.l2norm's eps: the same normalisation the model applies to k


def check_draft_tokens(draft_tokens: object) -> int:
    """D, the tokens verified per step (pending token included): an integer in [1, 64]."""
    return check_int("draft_tokens", draft_tokens, 1, MAX_DRAFT_TOKENS)


def check_ring_len(ring_len: object, draft_tokens: int) -> int:
    """L: None -> next_pow2(2D); otherwise a power of two in [2D, 1024] (ValueError if not)."""
    d = check_draft_tokens(draft_tokens)
    if ring_len is None:
        return sizing.default_ring_len(d)
    n = check_int("ring_len", ring_len, 1, MAX_RING_LEN)
    if n & (n - 1):
        raise ValueError(f"ring_len must be a power of two (>= 2*draft_tokens = {2 * d}), got {n}")
    if n < 2 * d:
        raise ValueError(
            f"ring_len must be >= 2*draft_tokens = {2 * d} (and a power of two), got {n}"
        )
    return n


def _check_segment_inputs(S0, q, k, g, name_v: str, v=None, beta=None):
    S0 = np.asarray(S0, dtype=np.float64)
    if S0.ndim != 3:
        raise ValueError(f"S0 must have shape [H, K, V], got {S0.shape}")
    H, K, V = S0.shape
    k = np.asarray(k, dtype=np.float64)
    if k.ndim != 3 or k.shape[1:] != (H, K) or not 1 <= k.shape[0] <= MAX_DRAFT_TOKENS:
        raise ValueError(
            f"k must have shape [n, H, K] = [n, {H}, {K}] with n in [1, {MAX_DRAFT_TOKENS}], "
            f"got {k.shape}"
        )
    n = k.shape[0]
    g = np.asarray(g, dtype=np.float64)
    if g.shape != (n, H, K):
        raise ValueError(f"g must have shape [n, H, K] = {(n, H, K)}, got {g.shape}")
    if np.any(g > 0):
        raise ValueError(f"g is a log decay and must be <= 0, got max {g.max():.3g}")
    if q is not None:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (n, H, K):
            raise ValueError(f"q must have shape [n, H, K] = {(n, H, K)}, got {q.shape}")
    if v is not None:
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (n, H, V):
            raise ValueError(f"{name_v} must have shape [n, H, V] = {(n, H, V)}, got {v.shape}")
    if beta is not None:
        beta = np.asarray(beta, dtype=np.float64)
        if beta.shape != (n, H):
            raise ValueError(f"beta must have shape [n, H] = {(n, H)}, got {beta.shape}")
    return S0, q, k, g, v, beta


def _pair_decay(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gam = inclusive cumsum of g [n, H, K] and exp(Gam_t - Gam_j) for j <= t (0 above)."""
    Gam = np.cumsum(g, axis=0)
    n = g.shape[0]
    causal = np.tril(np.ones((n, n), bool))[:, :, None, None]
    diff = np.where(causal, Gam[:, None] - Gam[None, :], -np.inf)  # every kept exponent <= 0
    return Gam, np.exp(diff)  # [n, H, K], [n, n, H, K]


def ring_verify(S0, q, k, v, g, beta, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ReplaySSM verify of one layer: outputs and ring d from S0 without any per-token state.

    With A(t, j) = exp(Gam_t - Gam_j) (decay from after token j to token t), for t = 1..n:
        d_t = beta_t (v_t - S0^T (e^Gam_t * k_t) - sum_{j<t} <k_t, A(t, j) k_j> d_j)
        o_t = scale (S0^T (e^Gam_t * q_t) + sum_{j<=t} <q_t, A(t, j) k_j> d_j)
    i.e. a unit lower-triangular solve for d (the UT transform of the chunked form).
    S0 [H, K, V]; q, k, g [n, H, K]; v [n, H, V]; beta [n, H]; n <= 64. -> (o, d).
    """
    scale = S0.shape[1] ** -0.5 if scale is None else float(scale)
    Gam, A = _pair_decay(g)
    E = np.exp(Gam)
    kk = np.einsum("thc,jhc,tjhc->tjh", k, k, A)  # [n, n, H]
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    base = np.einsum("thk,hkv->thv", E * k, S0)
    d = np.empty_like(v)
    for t in range(k.shape[0]):
        acc = v[t] - base[t] - np.einsum("jh,jhv->hv", kk[t, :t], d[:t])
        d[t] = beta[t][:, None] * acc
    o = scale * (np.einsum("thk,hkv->thv", E * q, S0) + np.einsum("tjh,jhv->thv", qk, d))
    return o, d


def exact_replay(S0, rawk, rawv, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """Commit: replay (rawv, rawk, g, beta) from the full-precision S0 in recurrent order.

    Per token (the seed's four lines): k = rawk / sqrt(|rawk|^2 + eps); S = Diag(alpha) S;
    d = beta (rawv - S^T k); S = S + k d^T. Returns (S [H, K, V], recomputed d [n, H, V]).
    """
    S0, _, rawk, g, rawv, beta = _check_segment_inputs(S0, None, rawk, g, "rawv", rawv, beta)
    k = kda.l2norm(rawk, L2_EPS)
    S = S0.copy()
    d = np.empty_like(rawv)
    for t in range(k.shape[0]):
        S *= np.exp(g[t])[:, :, None]  # decay
        resid = rawv[t] - np.einsum("hk,hkv->hv", k[t], S)  # residual on the decayed state
        d[t] = beta[t][:, None] * resid  # times beta
        S += k[t][:, :, None] * d[t][:, None, :]  # rank-1 update
    return S, d
