"""TinyHybrid over a batch of requests in one pass: packed (varlen) prefill and batched decode.

``forward_batch(model, seqs, states)`` is ``TinyHybrid.forward`` for many requests at once:
every sequence's tokens are packed into one ``[T_total, D]`` array, so embeddings, norms,
projections, MLPs and the LM head are single matmuls over all tokens; KDA layers run
``conv_varlen.short_conv_varlen`` and ``varlen.kda_varlen`` (length-1 sequences - decodes - through
the batched step, prefill chunks through the level-by-level chunked scan), each sequence from
its own state and conv window. MLA attends per request: decodes (one query each) as one padded,
masked batch; prefill chunks one sequence at a time (their causal masks differ).

Twins: ``TinyHybrid.forward`` / ``decode_step`` per request (tests/test_serve_batch.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core.kda import varlen
from kda_core.model import (
    MAX_TOKENS,
    KDALayerState,
    MLAWeights,
    ModelState,
    TinyHybrid,
    check_tokens,
)
from kda_core.serve.fused import (
    FusedWeights,
    KDALayer,
    conv_packed,
    l2norm,
    mlp,
    rms,
    sigmoid,
    silu,
)

__all__ = [
    "forward_batch",
    "forward_packed",
    "mla_attend_padded",
    "mla_decode_attention",
    "padded_latents",
]


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


def _kda_layer(model, wt: KDALayer, h, cu, S0, win, out):
    """One KDA mixer over packed rows (fused projections); the new states go to ``out``
    [N, H, K, V]. Returns (y [T, D], new states, windows)."""
    c = model.config
    T, H, K = h.shape[0], c.n_heads, c.head_dim
    HK = H * K
    z = h @ wt.w_in
    y, new_win = conv_packed(z[:, : 3 * HK], wt.taps, cu, win)
    act = silu(y).reshape(T, 3, H, K)
    f = (z[:, 4 * HK : 4 * HK + wt.f_b.shape[0]] @ wt.f_b).reshape(T, H, K)
    g = c.gate_lower_bound * sigmoid(wt.decay * (f + wt.dt_bias))
    beta = sigmoid(z[:, -H:])
    q, k = l2norm(act[:, 0]), l2norm(act[:, 1])
    o, S = varlen.kda_varlen(q, k, act[:, 2], g, beta, cu, S0, out=out)
    gate = sigmoid(z[:, 3 * HK : 4 * HK])
    return (rms(o, wt.norm_w, c.norm_eps).reshape(T, HK) * gate) @ wt.w_o, S, new_win


def _mla_decode(model, layer, h, pasts):
    """Latent attention of one query per request (h [B, D]) over each request's own past
    latents plus its new one (``mla_decode_attention``)."""
    c = model.config
    w: MLAWeights = model.blocks[layer].mixer  # type: ignore[assignment]
    Hm, dh = c.mla_heads, c.mla_head_dim
    new = model.mla_latent(layer, h)  # [B, C]
    C = new.shape[1]
    uk = w.w_uk.reshape(C, Hm, dh).transpose(1, 2, 0)  # [Hm, dh, C]
    uv = w.w_uv.reshape(C, Hm, dh).transpose(1, 0, 2)  # [Hm, C, dh]
    o = mla_decode_attention(h @ w.w_q, new, pasts, uk, uv, dh)
    return (o * sigmoid(h @ w.w_gate)) @ w.w_o, new


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


def forward_packed(
    model: TinyHybrid,
    ids: list[list[int]],
    S: np.ndarray,
    conv: np.ndarray,
    pasts: Sequence[np.ndarray],
    wts: FusedWeights | None = None,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, list[np.ndarray]]:
    """The core of ``forward_batch`` on layer-major state arrays (no validation).

    S [L, N, H, K, V] and conv [L, N, W-1, D] (L = KDA layers; read only), pasts[i] the MLA
    latents [P_i, n_mla, C] of sequence i. Returns (logits per sequence, new S, new conv,
    new latents per sequence [len_i, n_mla, C]); the new arrays are fresh, so request i's
    state is the view ``S_new[:, i]`` (the runner binds those views to the slots: no copy).
    ``wts``: the model's ``FusedWeights`` (None: made here).
    """
    wts = FusedWeights.of(model) if wts is None else wts
    lens = np.array([len(s) for s in ids])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = model.embed[np.concatenate(ids)]
    S_new = np.empty_like(S)
    W_new = np.empty_like(conv)
    new_lat: list[list[np.ndarray]] = []
    for layer in range(len(model.layer_kinds)):
        wt = wts.layers[layer]
        h = rms(x, wt.norm1, model.config.norm_eps)
        j = model._slot[layer]
        if isinstance(wt, KDALayer):
            y, _, W_new[j] = _kda_layer(model, wt, h, cu, S[j], conv[j], S_new[j])
        else:
            y, lats = _mla_layer(model, layer, h, cu, pasts)
            new_lat.append(lats)
        x = x + y
        x = x + mlp(model, layer, x)
    logits = rms(x, model.final_norm, model.config.norm_eps) @ model.lm_head
    out = [logits[cu[i] : cu[i + 1]] for i in range(len(ids))]
    kv = [np.stack([lat[i] for lat in new_lat], axis=1) for i in range(len(ids))]
    return out, S_new, W_new, kv


def forward_batch(
    model: TinyHybrid, seqs: Sequence[Sequence[int]], states: Sequence[ModelState]
) -> tuple[list[np.ndarray], list[ModelState]]:
    """Pure forward of ``seqs[i]`` after ``states[i]`` for every i in one pass.

    Returns (logits per sequence [len_i, vocab], new states), as ``model.forward`` would for
    each sequence alone (to rounding)."""
    ids = _check(model, seqs, states)
    L = len(model.kda_layers)
    S = np.stack([np.stack([st.kda[j].S for st in states]) for j in range(L)])
    conv = np.stack([np.stack([st.kda[j].conv for st in states]) for j in range(L)])
    out, S_new, W_new, kv = forward_packed(model, ids, S, conv, [st.mla_kv for st in states])
    new_states = [
        ModelState(
            [KDALayerState(S_new[j, i], W_new[j, i]) for j in range(L)],
            np.concatenate([st.mla_kv, kv[i]], axis=0),
            st.tokens + ids[i],
            st.version,
            st.fingerprint,
        )
        for i, st in enumerate(states)
    ]
    return out, new_states
