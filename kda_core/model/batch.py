"""TinyHybrid over a batch of requests in one pass: packed (varlen) prefill and batched decode.

``forward_batch(model, seqs, states)`` is ``TinyHybrid.forward`` for many requests at once:
every sequence's tokens are packed into one ``[T_total, D]`` array, so embeddings, norms,
projections, MLPs and the LM head are single matmuls over all tokens (``model._fused``: one
input matmul per mixer, the RMSNorm weights folded into the matrices); KDA layers run the
packed conv and ``varlen.kda_varlen`` (length-1 sequences - decodes - through the batched step,
prefill chunks through the level-by-level chunked scan), each sequence from its own state and
conv window. MLA attends per request in the absorbed form: decodes (one query each) as one
padded, masked batch (``mla_attend_padded``), prefill chunks of one length together
(``mla_attend_chunks``: their latents padded to the group's longest past, the causal mask
P_b + t covering the padding), a chunk alone when that padding would more than double its
group's latents.

Twins: ``TinyHybrid.forward`` / ``decode_step`` per request (tests/test_serve_batch.py,
tests/test_serve_fastpaths.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core.kda import varlen
from kda_core.model._attend import chunk_groups, mla_attend_chunks, mla_decode_attention
from kda_core.model._decode import decode_window, write_matrix
from kda_core.model._fused import (
    FusedWeights,
    KDALayer,
    MLALayer,
    conv_packed,
    inv_rms,
    mlp_folded,
    sigmoid,
)
from kda_core.model._window import StateWindow, window_steps
from kda_core.model.state import KDALayerState, ModelState
from kda_core.model.tiny import TinyHybrid
from kda_core.model.tokenizer import MAX_TOKENS, check_tokens

__all__ = [
    "FusedWeights",
    "StateWindow",
    "decode_window",
    "forward_batch",
    "forward_packed",
    "window_steps",
    "write_matrix",
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


def _silu_into(y: np.ndarray) -> np.ndarray:
    """silu(y) = y / (1 + exp(-y)) written over y (``fused.silu``'s twin, equal to rounding),
    in four passes: exp(-y) is not clipped, an overflow to inf gives y / inf = -0, the value
    silu rounds to there (|silu(y)| < 1e-300 for y < -700)."""
    t = np.negative(y)
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    t += 1.0
    return np.divide(y, t, out=y)


def _gated(x: np.ndarray, o: np.ndarray) -> np.ndarray:
    """sigmoid(x) o = o / (1 + exp(-x)) in four passes (``fused.sigmoid`` times o, equal to
    rounding; an overflow of exp(-x) gives o / inf = 0, as the logistic rounds to there)."""
    t = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    t += 1.0
    return np.divide(o, t, out=t)


def _kda_layer(wt: KDALayer, c, x, cu, S0, win, out):
    """One KDA mixer over packed rows x [T, D] (before norm1): fused projections with the norms
    folded in (``FusedWeights``); the new states go to ``out`` [N, H, K, V]. Returns (y [T, D],
    new conv windows [N, W-1, 3HK])."""
    T, H, K = x.shape[0], c.n_heads, c.head_dim
    HK = H * K
    z = (x * inv_rms(x, c.norm_eps)) @ wt.w_in_n
    y, new_win = conv_packed(z[:, : 3 * HK], wt.taps, cu, win)
    act = _silu_into(y).reshape(T, 3, H, K)  # y is fresh: q and k are normalised in it
    qk = act[:, :2]  # q and k through kda.l2norm in one pass, q's 1/sqrt(K) scale folded in
    inv = np.einsum("tahk,tahk->tah", qk, qk)
    inv += 1e-6
    np.sqrt(inv, out=inv)
    np.divide(1.0, inv, out=inv)
    inv[:, 0] *= K**-0.5
    qk *= inv[..., None]
    # g = lb sigmoid(A (f + b)) = lb / (1 + exp(t)), t = -A (f + b) (-A folded into f_b); an
    # overflow of exp(t) gives lb / inf = -0, the gate's value to rounding
    t = z[:, 4 * HK : 4 * HK + wt.f_b_neg.shape[0]] @ wt.f_b_neg
    t += wt.g_bias_neg
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    t += 1.0
    g = np.divide(c.gate_lower_bound, t, out=t).reshape(T, H, K)
    beta = sigmoid(z[:, -H:])
    o, _ = varlen.kda_varlen(act[:, 0], act[:, 1], act[:, 2], g, beta, cu, S0, scale=1.0, out=out)
    o *= inv_rms(o, c.norm_eps)  # the per-head norm; its weight is folded into w_o_n
    return _gated(z[:, 3 * HK : 4 * HK], o.reshape(T, HK)) @ wt.w_o_n, new_win


def _mla_layer(wt: MLALayer, c, x, cu, pasts):
    """One MLA mixer over packed rows x [T, D] (before norm1), pasts[i] [P_i, C]: one fused
    projection for every row, decodes in one padded batch (``mla_decode_attention``), prefill
    chunks of equal length together (``mla_attend_chunks``). Returns (y [T, D], new latents
    [T, C])."""
    C, Hm, dh = wt.norm_c.shape[0], c.mla_heads, c.mla_head_dim
    Hd = Hm * dh
    z = (x * inv_rms(x, c.norm_eps)) @ wt.w_in_n
    new = z[:, :C] * inv_rms(z[:, :C], c.norm_eps)
    new *= wt.norm_c
    q = z[:, C : C + Hd]
    o = np.empty((x.shape[0], Hd))
    lens = np.diff(cu)
    one = np.flatnonzero(lens == 1)
    if one.size:
        r = cu[one]
        o[r] = mla_decode_attention(q[r], new[r], [pasts[i] for i in one], wt.uk, wt.uv, dh)
    P = np.array([p.shape[0] for p in pasts])
    for seqs in chunk_groups(lens, P, Hm):
        n = int(lens[seqs[0]])
        rows = (cu[seqs, None] + np.arange(n)).reshape(-1)
        q_rows = q[rows].reshape(seqs.size, n, Hd)
        new_rows = new[rows].reshape(seqs.size, n, C)
        att = mla_attend_chunks(q_rows, new_rows, [pasts[i] for i in seqs], wt.uk, wt.uv, dh)
        o[rows] = att.reshape(-1, Hd)
    gate = sigmoid(z[:, C + Hd :])
    gate *= o
    return gate @ wt.w_o, new


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
    c = model.config
    lens = np.array([len(s) for s in ids])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = model.embed[np.concatenate(ids)]  # a fresh array: the residual adds go in place
    S_new = np.empty_like(S)
    W_new = np.empty_like(conv)
    lat = np.empty((x.shape[0], len(model.mla_layers), c.mla_latent))
    for layer, wt in enumerate(wts.layers):
        j = model._slot[layer]
        if isinstance(wt, KDALayer):
            y, W_new[j] = _kda_layer(wt, c, x, cu, S[j], conv[j], S_new[j])
        else:
            y, lat[:, j] = _mla_layer(wt, c, x, cu, [p[:, j] for p in pasts])
        x += y
        x += mlp_folded(wts.w_up_n[layer], model.blocks[layer].w_down, c.mlp_hidden, x, c.norm_eps)
    logits = (x * inv_rms(x, c.norm_eps)) @ wts.lm_head_n
    out = [logits[cu[i] : cu[i + 1]] for i in range(len(ids))]
    lat.flags.writeable = False  # every sequence's latents are views of it: nothing writes
    return out, S_new, W_new, [lat[cu[i] : cu[i + 1]] for i in range(len(ids))]


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
