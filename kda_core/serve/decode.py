"""The all-decode step (one token per request) as few, large numpy calls: the runner's hot path.

``forward_packed`` handles any mix of prefill chunks and decodes through the model's own layer
functions; once every request in a step decodes, ``decode_packed`` does the same pass with

* fused input projections, one matmul per layer: KDA ``h @ [w_qkv | w_gate | f_a | w_beta]``,
  MLA ``h @ [w_dkv | w_q | w_gate]`` (``FusedWeights``, built once per ``serve``);
* the conv step as one einsum over the window plus the token's tap (the new window: the old
  one shifted by a row, the token's raw projection last);
* the delta-rule step touching each state three times (an einsum decay into the new state, an
  einsum outer product into a scratch array, one add) and reading the old state once for both
  ``k^T diag(alpha) S`` and ``q^T diag(alpha) S``: with ``S' = diag(alpha) S + k u^T``,
  ``u = beta (v - S^T diag(alpha) k)``, the read-out is ``S'^T q = S^T diag(alpha) q + u (k.q)``
  (the recurrence of ``kda.recurrent``: decay, delta-rule error, rank-1 write, read-out after
  the write).

Same shapes and contract as ``forward_packed`` (its twin; tests/test_serve_batch.py checks
they agree to rounding, and both against ``TinyHybrid.forward`` per request).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core.serve.batch import mla_decode_attention
from kda_core.serve.fused import FusedWeights, KDALayer, l2norm, mlp, rms, sigmoid, silu

__all__ = ["decode_packed"]


def _kda_decode(wt, c, h, S, win, S_out, W_out, scratch):
    """One KDA mixer, one token per request: h [N, D], S [N, H, K, V], win [N, W-1, 3HK];
    the new state goes to S_out, the new window to W_out. Returns y [N, D]."""
    N, H, K = h.shape[0], c.n_heads, c.head_dim
    HK = H * K
    z = h @ wt.w_in
    raw = z[:, : 3 * HK]
    y = np.einsum("nwd,wd->nd", win, wt.taps[:-1])  # the window's taps, then the token's
    y += raw * wt.taps[-1]
    if W_out.shape[1]:  # conv_size 1 keeps no window
        W_out[:, :-1] = win[:, 1:]
        W_out[:, -1] = raw
    act = silu(y).reshape(N, 3, H, K)
    q, k, v = l2norm(act[:, 0]), l2norm(act[:, 1]), act[:, 2]
    f = (z[:, 4 * HK : 4 * HK + wt.f_b.shape[0]] @ wt.f_b).reshape(N, H, K)
    alpha = np.exp(c.gate_lower_bound * sigmoid(wt.decay * (f + wt.dt_bias)))
    beta = sigmoid(z[:, -H:])
    read = np.matmul(np.stack([alpha * k, alpha * q], axis=2), S)  # [N, H, 2, V]
    u = beta[..., None] * (v - read[:, :, 0])
    np.einsum("nhk,nhv->nhkv", k, u, out=scratch)
    np.einsum("nhk,nhkv->nhkv", alpha, S, out=S_out)
    np.add(S_out, scratch, out=S_out)
    qk = np.einsum("nhk,nhk->nh", q, k)
    o = (read[:, :, 1] + qk[..., None] * u) * (K**-0.5)
    gate = sigmoid(z[:, 3 * HK : 4 * HK])
    y = rms(o, wt.norm_w, c.norm_eps).reshape(N, HK) * gate
    return y @ wt.w_o


def _mla_decode(wt, c, h, pasts):
    """One MLA mixer, one query per request over its own past latents plus the new one."""
    C = wt.norm_c.shape[0]
    Hd = c.mla_heads * c.mla_head_dim
    z = h @ wt.w_in
    new = rms(z[:, :C], wt.norm_c, c.norm_eps)
    o = mla_decode_attention(z[:, C : C + Hd], new, pasts, wt.uk, wt.uv, c.mla_head_dim)
    return (o * sigmoid(z[:, C + Hd :])) @ wt.w_o, new


def decode_packed(
    wts: FusedWeights,
    tokens: Sequence[int],
    S: np.ndarray,
    conv: np.ndarray,
    pasts: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``forward_packed`` for one token per request (no validation).

    S [L, N, H, K, V], conv [L, N, W-1, D] (read only), pasts[i] [P_i, n_mla, C]. Returns
    (logits [N, vocab], new S, new conv, new latents [N, 1, n_mla, C]); request i's new state
    is the view ``S_new[:, i]`` of fresh arrays.
    """
    model = wts.model
    c = model.config
    x = model.embed[np.asarray(tokens)]
    S_new = np.empty_like(S)
    W_new = np.empty_like(conv)
    scratch = np.empty_like(S[0])
    lats = []
    for layer, wt in enumerate(wts.layers):
        h = rms(x, wt.norm1, c.norm_eps)
        j = model._slot[layer]
        if isinstance(wt, KDALayer):
            y = _kda_decode(wt, c, h, S[j], conv[j], S_new[j], W_new[j], scratch)
        else:
            y, new = _mla_decode(wt, c, h, [p[:, j] for p in pasts])
            lats.append(new)
        x = x + y
        x = x + mlp(model, layer, x)
    logits = rms(x, model.final_norm, c.norm_eps) @ model.lm_head
    return logits, S_new, W_new, np.stack(lats, axis=1)[:, None]
