"""The naive twins: KDA token by token, and affine maps composed one token at a time.

Per value head, with alpha_t = exp(g_t) (a K-vector) and a state S of shape [K, V]:

    S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T
    o_t = scale * S_t^T q_t

Decay comes before the delta correction and the read-out sees the current token's write
(flash-linear-attention `naive_recurrent_kda`; docs/kda.md). Every fast path (`chunked`,
`segment_map`, varlen, context parallelism) is tested against these.
"""

from __future__ import annotations

import numpy as np

from kda_core.kda._inputs import validate, validate_map_inputs
from kda_core.kda.affine import AffineMap


def recurrent(q, k, v, g, beta, *, scale=None, initial_state=None):
    """Token-by-token KDA (fla `naive_recurrent_kda`). Returns (o [T, H, V], S [H, K, V])."""
    q, k, v, g, beta, S, scale = validate(q, k, v, g, beta, initial_state, scale)
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


def _token_maps(k, v, g, beta) -> list[AffineMap]:
    """One AffineMap per token: M_t = (I - beta k k^T) Diag(alpha), b_t = beta k v^T."""
    k, v, g, beta = validate_map_inputs(k, v, g, beta)
    maps = []
    for t in range(k.shape[0]):
        a = np.exp(g[t])  # [H, K]
        bk = beta[t][:, None] * k[t]  # [H, K]
        M = np.einsum("hi,ij->hij", a, np.eye(k.shape[2])) - bk[:, :, None] * (k[t] * a)[:, None]
        maps.append(AffineMap(M, bk[:, :, None] * v[t][:, None, :]))
    return maps


def segment_map_naive(k, v, g, beta) -> AffineMap:
    """Compose the per-token maps one by one (the twin of `segment_map`)."""
    maps = _token_maps(k, v, g, beta)
    out = maps[0]
    for m in maps[1:]:
        out = out.then(m)
    return out
