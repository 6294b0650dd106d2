"""TinyHybrid over a batch of requests in one pass: packed (varlen) prefill and batched decode.

``forward_batch(model, seqs, states)`` is ``TinyHybrid.forward`` for many requests at once:
every sequence's tokens are packed into one ``[T_total, D]`` array, so embeddings, norms,
projections, MLPs and the LM head are single matmuls over all tokens; KDA layers run
``varlen.short_conv_varlen`` and ``varlen.kda_varlen`` (length-1 sequences - decodes - through
the batched step, prefill chunks through the level-by-level chunked scan), each sequence from
its own state and conv window. MLA attends per request: decodes (one query each) as one padded,
masked batch; prefill chunks one sequence at a time (their causal masks differ).

``decode_batch`` is the all-decode case (one token per request) advancing states in place.

Twins: ``TinyHybrid.forward`` / ``decode_step`` per request (tests/test_serve_batch.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core import kda, varlen
from kda_core.model import (
    MAX_TOKENS,
    KDALayerState,
    KDAWeights,
    MLAWeights,
    ModelState,
    TinyHybrid,
    _sigmoid,
    check_tokens,
)

__all__ = ["decode_batch", "forward_batch"]


def _check(model: TinyHybrid, seqs: Sequence, states: Sequence[ModelState]) -> list[list[int]]:
    if not isinstance(model, TinyHybrid):
        raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
    if len(seqs) != len(states) or not seqs:
        raise ValueError(
            f"seqs and states must be non-empty and of one length, got {len(seqs)} and "
            f"{len(states)}"
        )
    ids = [check_tokens(s, name=f"seqs[{i}]") for i, s in enumerate(seqs)]
    for i, st in enumerate(states):
        model.check_state(st)
        if st.boundary + len(ids[i]) > MAX_TOKENS:
            raise ValueError(f"seqs[{i}]: a request holds at most {MAX_TOKENS} tokens in all")
    return ids


def _kda_layer(model, layer, h, cu, S0, win):
    """One KDA mixer over packed rows; returns (y [T, D], S [N, H, K, V], windows)."""
    c = model.config
    w: KDAWeights = model.blocks[layer].mixer  # type: ignore[assignment]
    T, H, K = h.shape[0], c.n_heads, c.head_dim
    act, new_win = varlen.short_conv_varlen(h @ w.w_qkv, w.conv_w, cu, win, "silu")
    q, k, v = (act[:, i * H * K : (i + 1) * H * K].reshape(T, H, K) for i in range(3))
    f = ((h @ w.f_a) @ w.f_b).reshape(T, H, K)
    g = kda.lowerbound_gate(f, w.dt_bias, c.gate_lower_bound, A_log=w.A_log)
    beta = _sigmoid(h @ w.w_beta)
    o, S = varlen.kda_varlen(kda.l2norm(q), kda.l2norm(k), v, g, beta, cu, S0)
    return model.kda_readout(layer, h, o), S, new_win


def _mla_decode(model, layer, h, pasts):
    """Latent attention of one query per request (h [B, D]) over each request's own past
    latents plus its new one: a padded batch with the padding masked out."""
    c = model.config
    w: MLAWeights = model.blocks[layer].mixer  # type: ignore[assignment]
    B, Hm, dh = h.shape[0], c.mla_heads, c.mla_head_dim
    new = model.mla_latent(layer, h)  # [B, C]
    n = np.array([p.shape[0] for p in pasts]) + 1
    L = int(n.max())
    lat = np.zeros((B, L, new.shape[1]))
    for b, p in enumerate(pasts):
        lat[b, : n[b] - 1] = p
        lat[b, n[b] - 1] = new[b]
    q = (h @ w.w_q).reshape(B, Hm, dh)
    kk = (lat @ w.w_uk).reshape(B, L, Hm, dh)
    vv = (lat @ w.w_uv).reshape(B, L, Hm, dh)
    s = np.einsum("bhd,blhd->bhl", q, kk) / np.sqrt(dh)
    s = np.where((np.arange(L)[None, :] < n[:, None])[:, None, :], s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    p = s / s.sum(axis=-1, keepdims=True)
    o = np.einsum("bhl,blhd->bhd", p, vv).reshape(B, Hm * dh)
    return (o * _sigmoid(h @ w.w_gate)) @ w.w_o, new


def _mla_layer(model, layer, h, cu, pasts):
    """MLA over packed rows: decodes batched, prefill chunks per sequence."""
    j = model._slot[layer]
    lens = np.diff(cu)
    y = np.empty_like(h)
    lats: list[np.ndarray] = [None] * len(pasts)  # type: ignore[list-item]
    one = np.flatnonzero(lens == 1)
    if one.size:
        yb, nb = _mla_decode(model, layer, h[cu[one]], [pasts[i][:, j] for i in one])
        y[cu[one]] = yb
        for r, i in enumerate(one):
            lats[i] = nb[r : r + 1]
    for i in np.flatnonzero(lens != 1):
        s = slice(cu[i], cu[i + 1])
        y[s], lats[i] = model.mla_mixer(layer, h[s], pasts[i][:, j])
    return y, lats


def forward_batch(
    model: TinyHybrid, seqs: Sequence[Sequence[int]], states: Sequence[ModelState]
) -> tuple[list[np.ndarray], list[ModelState]]:
    """Pure forward of ``seqs[i]`` after ``states[i]`` for every i in one pass.

    Returns (logits per sequence [len_i, vocab], new states), as ``model.forward`` would for
    each sequence alone (to rounding)."""
    ids = _check(model, seqs, states)
    lens = np.array([len(s) for s in ids])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = model.embed[np.concatenate(ids)]
    kda_S = [np.stack([st.kda[j].S for st in states]) for j in range(len(model.kda_layers))]
    kda_W = [np.stack([st.kda[j].conv for st in states]) for j in range(len(model.kda_layers))]
    pasts = [st.mla_kv for st in states]
    new_lat: list[list[np.ndarray]] = []
    for layer, kind in enumerate(model.layer_kinds):
        h = model.norm1(layer, x)
        j = model._slot[layer]
        if kind == "kda":
            y, kda_S[j], kda_W[j] = _kda_layer(model, layer, h, cu, kda_S[j], kda_W[j])
        else:
            y, lats = _mla_layer(model, layer, h, cu, pasts)
            new_lat.append(lats)
        x = x + y
        x = x + model.mlp(layer, x)
    logits = model.logits(x)
    out, new_states = [], []
    for i, st in enumerate(states):
        kv_new = np.stack([lat[i] for lat in new_lat], axis=1)
        new_states.append(
            ModelState(
                [KDALayerState(kda_S[j][i], kda_W[j][i]) for j in range(len(kda_S))],
                np.concatenate([st.mla_kv, kv_new], axis=0),
                st.tokens + ids[i],
                st.version,
                st.fingerprint,
            )
        )
        out.append(logits[cu[i] : cu[i + 1]])
    return out, new_states


def decode_batch(
    model: TinyHybrid, tokens: Sequence[int], states: Sequence[ModelState]
) -> np.ndarray:
    """One token per request, every state advanced in place. Returns logits [B, vocab]."""
    logits, new = forward_batch(model, [[t] for t in tokens], states)
    for st, nw in zip(states, new):
        st.kda, st.mla_kv, st.tokens = nw.kda, nw.mla_kv, nw.tokens
    return np.concatenate(logits, axis=0)
