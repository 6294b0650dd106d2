"""ReplaySSM's segment math and the checks of D and L (derivations: docs/speculative.md).

``ring_verify`` rebuilds every output of a D-token segment from the checkpoint S0 and the rank-1
writes d, with no per-token state (its naive twin, a state per token, is in tests/test_spec.py);
``exact_replay`` is the commit's replay of the exact group in recurrent order.
"""

from __future__ import annotations

import numpy as np

from kda_core import kda, sizing
from kda_core._checks import check_int

MAX_DRAFT_TOKENS = 64  # D cap: verify cost and the [D, D, H, K] pairwise decays stay small
MAX_RING_LEN = 1024
RING_FIELDS: tuple[str, ...] = ("d", "k", "g", "rawv", "rawk", "beta")


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


def ring_verify(S0, q, k, v, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """ReplaySSM verify of one layer: outputs and ring d from S0 without any per-token state.

    With Gam_t = g_1 + ... + g_t and A(t, j) = exp(Gam_t - Gam_j) (the decay from after token j
    to token t), for t = 1..n:
        d_t = beta_t (v_t - S0^T (e^Gam_t * k_t) - sum_{j<t} <k_t, A(t, j) k_j> d_j)
        o_t = scale (S0^T (e^Gam_t * q_t) + sum_{j<=t} <q_t, A(t, j) k_j> d_j)
    i.e. a unit lower-triangular solve for d (the UT transform of the chunked form).
    S0 [H, K, V]; q, k, g [n, H, K]; v [n, H, V]; beta [n, H]; n <= 64; scale = K^-1/2.
    -> (o, d).
    """
    n = g.shape[0]
    Gam = np.cumsum(g, axis=0)
    causal = np.tril(np.ones((n, n), bool))[:, :, None, None]
    A = np.exp(np.where(causal, Gam[:, None] - Gam[None, :], -np.inf))  # kept exponents <= 0
    E = np.exp(Gam)
    kk = np.einsum("thc,jhc,tjhc->tjh", k, k, A)  # [n, n, H]
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    base = np.einsum("thk,hkv->thv", E * k, S0)
    d = np.empty_like(v)
    for t in range(n):
        d[t] = beta[t][:, None] * (v[t] - base[t] - np.einsum("jh,jhv->hv", kk[t, :t], d[:t]))
    o = np.einsum("thk,hkv->thv", E * q, S0) + np.einsum("tjh,jhv->thv", qk, d)
    return S0.shape[1] ** -0.5 * o, d


def exact_replay(S0, rawk, rawv, g, beta) -> np.ndarray:
    """Commit: replay (rawk, rawv, g, beta) from the full-precision S0 in recurrent order: the KDA
    recurrence (``kda.recurrent``, which checks the inputs) on k = rawk / sqrt(|rawk|^2 + eps)
    (``kda.l2norm``, as the model): S = Diag(alpha) S; d = beta (rawv - S^T k); S = S + k d^T
    (SGLang 0.5.23's order too: kernels/ops/attention/linear/kda_replayssm_spec_decode.py,
    kda_replayssm_exact_fold_kernel). S0 [H, K, V]; rawk, g [n, H, K]; rawv [n, H, V];
    beta [n, H]. -> S [H, K, V] (S0 is not modified)."""
    k = kda.l2norm(np.asarray(rawk, dtype=np.float64))
    return kda.recurrent(k, k, rawv, g, beta, initial_state=S0)[1]
