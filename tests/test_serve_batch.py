"""Batched model passes against per-request TinyHybrid calls (any weights: two seeds)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kda_core.model import ModelConfig, TinyHybrid
from kda_core.model._decode import decode_window
from kda_core.model._fused import FusedWeights, conv_packed
from kda_core.model._window import DEFER_STEPS, StateWindow, window_steps
from kda_core.model.batch import forward_batch, forward_packed
from tests.test_varlen import short_conv_varlen_naive

MODELS = {0: TinyHybrid(), 5: TinyHybrid(weights="random", seed=5)}


def state_update_naive(S, alpha, k, u) -> np.ndarray:
    """The twin of the one-GEMM update: ``diag(alpha) S + k u^T`` per (request, head) in three
    passes (decay, outer product, add). S [N, H, K, V]; alpha, k [N, H, K]; u [N, H, V]."""
    out = np.einsum("nhk,nhkv->nhkv", alpha, S)
    out += np.einsum("nhk,nhv->nhkv", k, u)
    return out


def decode_packed(
    wts: FusedWeights,
    tokens: Sequence[int],
    S: np.ndarray,
    conv: np.ndarray,
    pasts: Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """``decode_window`` writing every step (a window of one step: the eager form). S [L, N,
    H, K, V] is not changed; when it is a previous call's new S, that call's buffer (rows :K
    of [L, N, H, K+1, V]) is used as is and its scratch row K written. Returns (logits, new
    S, new conv, latents)."""
    out = decode_window(wts, tokens, StateWindow.of(S, 1), conv, pasts, True)
    assert out[1] is not None
    return out[0], out[1], out[2], out[3]


def prefilled(model, rng, n):
    st = model.new_state()
    if n:
        model.prefill(list(rng.integers(0, 256, n)), st)
    return st


def prefilled_batch(model, rng, pasts):
    """A state per past length and the batch arrays a decode step reads: (states, S [L, N, H,
    K, V], conv [L, N, W-1, D], latents per request)."""
    states = [prefilled(model, rng, n) for n in pasts]
    L = len(model.kda_layers)
    S = np.stack([np.stack([st.kda[j].S for st in states]) for j in range(L)])
    W = np.stack([np.stack([st.kda[j].conv for st in states]) for j in range(L)])
    return states, S, W, [st.mla_kv for st in states]


@pytest.mark.parametrize("seed", sorted(MODELS))
@pytest.mark.parametrize(
    "pasts, lens",
    [
        ([0], [1]),
        ([0, 3, 0], [1, 1, 1]),
        ([0, 5, 17, 0], [40, 1, 3, 70]),
        ([2] * 9, [1] * 9),
        ([0, 4, 0], [16, 16, 5]),  # prefill chunks only (kda_varlen gathers no rows)
    ],
)
def test_forward_batch_equals_per_request_forward(seed, pasts, lens):
    model = MODELS[seed]
    rng = np.random.default_rng(sum(lens) + seed)
    states = [prefilled(model, rng, n) for n in pasts]
    seqs = [list(rng.integers(0, 256, n)) for n in lens]
    snap = [st.copy() for st in states]
    logits, new = forward_batch(model, seqs, states)
    for i, (seq, st) in enumerate(zip(seqs, snap)):
        ref, ref_state = model.forward(seq, st)
        np.testing.assert_allclose(logits[i], ref, atol=1e-10, rtol=0)
        assert new[i].tokens == ref_state.tokens
        np.testing.assert_allclose(new[i].mla_kv, ref_state.mla_kv, atol=1e-12, rtol=0)
        for a, b in zip(new[i].kda, ref_state.kda):
            np.testing.assert_allclose(a.S, b.S, atol=1e-10, rtol=0)
            np.testing.assert_allclose(a.conv, b.conv, atol=1e-12, rtol=0)
    for a, b in zip(states, snap):  # pure: the inputs are untouched
        assert a.tokens == b.tokens and a.kda_distance(b) == 0.0


@pytest.mark.parametrize("seed", sorted(MODELS))
def test_batched_decode_equals_decode_step_over_many_steps(seed):
    model = MODELS[seed]
    rng = np.random.default_rng(1)
    states = [prefilled(model, rng, n) for n in (1, 9, 30, 2, 64)]
    twins = [st.copy() for st in states]
    toks = [int(t) for t in rng.integers(0, 256, len(states))]
    for _ in range(6):
        logits, states = forward_batch(model, [[t] for t in toks], states)
        got = np.concatenate(logits, axis=0)
        ref = np.stack([model.decode_step(t, st) for t, st in zip(toks, twins)])
        np.testing.assert_allclose(got, ref, atol=1e-10, rtol=0)
        toks = [int(np.argmax(r)) for r in ref]
    for a, b in zip(states, twins):
        assert a.tokens == b.tokens and a.kda_distance(b) < 1e-12


def test_forward_batch_bad_input():
    model = MODELS[0]
    st = model.new_state()
    with pytest.raises(ValueError, match="seqs and states"):
        forward_batch(model, [[1]], [])
    with pytest.raises(ValueError, match=r"seqs\[0\] must be ids in \[0, 255\]"):
        forward_batch(model, [[300]], [st])
    with pytest.raises(ValueError, match="model must be a TinyHybrid"):
        forward_batch(object(), [[1]], [st])


@pytest.mark.parametrize("seed", sorted(MODELS))
@pytest.mark.parametrize("pasts", [[0, 0, 0], [3, 3, 3, 3], [0, 5, 17, 2, 40]])
def test_decode_packed_equals_forward_packed(seed, pasts):
    """The fused all-decode pass against the general packed pass (ragged and equal pasts).
    Bounds: rounding of D = 128-term float64 dot products of O(1) values (~1e-13), with room."""
    model = MODELS[seed]
    rng = np.random.default_rng(len(pasts) + seed)
    states, S, W, kvs = prefilled_batch(model, rng, pasts)
    toks = [int(t) for t in rng.integers(0, 256, len(states))]
    ref = forward_packed(model, [[t] for t in toks], S, W, kvs)
    got = decode_packed(FusedWeights.of(model), toks, S, W, kvs)
    np.testing.assert_allclose(got[0], np.concatenate(ref[0]), atol=1e-12, rtol=0)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-12, rtol=0)
    np.testing.assert_allclose(got[2], ref[2], atol=1e-12, rtol=0)
    assert len(got[3]) == len(kvs)
    for a, p, b in zip(got[3], kvs, ref[3]):  # every request's latents: its pasts, then new
        assert a.shape == (p.shape[0] + 1,) + p.shape[1:] and not a.flags.writeable
        np.testing.assert_array_equal(a[:-1], p)
        np.testing.assert_allclose(a[-1:], b, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "N, H, K, V, R, lb", [(1, 1, 1, 1, 1, -5.0), (3, 2, 4, 5, 2, -5.0), (5, 2, 8, 6, 8, -5.0),
                          (4, 4, 32, 32, 8, -5.0), (3, 2, 4, 5, 6, -50.0)],
)  # fmt: skip
def test_state_window_equals_the_step_by_step_recurrence(N, H, K, V, R, lb):
    """StateWindow (deferred writes) against the delta rule written every step, in the three
    elementwise passes of ``state_update_naive``: read-outs every step, states whenever the
    window writes (full, or at random steps) and whenever its pending entries are written out
    mid-window (``write_pending``, which leaves the window as it was). lb = -50 with R = 6
    (window_steps' cap there): the gates' product reaches e^-300 and stays exact. Bound: the
    same sums in another order, O(T) roundings of O(1) terms."""
    rng = np.random.default_rng(N * K + R)
    L, T = 2, 19
    S = rng.standard_normal((L, N, H, K, V))
    window = StateWindow.of(S, R)
    M = np.zeros((N, H, K, K + R))
    for _ in range(T):
        write = window.r + 1 == R or rng.random() < 0.25
        new = window.new_buffer() if write else None
        for j in range(L):
            qk = rng.standard_normal((N, 2, H, K))
            qk /= np.linalg.norm(qk, axis=-1, keepdims=True)
            q, k = qk[:, 0], qk[:, 1]
            v = rng.standard_normal((N, H, V))
            alpha = np.exp(lb * rng.uniform(0.9 if lb < -10 else 0.0, 1.0, (N, H, K)))
            beta = rng.uniform(0.0, 1.0, (N, H))
            read_k = np.einsum("nhk,nhkv->nhv", alpha * k, S[j])
            u = beta[..., None] * (v - read_k)
            S[j] = state_update_naive(S[j], alpha, k, u)
            out = None if new is None else new[j, :, :, :K]
            o = window.step(j, qk, v, alpha, beta, M, out)
            np.testing.assert_allclose(o, np.einsum("nhk,nhkv->nhv", q, S[j]), atol=1e-12, rtol=0)
            if out is not None:
                np.testing.assert_allclose(out, S[j], atol=1e-12, rtol=0)
        window = window.advanced(new)
        if window.r and rng.random() < 0.3:
            np.testing.assert_allclose(window.write_pending(M), S, atol=1e-12, rtol=0)
    assert window_steps(-5.0) == DEFER_STEPS and window_steps(-50.0) == 6


@pytest.mark.parametrize("pasts", [[0, 0, 0], [0, 5, 17, 2, 40]])
def test_decode_packed_chained_on_its_own_output(pasts):
    """Steady decoding feeds decode_packed its own new state (the augmented buffer is reused,
    its scratch row written): several steps against forward_packed chained, and the states a
    step returned are not changed by the next one."""
    model = MODELS[5]
    rng = np.random.default_rng(len(pasts))
    states, S, W, kvs = prefilled_batch(model, rng, pasts)
    rS, rW, rkv = S, W, kvs
    wts = FusedWeights.of(model)
    for _ in range(4):
        toks = [int(t) for t in rng.integers(0, 256, len(states))]
        ref = forward_packed(model, [[t] for t in toks], rS, rW, rkv)
        kept = S.copy()
        got = decode_packed(wts, toks, S, W, kvs)
        np.testing.assert_allclose(got[0], np.concatenate(ref[0]), atol=1e-11, rtol=0)
        np.testing.assert_allclose(got[1], ref[1], atol=1e-11, rtol=0)
        rS, rW = ref[1], ref[2]
        rkv = [np.concatenate([p, n], axis=0) for p, n in zip(rkv, ref[3])]
        np.testing.assert_array_equal(S, kept)  # the input state stayed as it was
        for a, b in zip(got[3], rkv):  # every request's latents: the chained reference's
            np.testing.assert_allclose(a, b, atol=1e-11, rtol=0)
        S, W = got[1:3]
        kvs = got[3]
    assert S.base is not None and S.base.shape[3] == S.shape[3] + 1  # the reuse path ran


@pytest.mark.parametrize("pasts, conv_size", [([0, 3], 4), ([7, 0, 2], 4), ([2, 5], 1)])
def test_decode_rows_appended_in_place_never_change_a_view(pasts, conv_size):
    """model._rows: chained steps append each request's new latent row and conv row in place
    (latents: one buffer of 16 rows, then one doubling; conv: 16 spare rows, then a move to a
    new buffer), every latent and conv view a step handed out stays equal to what it was
    (latents read-only), each step equals forward_packed chained on copies, and a step whose
    pasts are not the buffer's last views (one request's shortened) starts a new buffer and
    leaves the old views as they were. conv_size 1: no window, only the token's row."""
    model = (
        MODELS[5]
        if conv_size == 4
        else TinyHybrid(ModelConfig(conv_size=1), weights="random", seed=3)
    )
    rng = np.random.default_rng(sum(pasts))
    states, S, W, kvs = prefilled_batch(model, rng, pasts)
    rS, rW, rkv = S.copy(), W.copy(), [p.copy() for p in kvs]
    wts = FusedWeights.of(model)
    handed: list[tuple[np.ndarray, np.ndarray]] = []  # (view, its values when handed out)
    lat_bases, conv_bases = set(), set()
    for _ in range(20):
        toks = [int(t) for t in rng.integers(0, 256, len(states))]
        ref = forward_packed(model, [[t] for t in toks], rS, rW, rkv)
        logits, S, W, new = decode_packed(wts, toks, S, W, kvs)
        np.testing.assert_allclose(logits, np.concatenate(ref[0]), atol=1e-11, rtol=0)
        np.testing.assert_allclose(W, ref[2], atol=1e-12, rtol=0)
        rS, rW = ref[1], ref[2]
        rkv = [np.concatenate([p, n], axis=0) for p, n in zip(rkv, ref[3])]
        for p, v in zip(kvs, new):
            assert not v.flags.writeable and v.shape[0] == p.shape[0] + 1
            np.testing.assert_array_equal(v[:-1], p)
        handed += [(v, v.copy()) for v in new] + [(W, W.copy())]
        lat_bases.add(id(wts.latents.buf))
        conv_bases.add(id(wts.convs.buf))
        kvs = new
    assert len(lat_bases) == 2 and len(conv_bases) == 2  # each buffer once full, moved once
    kvs = [kvs[0][:-1]] + kvs[1:]  # not the last views: a new buffer
    old = wts.latents.buf
    decode_packed(wts, [1] * len(kvs), S, W[:, ::-1].copy(), kvs)  # nor the last conv view
    assert wts.latents.buf is not old
    for v, was in handed:
        np.testing.assert_array_equal(v, was)


