"""MLA attention over batches in the absorbed form (the batched passes' helpers): one query
per request over its padded latents (decode), prefill chunks of one length together."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "chunk_groups",
    "mla_attend_chunks",
    "mla_attend_padded",
    "mla_decode_attention",
    "padded_latents",
]


def mla_decode_attention(q, new, pasts, uk, uv, dh: int) -> np.ndarray:
    """Attention of one query per request, q [B, Hm dh], over its past latents pasts[b]
    [P_b, C] and its new one new[b]: the latents laid in one padded batch
    (``padded_latents``), then ``mla_attend_padded``. uk [Hm, dh, C], uv [Hm, C, dh].
    Returns the attention outputs [B, Hm dh] (before gate and W_o)."""
    lat, n = padded_latents(pasts, new[:, None])
    return mla_attend_padded(q, lat, n, uk, uv, dh)


def padded_latents(pasts: Sequence[np.ndarray], new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Request b's past latents pasts[b] [P_b, ...] then its new ones new[b] [1, ...] as rows
    ``:n_b`` of one zero-padded [B, max n, ...] array (n_b = P_b + 1). -> (array, n)."""
    B = new.shape[0]
    n = np.array([p.shape[0] for p in pasts]) + 1
    L = int(n.max())
    if np.all(n == L):  # equal lengths (steady decoding of a batch admitted together)
        lat = np.empty((B, L) + new.shape[2:])
        np.stack(pasts, out=lat[:, : L - 1])  # (concatenate on axis 1 measured ~10x slower)
        lat[:, L - 1] = new[:, 0]
        return lat, n
    lat = np.zeros((B, L) + new.shape[2:])
    for b, p in enumerate(pasts):
        lat[b, : n[b] - 1] = p
    lat[np.arange(B), n - 1] = new[:, 0]
    return lat, n


def mla_attend_padded(q, lat, n, uk, uv, dh: int) -> np.ndarray:
    """Attention of one query per request, q [B, Hm dh], over rows ``:n[b]`` of lat[b]
    [B, L, C] (rows from n[b] on are padding, masked out: exp(-inf) is an exact 0), in the
    absorbed form (DeepSeek-V2 / SGLang MLA decode): scores q_h . (W_uk,h c) = (W_uk,h^T q_h)
    . c and outputs W_uv,h (p . c), so the past latents are never up-projected. uk [Hm, dh,
    C], uv [Hm, C, dh]. Returns the attention outputs [B, Hm dh] (before gate and W_o)."""
    B, L, C = lat.shape
    Hm = uk.shape[0]
    # per head over the batch (Hm matmuls), then per request over its heads (B matmuls)
    qa = np.matmul(q.reshape(B, Hm, dh).transpose(1, 0, 2), uk).transpose(1, 0, 2)  # [B, Hm, C]
    s = np.matmul(qa, lat.swapaxes(1, 2))  # [B, Hm, L]
    s *= 1.0 / np.sqrt(dh)
    if int(n.min()) < L:  # ragged: mask the padding
        s = np.where((np.arange(L)[None, :] < n[:, None])[:, None, :], s, -np.inf)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s *= 1.0 / s.sum(axis=-1, keepdims=True)
    ctx = np.matmul(s, lat)  # [B, Hm, C]
    return np.matmul(ctx.transpose(1, 0, 2), uv).transpose(1, 0, 2).reshape(B, Hm * dh)


def mla_attend_chunks(q, new, pasts, uk, uv, dh: int) -> np.ndarray:
    """Causal latent attention of B prefill chunks of n tokens each: q [B, n, Hm dh] over
    chunk b's past latents pasts[b] [P_b, C] then its own new ones new[b] [n, C], query t
    seeing the P_b + t + 1 first (``TinyHybrid.mla_mixer``'s mask, per chunk). The latents are
    laid in one zero-padded [B, max P + n, C] array (pasts, then the chunk), the padding masked
    out by the causal rule itself (exp(-inf) is an exact 0); the absorbed form of
    ``mla_attend_padded``. uk [Hm, dh, C], uv [Hm, C, dh]. Returns [B, n, Hm dh]."""
    B, n, C = new.shape
    Hm = uk.shape[0]
    P = np.array([p.shape[0] for p in pasts])
    L = int(P.max()) + n
    if P.min() == P.max():
        lat = np.empty((B, L, C))
        if P[0]:
            np.stack(pasts, out=lat[:, : P[0]])
        lat[:, P[0] :] = new
    else:
        lat = np.zeros((B, L, C))
        for b, p in enumerate(pasts):
            lat[b, : P[b]] = p
            lat[b, P[b] : P[b] + n] = new[b]
    qa = np.matmul(q.reshape(B * n, Hm, dh).transpose(1, 0, 2), uk)  # [Hm, B n, C]
    qa = qa.reshape(Hm, B, n, C).transpose(1, 0, 2, 3).reshape(B, Hm * n, C)
    s = np.matmul(qa, lat.swapaxes(1, 2)).reshape(B, Hm, n, L)
    s *= 1.0 / np.sqrt(dh)
    hidden = np.arange(L) > (P[:, None] + np.arange(n))[..., None]  # [B, n, L]
    np.copyto(s, -np.inf, where=hidden[:, None])  # in place: no second score-sized array
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s *= 1.0 / s.sum(axis=-1, keepdims=True)
    ctx = np.matmul(s.reshape(B, Hm * n, L), lat)  # [B, Hm n, C]
    ctx = ctx.reshape(B, Hm, n, C).transpose(1, 0, 2, 3).reshape(Hm, B * n, C)
    return np.matmul(ctx, uv).transpose(1, 0, 2).reshape(B, n, Hm * dh)


# A group's score array holds B * mla_heads * n * (max past + n) float64s: groups are cut so it
# stays under this many (32 MiB), about what one long chunk alone needs, so batching chunks never
# multiplies the prefill's peak memory by the group size.
MAX_GROUP_SCORES = 1 << 22


def chunk_groups(lens: np.ndarray, P: np.ndarray, heads: int) -> list[np.ndarray]:
    """The prefill chunks (lens > 1) in groups for ``mla_attend_chunks``: equal lengths; alone
    when padding the group's latents to its longest past would more than double them; and cut
    so a group's scores stay under MAX_GROUP_SCORES (a chunk bigger than that runs alone)."""
    groups = []
    for n in np.unique(lens[lens > 1]):
        seqs = np.flatnonzero(lens == n)
        if seqs.size > 1 and seqs.size * (P[seqs].max() + n) > 2 * (P[seqs] + n).sum():
            groups += [seqs[i : i + 1] for i in range(seqs.size)]
            continue
        per_chunk = heads * int(n) * (int(P[seqs].max()) + int(n))
        step = max(1, MAX_GROUP_SCORES // per_chunk)
        groups += [seqs[i : i + step] for i in range(0, seqs.size, step)]
    return groups
