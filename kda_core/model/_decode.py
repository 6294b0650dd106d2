"""The all-decode step (one token per request) as few, large numpy calls: the runner's hot path.

``forward_packed`` handles any mix of prefill chunks and decodes through the model's own layer
functions; once every request in a step decodes, ``decode_window`` does the same pass with

* fused input projections, one matmul per layer: KDA ``h @ [w_qkv | w_gate | f_a | w_beta]``,
  MLA ``h @ [w_dkv | w_q | w_gate]`` (``FusedWeights``, folded once per model), the RMSNorm
  weights folded into the matrices' rows (``rms(x) w @ W = (x / rms) @ (diag(w) W)``);
* the conv step as one einsum over the window and the token's row, appended in place
  (``model._rows.ConvRows``: the new window is the old one moved by a row, a view);
* the gate ``exp(lb sigmoid(A (f + b)))`` as one affine tanh (``sigmoid(x) = (1 + tanh(x/2))
  / 2`` with ``A / 2`` folded into ``f_b``), q and k normalised in one call;
* the delta-rule step through ``model._window.StateWindow``: the old state read once for ``k^T
  diag(alpha) S`` and ``q^T diag(alpha) S``, and, when the step writes, the new state as one
  batched matmul ``S' = [diag(alpha) | k] @ [S; u^T]`` (one more column and row per pending
  step); twin (tests/test_serve_batch.py): the three elementwise passes (~1.5x slower in place;
  blocking the requests, updating in place or two row blocks measured no faster). ``u = beta
  (v - S^T diag(alpha) k)``, read-out ``S'^T q = S^T diag(alpha) q + u (k.q)`` (the
  recurrence of ``kda.recurrent``);
* the read-out's scale folded into the per-head norm (``rmsnorm(s o, eps) = rmsnorm(o, eps /
  s^2)``) and the norm weight into ``w_o``;
* MLA attention in the absorbed form (``model._attend.mla_attend_padded``) over one padded
  buffer of every request's latents, appended to in place (``model._rows.LatentRows``).

Same inputs as ``forward_packed``, its twin (tests/test_serve_batch.py: they agree to rounding,
both against ``TinyHybrid.forward``); it returns every request's whole latents (views).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core.model._attend import mla_attend_padded
from kda_core.model._fused import FusedWeights, KDALayer, MLALayer, inv_rms, mlp_folded, silu
from kda_core.model._rows import ConvRows, LatentRows
from kda_core.model._window import StateWindow

__all__ = ["decode_window", "write_matrix"]


def _kda_decode(wt: KDALayer, c, x, conv_rows, window: StateWindow, j: int, M, S_out):
    """One KDA mixer (layer j of the window's states), one token per request: x [N, D] (before
    norm1), conv_rows [N, W, 3HK] (the window, then the row this step's raw projections go
    into: ``ConvRows``); with S_out (rows :K of layer j of a new window buffer) the states are
    written there (``StateWindow.step``). Returns y [N, D]."""
    N, H, K = x.shape[0], c.n_heads, c.head_dim
    HK = H * K
    z = (x * inv_rms(x, c.norm_eps)) @ wt.w_in_n
    conv_rows[:, -1] = z[:, : 3 * HK]  # the token's row: the next window is the last W-1 rows
    y = np.einsum("nwd,wd->nd", conv_rows, wt.taps)
    act = silu(y).reshape(N, 3, H, K)
    ss = np.einsum("nahk,nahk->nah", act[:, :2], act[:, :2])
    qk = act[:, :2] * (1.0 / np.sqrt(ss + 1e-6))[..., None]  # kda.l2norm of q and k
    t = z[:, 4 * HK : 4 * HK + wt.f_b_half.shape[0]] @ wt.f_b_half
    t += wt.g_bias_half
    np.tanh(t, out=t)
    lb = 0.5 * c.gate_lower_bound
    t *= lb
    t += lb
    alpha = np.exp(t, out=t).reshape(N, H, K)
    beta = 0.5 * (1.0 + np.tanh(0.5 * z[:, -H:]))  # the model's sigmoid
    o = window.step(j, qk, act[:, 2], alpha, beta, M, S_out)  # S_t^T q, [N, H, V]
    # K^-0.5 o through the norm: rmsnorm(s o, eps) = rmsnorm(o, eps / s^2)
    o *= inv_rms(o, c.norm_eps * K)
    gate = np.tanh(0.5 * z[:, 3 * HK : 4 * HK])
    gate += 1.0
    gate *= 0.5
    gate *= o.reshape(N, HK)
    return gate @ wt.w_o_n


def _mla_decode(wt: MLALayer, c, x, lat, n, rows):
    """One MLA mixer, one query per request over rows ``:n[i]`` of lat [N, L, C] (request i's
    past latents, then its new one, written here into row ``rows[i]`` = n[i] - 1)."""
    C = wt.norm_c.shape[0]
    Hd = c.mla_heads * c.mla_head_dim
    z = (x * inv_rms(x, c.norm_eps)) @ wt.w_in_n
    new = z[:, :C]
    new *= inv_rms(new, c.norm_eps)
    new *= wt.norm_c
    lat[rows] = new
    o = mla_attend_padded(z[:, C : C + Hd], lat, n, wt.uk, wt.uv, c.mla_head_dim)
    gate = np.tanh(0.5 * z[:, C + Hd :])
    gate += 1.0
    gate *= 0.5
    gate *= o
    return gate @ wt.w_o


def write_matrix(wts: FusedWeights, N: int, H: int, K: int, R: int) -> np.ndarray:
    """The zeroed [N, H, K, K+R] write matrix of ``StateWindow`` (kept between steps in
    ``wts.update_mats``: its off-diagonal zeros in the first K columns are never written)."""
    M = wts.update_mats.get(N)
    if M is None or M.shape != (N, H, K, K + R):
        wts.update_mats.clear()  # one batch size kept: the batch changes rarely
        M = wts.update_mats[N] = np.zeros((N, H, K, K + R))
    return M


def decode_window(
    wts: FusedWeights,
    tokens: Sequence[int],
    window: StateWindow,
    conv: np.ndarray,
    pasts: Sequence[np.ndarray],
    write: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, list[np.ndarray], StateWindow]:
    """``forward_packed`` for one token per request (no validation), from a ``StateWindow``.

    conv [L, N, W-1, D] (read only), pasts[i] [P_i, n_mla, C]. Returns (logits [N, vocab],
    the new S [L, N, H, K, V] when ``write`` (else None: the step stays pending in the window),
    new conv, every request's latents after the step: request i's [P_i + 1, n_mla, C], its
    pasts then the new row, the window for the next step). Request i's new state is the view
    ``S_new[:, i]`` of fresh arrays (rows :K of the next window's buffer), its latents a
    read-only view of one padded buffer (``LatentRows``, kept in ``wts.latents``: when the
    pasts are its views from the previous step only the new rows are written, else the pasts
    are copied into a new one; both MLA layers read it: no per-layer gather, no per-request
    concatenation). A full window must write.
    """
    model = wts.model
    c = model.config
    eps, F = c.norm_eps, c.mlp_hidden
    L, N, H, K, V = window.base.shape
    x = model.embed[np.asarray(tokens)]
    new = window.new_buffer() if write else None
    if not isinstance(wts.convs, ConvRows) or not wts.convs.extends(conv):
        wts.convs = ConvRows(conv)
    conv_rows = wts.convs.begin()
    M = write_matrix(wts, N, H, K, window.R)
    if not isinstance(wts.latents, LatentRows) or not wts.latents.extends(pasts):
        wts.latents = LatentRows(pasts)
    lat, n = wts.latents.grow()  # every request's rows then one new row (written per layer)
    rows = (np.arange(N), n - 1)
    for layer, wt in enumerate(wts.layers):
        j = model._slot[layer]
        if isinstance(wt, KDALayer):
            out = None if new is None else new[j, :, :, :K]
            y = _kda_decode(wt, c, x, conv_rows[j], window, j, M, out)
        else:
            y = _mla_decode(wt, c, x, lat[:, :, j], n, rows)
        x = x + y
        x += mlp_folded(wts.w_up_n[layer], model.blocks[layer].w_down, F, x, eps)
    logits = (x * inv_rms(x, eps)) @ wts.lm_head_n
    S_new = None if new is None else new[:, :, :, :K]
    return logits, S_new, wts.convs.advance(), wts.latents.views(), window.advanced(new)