@pytest.mark.parametrize("lens", [[5, 5, 5], [1, 7, 3, 16], [2], [4, 0, 3]])
def test_conv_packed_equals_varlen_twin(lens):
    rng = np.random.default_rng(sum(lens))
    D, W = 12, 4
    cu = np.concatenate([[0], np.cumsum(lens)])
    x = rng.standard_normal((int(cu[-1]), D))
    w = rng.standard_normal((D, W))
    win = rng.standard_normal((len(lens), W - 1, D))
    y, new = conv_packed(x, np.ascontiguousarray(w.T), cu, win)
    y_ref, new_ref = short_conv_varlen_naive(x, w, cu, win, activation="identity")
    np.testing.assert_allclose(y, y_ref, atol=1e-13, rtol=0)
    np.testing.assert_allclose(new, new_ref, atol=0, rtol=0)


def test_fused_weights_are_folded_once_per_model():
    """FusedWeights.of: the folded arrays are shared by every call on one model (made once, so
    a serve does not refold ~4 ms of weights) and read-only, the per-serve buffers are fresh,
    and another model gets its own (a dead model's entry goes with it)."""
    import gc

    from kda_core.model import _fused as fused

    model = TinyHybrid(weights="random", seed=11)
    a, b = FusedWeights.of(model), FusedWeights.of(model)
    assert a.layers is b.layers and a.lm_head_n is b.lm_head_n
    assert a.update_mats is not b.update_mats and b.latents is None and b.convs is None
    assert not a.layers[0].w_in_n.flags.writeable and not a.w_up_n[0].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a.lm_head_n[0, 0] = 1.0
    other = FusedWeights.of(MODELS[5])
    assert other.layers is not a.layers
    assert not np.array_equal(other.layers[0].w_in_n, a.layers[0].w_in_n)
    n = len(fused._FOLDED)
    del model, a, b
    gc.collect()
    assert len(fused._FOLDED) == n - 1
