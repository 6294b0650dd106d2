"""Varlen (packed) KDA, batched step and short conv against their per-sequence twins."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kda_core import kda
from kda_core.kda import _inputs, conv_varlen, varlen
from kda_core.kda import _varlen_rounds as varlen_rounds
from kda_core.kda.conv import short_conv
from kda_core.kda.conv_varlen import _check_conv_args
from kda_core.kda.varlen import _step
from tests.kda_testdata import kda_inputs, step

H, K, V = 3, 8, 6


def step_batch(S, q, k, v, g, beta, *, scale=None) -> tuple[np.ndarray, np.ndarray]:
    """One token each for B sequences: S [B, H, K, V]; q, k, g [B, H, K]; v [B, H, V];
    beta [B, H]. Returns (o [B, H, V], S' [B, H, K, V]) without touching the input S.

    The recurrence of ``kda.recurrent`` (decay, delta-rule error, rank-1 write, read-out after
    the write) with the batch folded into the head axis."""
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 4:
        raise ValueError(f"S must have shape [B, H, K, V], got rank {S.ndim}")
    B, H, K, Vd = S.shape
    q, k, v, g, beta, _, scale = _inputs.validate(
        np.reshape(q, (B * H, 1, K)).swapaxes(0, 1),
        np.reshape(k, (B * H, 1, K)).swapaxes(0, 1),
        np.reshape(v, (B * H, 1, Vd)).swapaxes(0, 1),
        np.reshape(g, (B * H, 1, K)).swapaxes(0, 1),
        np.reshape(beta, (1, B * H)),
        None,
        scale,
    )
    o, Sn = _step(S, q[0], k[0], v[0], g[0], beta[0], scale)
    return o, Sn


def step_batch_naive(S, q, k, v, g, beta, *, scale=None) -> tuple[np.ndarray, np.ndarray]:
    """The twin: ``kda_testdata.step`` (``kda.recurrent`` of one token) per sequence."""
    S = np.asarray(S, dtype=np.float64)
    outs, states = [], []
    for b in range(S.shape[0]):
        o, Sb = step(S[b], q[b], k[b], v[b], g[b], beta[b], scale=scale)
        outs.append(o)
        states.append(Sb)
    return np.stack(outs), np.stack(states)


def short_conv_varlen_naive(
    x, w, cu_seqlens, windows=None, activation: str = "silu"
) -> tuple[np.ndarray, np.ndarray]:
    """The twin: ``conv.short_conv`` per sequence (an empty one keeps its window)."""
    x, w, cu, win = _check_conv_args(x, w, cu_seqlens, windows, activation)
    y = np.empty_like(x)
    new = win.copy()
    for i in range(cu.size - 1):
        s = slice(cu[i], cu[i + 1])
        if cu[i + 1] > cu[i]:
            y[s], new[i] = short_conv(x[s], w, win[i], activation)
    return y, new


@pytest.fixture(params=["gathered", "per_piece"])
def state_path(request, monkeypatch):
    """Both ways the batched rounds hold states that are not numbered consecutively: gathered
    into one array for a batched scan step (small states, the default at these sizes), or
    stepped piece by piece on their own rows of S (states of >= _STATE_VIEW_BYTES)."""
    if request.param == "per_piece":
        monkeypatch.setattr(varlen_rounds, "_STATE_VIEW_BYTES", 0)
    else:
        assert np.zeros((H, K, V)).nbytes < varlen_rounds._STATE_VIEW_BYTES
    return request.param


def packed(rng, lens, g_scale=1.0):
    T = int(sum(lens))
    q, k, v, g, beta, _ = kda_inputs(rng, max(T, 1), H, K, V, g_scale)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    S0 = rng.standard_normal((len(lens), H, K, V))
    return q[:T], k[:T], v[:T], g[:T], beta[:T], cu, S0


def recurrent_loop(q, k, v, g, beta, cu, S0):
    """An independent reference: the token recurrence per sequence (not the chunked code)."""
    o = np.empty(v.shape)
    S = S0.copy()
    for i in range(len(cu) - 1):
        s = slice(cu[i], cu[i + 1])
        if cu[i + 1] > cu[i]:
            o[s], S[i] = kda.recurrent(q[s], k[s], v[s], g[s], beta[s], initial_state=S0[i])
    return o, S


@pytest.mark.parametrize(
    "lens",
    [[1], [1, 1, 1], [5], [64], [65, 1, 130, 7], [1, 200, 3, 16, 17, 0, 64], [300], [16] * 9],
)
@pytest.mark.parametrize("chunk_size", [16, 64])
def test_chunked_varlen_equals_per_sequence(lens, chunk_size, state_path):
    rng = np.random.default_rng(len(lens) * 100 + sum(lens))
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    if cu[-1] == 0:
        pytest.skip("no tokens")
    o, S = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0, chunk_size=chunk_size)
    o2, S2 = varlen.chunked_varlen_naive(
        q, k, v, g, beta, cu, initial_states=S0, chunk_size=chunk_size
    )
    o3, S3 = recurrent_loop(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(o, o2, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S, S2, atol=1e-10, rtol=0)
    np.testing.assert_allclose(o, o3, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S, S3, atol=1e-10, rtol=0)
    for i in np.flatnonzero(np.diff(cu) == 0):  # an empty sequence keeps its state
        np.testing.assert_array_equal(S[i], S0[i])


def test_many_sequences_and_strong_decay():
    rng = np.random.default_rng(7)
    lens = list(rng.integers(1, 90, 40))
    q, k, v, g, beta, cu, S0 = packed(rng, lens, g_scale=8.0)
    o, S = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    o2, S2 = recurrent_loop(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(o, o2, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S, S2, atol=1e-10, rtol=0)


def test_initial_states_not_written_and_zero_default():
    rng = np.random.default_rng(3)
    q, k, v, g, beta, cu, S0 = packed(rng, [10, 20])
    keep = S0.copy()
    varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    np.testing.assert_array_equal(S0, keep)
    o, S = varlen.chunked_varlen(q, k, v, g, beta, cu)
    o2, S2 = recurrent_loop(q, k, v, g, beta, cu, np.zeros_like(S0))
    np.testing.assert_allclose(S, S2, atol=1e-10, rtol=0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 70), min_size=1, max_size=12), st.sampled_from([16, 32, 64]))
def test_chunked_varlen_hypothesis(lens, chunk_size):
    if sum(lens) == 0:
        lens = lens + [1]
    rng = np.random.default_rng(sum(lens))
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    o, S = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0, chunk_size=chunk_size)
    o2, S2 = recurrent_loop(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(o, o2, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S, S2, atol=1e-10, rtol=0)


def test_step_batch_equals_step_and_kda_varlen_mixes():
    rng = np.random.default_rng(11)
    B = 7
    q, k, v, g, beta, _ = kda_inputs(rng, B, H, K, V)
    S0 = rng.standard_normal((B, H, K, V))
    o, S = step_batch(S0, q, k, v, g, beta)
    o2, S2 = step_batch_naive(S0, q, k, v, g, beta)
    np.testing.assert_allclose(o, o2, atol=1e-12, rtol=0)
    np.testing.assert_allclose(S, S2, atol=1e-12, rtol=0)
    lens = [1, 40, 1, 0, 3, 1]
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    o, S = varlen.kda_varlen(q, k, v, g, beta, cu, S0)
    o2, S2 = recurrent_loop(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(o, o2, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S, S2, atol=1e-10, rtol=0)


@pytest.mark.parametrize("W", [1, 2, 4])
@pytest.mark.parametrize("lens", [[1], [1, 1, 5], [2, 0, 9, 1, 3], [30, 1]])
def test_short_conv_varlen_equals_per_sequence(W, lens):
    rng = np.random.default_rng(W * 10 + len(lens))
    D = 5
    T = sum(lens)
    x = rng.standard_normal((T, D))
    w = rng.standard_normal((D, W))
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    win = rng.standard_normal((len(lens), W - 1, D))
    for act in ("silu", "identity"):
        y, nw = conv_varlen.short_conv_varlen(x, w, cu, win, act)
        y2, nw2 = short_conv_varlen_naive(x, w, cu, win, act)
        np.testing.assert_allclose(y, y2, atol=1e-12, rtol=0)
        np.testing.assert_allclose(nw, nw2, atol=0, rtol=0)
        for i in range(len(lens)):  # and against conv.short_conv directly
            s = slice(cu[i], cu[i + 1])
            if lens[i]:
                yi, wi = short_conv(x[s], w, win[i], act)
                np.testing.assert_allclose(y[s], yi, atol=1e-12, rtol=0)
                np.testing.assert_array_equal(nw[i], wi)
            else:
                np.testing.assert_array_equal(nw[i], win[i])


@pytest.mark.parametrize(
    "cu, msg",
    [
        ([0, 3, 2, 5], "never decrease"),
        ([1, 5], "start at 0"),
        ([0, 4], "end at T = 5"),
        ([0], "N \\+ 1 offsets"),
        ([0.0, 5.0], "integer"),
    ],
)
def test_bad_cu_seqlens(cu, msg):
    rng = np.random.default_rng(0)
    q, k, v, g, beta, _ = kda_inputs(rng, 5, H, K, V)
    with pytest.raises(ValueError, match=msg):
        varlen.chunked_varlen(q, k, v, g, beta, np.array(cu))
    with pytest.raises(ValueError, match="cu_seqlens"):
        conv_varlen.short_conv_varlen(np.zeros((5, 2)), np.zeros((2, 3)), np.array(cu))


def test_bad_initial_states_and_windows():
    rng = np.random.default_rng(0)
    q, k, v, g, beta, _ = kda_inputs(rng, 5, H, K, V)
    with pytest.raises(ValueError, match="initial_states must have shape"):
        varlen.chunked_varlen(q, k, v, g, beta, [0, 2, 5], initial_states=np.zeros((3, H, K, V)))
    with pytest.raises(ValueError, match="windows must have shape"):
        conv_varlen.short_conv_varlen(
            np.zeros((5, 2)), np.zeros((2, 3)), [0, 5], np.zeros((1, 1, 2))
        )


def test_chunked_varlen_heads_over_threads_equal_one_thread(monkeypatch):
    """Large packed inputs split their heads over threads as kda.chunked does; a head's
    arithmetic (long sequences through chunkwise, short ones in batched rounds) is unchanged."""
    from kda_core.kda import chunkwise

    rng = np.random.default_rng(7)
    q, k, v, g, beta, cu, S0 = packed(rng, [300, 5, 64, 1, 130])
    monkeypatch.setenv("KDA_THREADS", "1")
    o1, S1 = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setattr(chunkwise, "_GROUP_STATE", 0)
    monkeypatch.setenv("KDA_THREADS", "2")
    assert len(chunkwise._head_groups(1, H, K, V)) == 2  # the split really happens
    o2, S2 = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    np.testing.assert_allclose(o2, o1, atol=1e-13, rtol=0)
    np.testing.assert_allclose(S2, S1, atol=1e-13, rtol=0)
    o3, S3 = recurrent_loop(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(o2, o3, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S2, S3, atol=1e-10, rtol=0)


@pytest.mark.parametrize("lens", [[100, 156], [100, 1, 155]])  # prefill only; mixed with a decode
def test_kda_varlen_out_and_layouts(lens):
    """A float32 ``out`` is filled (the work stays float64) and returned; Fortran-ordered inputs
    give the same result; the offsets, chunk size and state shape are checked."""
    rng = np.random.default_rng(3)
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    o_ref, S_ref = varlen.kda_varlen(q, k, v, g, beta, cu, S0)
    np.testing.assert_allclose(S_ref, recurrent_loop(q, k, v, g, beta, cu, S0)[1], atol=1e-10)
    out = np.empty(S0.shape, np.float32)
    o, S = varlen.kda_varlen(q, k, v, g, beta, cu, S0, out=out)
    assert S is out
    np.testing.assert_array_equal(out, S_ref.astype(np.float32))
    np.testing.assert_array_equal(o, o_ref)
    fortran = [np.asfortranarray(x) for x in (q, k, v, g, beta)]
    o_f, S_f = varlen.kda_varlen(*fortran, cu, S0)
    np.testing.assert_allclose(o_f, o_ref, atol=1e-12, rtol=0)
    np.testing.assert_allclose(S_f, S_ref, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="chunk_size must be"):
        varlen.kda_varlen(q, k, v, g, beta, cu, S0, chunk_size=0)
    with pytest.raises(ValueError, match=r"initial_states must have shape \[N, H, K, V\]"):
        varlen.kda_varlen(q, k, v, g, beta, cu, S0[0])


def test_chunked_varlen_fortran_ordered_inputs():
    rng = np.random.default_rng(4)
    q, k, v, g, beta, cu, S0 = packed(rng, [64, 128, 64])
    o, S = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    fortran = [np.asfortranarray(x) for x in (q, k, v, g, beta)]
    o_f, S_f = varlen.chunked_varlen(*fortran, cu, initial_states=S0)
    np.testing.assert_allclose(o_f, o, atol=1e-12, rtol=0)
    np.testing.assert_allclose(S_f, S, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "lens, zero",
    [
        ([16] * 6, []),  # pieces end to end, states consecutive: views of q, ..., o and S
        ([16] * 6, [0, 1, 2, 3, 4, 5]),  # ... from zero states: the scan without S0's terms
        ([16] * 6, [0, 2, 3, 5]),  # some zero, some not: the full scan
        ([16, 5, 16, 9], [1, 2]),  # padded pieces: rows gathered, zeros written in
        ([16, 200, 16, 40], [0, 3]),  # a long one's full chunks in kda.chunked, its tail joins
        ([16, 40, 16, 16], [0, 2, 3]),  # chunk 64: 40 in its own bucket, states 0, 2, 3 gathered
    ],
)
@pytest.mark.parametrize("chunk_size", [16, 64])
def test_short_pieces_views_and_zero_states(lens, zero, chunk_size, state_path):
    """The batched rounds' fast paths (pieces read and written as views, a group of zero
    states scanned without their terms) against the token recurrence per sequence; through
    kda_varlen (the serving call, states into ``out``) and chunked_varlen."""
    rng = np.random.default_rng(sum(lens) + len(zero))
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    S0[zero] = 0.0
    o_ref, S_ref = recurrent_loop(q, k, v, g, beta, cu, S0)
    out = np.full(S0.shape, np.nan)
    o, S = varlen.kda_varlen(q, k, v, g, beta, cu, S0, chunk_size=chunk_size, out=out)
    assert S is out
    o2, S2 = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0, chunk_size=chunk_size)
    for oo, SS in ((o, S), (o2, S2)):
        np.testing.assert_allclose(oo, o_ref, atol=1e-10, rtol=0)
        np.testing.assert_allclose(SS, S_ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40, 64])
@pytest.mark.parametrize("C", [16, 64])
def test_rounds_of_equal_pieces_equal_the_general_rounds(n, C):
    """The one-bucket shortcut for pieces of one length (up to C) against the general bucketing
    (same chunk size, sequences, first rows and sizes); longer ones take the general path."""
    lens = np.full(7, n)
    starts = np.arange(7) * 100 + 3
    fast = list(varlen_rounds.rounds(starts, lens, C))
    slow = list(varlen_rounds._rounds_general(starts, lens, C))
    assert len(fast) == len(slow) >= 1
    for (c1, *arrays1), (c2, *arrays2) in zip(fast, slow):
        assert c1 == c2
        for a, b in zip(arrays1, arrays2):
            np.testing.assert_array_equal(a, b)
