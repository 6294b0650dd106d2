"""A token segment's state map S_end = M S_start + b (per head), and its closed chunkwise form.

Composition is associative, not commutative: the property context parallelism and prefix
caching rely on (docs/kda.md). The token-by-token twins live in `reference`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.kda._inputs import check_chunk_size, effective_chunk, validate_map_inputs
from kda_core.kda._intra import heads, intra_chunk


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


def segment_map(k, v, g, beta, *, chunk_size: int = 64) -> AffineMap:
    """Closed-form map of a whole segment: per chunk M = Diag(exp(gam)) - Kd^T Wm, b = Kd^T U."""
    C = check_chunk_size(chunk_size)
    k, v, g, beta = validate_map_inputs(k, v, g, beta)
    T, H, K = k.shape
    C = effective_chunk(C, T)
    it = intra_chunk(np.zeros_like(k), k, v, g, beta, 1.0, C)
    KdT = it.Kd.transpose(0, 2, 3, 1)  # [N, H, K, C]
    Wm = np.matmul(it.Tb, heads(it.KQ[:, :C]))  # (I + L)^-1 Diag(beta) k exp(Gam)
    M = np.einsum("nhk,kj->nhkj", it.decay, np.eye(K)) - np.matmul(KdT, Wm)
    b = np.matmul(KdT, np.matmul(it.Tb, heads(it.V)))
    out = AffineMap(M[0], b[0])
    for n in range(1, M.shape[0]):
        out = out.then(AffineMap(M[n], b[n]))
    return out
