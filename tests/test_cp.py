"""kda_core.cp with ranks in this process: every split equals single-rank kda.chunked (float64,
rel <= 1e-10), the two scans equal the sequential fold, varlen equals per-document chunked,
the conv halo equals short_conv, message bytes do not grow with T; bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kda_testdata import conv_naive, kda_inputs

from kda_core import kda
from kda_core.kda import _cp_conv, _cp_rank, _cp_scan, conv, cp


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("P", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("scan", cp.SCANS)
@pytest.mark.parametrize("T", [37, 300])
def test_context_parallel_equals_chunked(rng, P, scan, T):
    q, k, v, g, beta, S0 = kda_inputs(rng, T)
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=P, scan=scan, initial_state=S0)
    assert o.shape == o_ref.shape and S.shape == S_ref.shape
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10
    # and against the token recurrence, which shares no code with the chunked form
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert rel(o, o_rec) <= 1e-10 and rel(S, S_rec) <= 1e-10


def test_ranks_1_is_plain_chunked(rng):
    q, k, v, g, beta, S0 = kda_inputs(rng, 90)
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=1, initial_state=S0)
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    assert np.array_equal(o, o_ref) and np.array_equal(S, S_ref)


def test_the_incoming_state_matters(rng):
    # a rank that started from zeros instead of its scan state would be visibly wrong
    q, k, v, g, beta, S0 = kda_inputs(rng, 200)
    plan = cp.make_plan(200, 2)
    o, _, (passes, scan_log) = cp.run_in_process(plan, (q, k, v, g, beta), S0[None], "logdepth",
                                              8**-0.5, 64)  # fmt: skip
    o_ref, _ = kda.chunked(q, k, v, g, beta, initial_state=S0)
    t1 = plan.bounds[1]
    o_zero, _ = kda.chunked(q[t1:], k[t1:], v[t1:], g[t1:], beta[t1:])
    assert rel(o_zero, o_ref[t1:]) > 1e-3
    assert rel(scan_log.S_in[1], kda.chunked(q[:t1], k[:t1], v[:t1], g[:t1], beta[:t1],
                                          initial_state=S0)[1]) <= 1e-12  # fmt: skip


@pytest.mark.parametrize("P", [2, 3, 5, 8, 13])
def test_logdepth_equals_sequential_fold(rng, P):
    H, K, V = 2, 4, 3
    elems = [cp.Element(None, rng.standard_normal((H, K, V)))]
    for r in range(1, P):  # some ranks reset (constant), as a document start does
        M = None if r % 4 == 3 else 0.5 * rng.standard_normal((H, K, K))
        elems.append(cp.Element(M, rng.standard_normal((H, K, V))))
    scan_log = _cp_scan.scan_in_process(elems, "logdepth", H, K, V)
    ref = _cp_scan.sequential_states(elems)
    assert scan_log.S_in[0] is None
    for r in range(1, P):
        assert np.allclose(scan_log.S_in[r], ref[r], rtol=1e-12, atol=1e-12)
    # the shift, then ceil(log2(P - 1)) doubling steps
    assert len(scan_log.schedule) == 1 + (math.ceil(math.log2(P - 1)) if P > 2 else 0)


def test_sequential_fold_by_hand(rng):
    H, K, V = 1, 2, 2
    b0 = rng.standard_normal((H, K, V))
    M1, b1 = rng.standard_normal((H, K, K)), rng.standard_normal((H, K, V))
    M2, b2 = rng.standard_normal((H, K, K)), rng.standard_normal((H, K, V))
    S = _cp_scan.sequential_states([cp.Element(None, b0), cp.Element(M1, b1), cp.Element(M2, b2)])
    assert S[0] is None and np.array_equal(S[1], b0)
    assert np.allclose(S[2], M1 @ b0 + b1)


def test_bytes_per_rank_do_not_grow_with_T(rng):
    H, K, V = 3, 8, 6
    sent = {}
    for T in (100, 800):
        q, k, v, g, beta, S0 = kda_inputs(rng, T)
        plan = cp.make_plan(T, 4)
        *_, (_, scan_log) = cp.run_in_process(plan, (q, k, v, g, beta), S0[None], "logdepth",
                                           K**-0.5, 64)  # fmt: skip
        sent[T] = scan_log.bytes_sent
    assert np.array_equal(sent[100], sent[800])
    m, s = H * K * (K + V) * 8, H * K * V * 8  # a map (M and b), a state (b only)
    # P = 4: shift: rank 0 a state, ranks 1, 2 maps; d=1: rank 1 (holds e0) a state to 2,
    # rank 2 (holds e1) a map to 3; d=2: rank 1 a state to 3; the last rank sends nothing
    assert sent[100].tolist() == [s, m + s + s, m + m, 0]
    ag = cp.bytes_sent(cp.allgather_schedule(4), 4, H, K, V, 8)
    assert ag.tolist() == [3 * m] * 4  # ring all-gather: P-1 full maps per rank


def test_split_points():
    assert cp.split_points(4100, 4, 64) == (0, 1024, 2048, 3072, 4100)  # whole chunks
    assert cp.split_points(1000, 4, 64) == (0, 250, 500, 750, 1000)  # < 8 chunks each
    b = cp.split_points(333, 7, 16)
    assert b[0] == 0 and b[-1] == 333 and all(x < y for x, y in zip(b, b[1:]))


@pytest.mark.parametrize("P", [1, 2, 3, 6])
@pytest.mark.parametrize("scan", cp.SCANS)
def test_varlen_equals_per_document_chunked(rng, P, scan):
    # documents shorter than a rank, one token long, and spanning several ranks
    cu = [0, 30, 31, 200, 260, 400]
    q, k, v, g, beta, _ = kda_inputs(rng, 400)
    S0 = rng.standard_normal((5, 3, 8, 6))
    o, S = cp.context_parallel_varlen(
        q, k, v, g, beta, ranks=P, cu_seqlens=cu, initial_states=S0, scan=scan
    )
    assert S.shape == (5, 3, 8, 6)
    for d in range(5):
        t = slice(cu[d], cu[d + 1])
        o_d, S_d = kda.chunked(q[t], k[t], v[t], g[t], beta[t], initial_state=S0[d])
        assert rel(o[t], o_d) <= 1e-10 and rel(S[d], S_d) <= 1e-10


def test_varlen_scan_resets_at_document_starts(rng):
    plan = cp.make_plan(400, 4, [0, 130, 400])
    assert plan.bounds == (0, 100, 200, 300, 400)
    const = plan.constant
    assert const[0]  # rank 0 always knows its state
    r = 1  # 100 < 130 < 200
    assert [p.starts_doc for p in plan.pieces[r]] == [False, True]
    assert const[r]  # the rank holding the document start hands on a constant map
    assert not any(const[i] for i in range(4) if i != r and i != 0)
    assert cp.logdepth_schedule(const)[0][r].kind == "state"  # the shift step: r -> r + 1


def test_short_conv_cp_equals_short_conv(rng):
    x = rng.standard_normal((50, 5))
    w = rng.standard_normal((5, 4))
    win = rng.standard_normal((3, 5))
    y_ref, n_ref = conv.short_conv(x, w, win)
    for P in (1, 2, 5, 25):  # 25 ranks: segments of 2 rows < W-1 pass on part of the window
        y, n = cp.short_conv_cp(x, w, ranks=P, window=win)
        assert np.allclose(y, y_ref, rtol=0, atol=1e-14) and np.array_equal(n, n_ref)
        y_naive, _ = conv_naive(x, w, win)
        assert np.allclose(y, y_naive, rtol=0, atol=1e-13)


def test_halo_is_the_rows_before_each_segment(rng):
    x = rng.standard_normal((40, 2))
    win = np.zeros((3, 2))
    wins = _cp_conv.halo_windows(x, (0, 10, 20, 40), win)
    assert np.array_equal(wins[1], x[7:10]) and np.array_equal(wins[2], x[17:20])


def test_float32_runs(rng):
    q, k, v, g, beta, S0 = (a.astype(np.float32) for a in kda_inputs(rng, 200))
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=3, initial_state=S0)
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    assert o.dtype == np.float32 and rel(o, o_ref) <= 1e-5 and rel(S, S_ref) <= 1e-5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ranks": 0}, r"ranks must be in \[1, 64\]"),
        ({"ranks": 11}, r"ranks must be in \[1, T=10\]"),
        ({"ranks": 2.0}, "ranks must be an integer"),
        ({"ranks": 2, "scan": "ring"}, "scan must be one of"),
        ({"ranks": 2, "initial_state": np.zeros((3, 8, 5))}, "initial_states must have shape"),
    ],
)
def test_bad_input(rng, kwargs, match):
    q, k, v, g, beta, _ = kda_inputs(rng, 10)
    with pytest.raises(ValueError, match=match):
        cp.context_parallel(q, k, v, g, beta, **kwargs)


@pytest.mark.parametrize(
    ("cu", "match"),
    [([0, 5], "rise strictly from 0 to T=10"), ([0, 5, 5, 10], "rise strictly"),
     ([1, 10], "rise strictly"), ([0.0, 10.0], "integers")],
)  # fmt: skip
def test_bad_cu_seqlens(rng, cu, match):
    q, k, v, g, beta, _ = kda_inputs(rng, 10)
    with pytest.raises(ValueError, match=match):
        cp.context_parallel_varlen(q, k, v, g, beta, ranks=2, cu_seqlens=cu)


def test_balanced_split_gives_rank0_more_and_stays_exact(rng):
    # rank 0 runs the plain pass; the others carry [b | M] (width V + K): by chunked_flops a
    # token costs ~1.72x more there at K = V = 128, ~1.3x at the test's K = 8, V = 6
    assert kda.chunked_flops(4096, 8, 128, 256) / kda.chunked_flops(4096, 8, 128, 128) > 1.7
    w = cp.balance_weight(4096, 8, 128, 128)
    b = cp.split_points(32768, 2, 64, w)
    assert b[1] / (32768 - b[1]) == pytest.approx(w, rel=0.01)
    q, k, v, g, beta, S0 = kda_inputs(rng, 600)
    w = cp.balance_weight(600, 3, 8, 6)
    assert 1.2 < w < 1.5
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    for bal in (True, False):
        o, S = cp.context_parallel(q, k, v, g, beta, ranks=3, initial_state=S0, balance=bal)
        assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10
    with pytest.raises(ValueError, match=r"first_weight must be in \[1, 8\]"):
        cp.split_points(100, 2, 64, 0.5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_long_decay_forgets_the_incoming_state_exactly(rng, monkeypatch, dtype):
    # strong decay (g = -3 per token) drives M through the subnormal range to zero within a
    # few hundred tokens: the open piece flushes it, then runs plain from b (no S_in needed)
    monkeypatch.setattr(_cp_rank, "_OPEN_SEGMENT", 64)
    q, k, v, g, beta, S0 = kda_inputs(rng, 1200)
    g = np.full_like(g, -3.0)
    q, k, v, g, beta, S0 = (a.astype(dtype) for a in (q, k, v, g, beta, S0))
    plan = cp.make_plan(1200, 2)
    _, _, (passes, _) = cp.run_in_process(plan, (q, k, v, g, beta), S0[None], "logdepth",
                                          8**-0.5, 64)  # fmt: skip
    lp = passes[1]
    assert not lp.open_map.M.any()  # forgotten
    n_live = int(np.flatnonzero(np.abs(lp.qM).sum(axis=(1, 2)))[-1]) + 1
    assert 0 < n_live < lp.open_len  # qM rows after forgetting are exactly zero
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=2, initial_state=S0, balance=False)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    assert rel(o, o_ref) <= tol and rel(S, S_ref) <= tol


def test_mild_decay_keeps_the_map(rng, monkeypatch):
    monkeypatch.setattr(_cp_rank, "_OPEN_SEGMENT", 64)  # many segments, flushed between them
    q, k, v, g, beta, S0 = kda_inputs(rng, 600, g_scale=0.01)
    plan = cp.make_plan(600, 2)
    _, _, (passes, _) = cp.run_in_process(plan, (q, k, v, g, beta), S0[None], "logdepth",
                                          8**-0.5, 64)  # fmt: skip
    assert np.abs(passes[1].open_map.M).max() > 1e-3  # nothing flushed that matters
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=2, initial_state=S0)
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10


def conv_kda_layer(x, w, win0, g, beta, S0, cu, H, K, P=None, group=None):
    """A KDA layer's conv + scan over packed documents: on ``P`` ranks (the CP path), or with
    P=None each document alone through short_conv + kda.chunked (the twin). -> (y, windows,
    o, S); document 0 starts from ``win0``, the others from zero windows."""
    T = x.shape[0]
    if P is None:
        ys, wins, os_, Ss = [], [], [], []
        for d in range(len(cu) - 1):
            t = slice(cu[d], cu[d + 1])
            y_d, win_d = conv.short_conv(x[t], w, win0 if d == 0 else np.zeros_like(win0))
            ys.append(y_d)
            wins.append(win_d)
        y = np.concatenate(ys)
    else:
        y, windows = cp.short_conv_cp_varlen(x, w, ranks=P, cu_seqlens=cu, window=win0, group=group)
    q = kda.l2norm(y[:, : H * K].reshape(T, H, K))
    k = kda.l2norm(y[:, H * K : 2 * H * K].reshape(T, H, K))
    v = y[:, 2 * H * K :].reshape(T, H, K)
    if P is not None:
        o, S = cp.context_parallel_varlen(
            q, k, v, g, beta, ranks=P, cu_seqlens=cu, initial_states=S0, group=group
        )
        return y, windows, o, S
    for d in range(len(cu) - 1):
        t = slice(cu[d], cu[d + 1])
        o_d, S_d = kda.chunked(q[t], k[t], v[t], g[t], beta[t], initial_state=S0[d])
        os_.append(o_d)
        Ss.append(S_d)
    return y, np.stack(wins), np.concatenate(os_), np.stack(Ss)


def layer_inputs(rng, T, n_docs, H=2, K=4, W=4):
    x = rng.standard_normal((T, 3 * H * K))
    w = rng.standard_normal((3 * H * K, W))
    win0 = rng.standard_normal((W - 1, 3 * H * K))
    _, _, _, g, beta, _ = kda_inputs(rng, T, H=H, K=K, V=K)
    S0 = rng.standard_normal((n_docs, H, K, K))
    return x, w, win0, g, beta, S0


# documents of 5..70 rows: one of a single token, one of 3 = W-1 rows across the boundary at 60
# (P = 2, 4: the halo is 2 document rows and a zero row), a document start on a rank boundary
# (40 for P = 3), documents starting mid-rank and spanning several ranks (50..58, 61..120)
VARLEN_CU = [0, 5, 40, 41, 58, 61, 120]


@pytest.mark.parametrize("P", [1, 2, 3, 4, 5])
def test_varlen_conv_and_scan_equal_each_document_alone(rng, P):
    H, K = 2, 4
    x, w, win0, g, beta, S0 = layer_inputs(rng, 120, len(VARLEN_CU) - 1, H, K)
    y, wins, o, S = conv_kda_layer(x, w, win0, g, beta, S0, VARLEN_CU, H, K, P=P)
    y_ref, wins_ref, o_ref, S_ref = conv_kda_layer(x, w, win0, g, beta, S0, VARLEN_CU, H, K)
    # the conv is the same multiply-adds in the same order per row: equal, not just close
    assert np.array_equal(y, y_ref) and np.array_equal(wins, wins_ref)
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10
    # and the reset is visible: one conv over the packed rows differs right after doc starts
    y_packed, _ = conv.short_conv(x, w, win0)
    for start in VARLEN_CU[1:-1]:
        assert not np.allclose(y_packed[start], y[start])


def test_varlen_conv_segments_shorter_than_the_window(rng):
    # 60 ranks of 2 rows: a halo passes on part of the window it received, never across a
    # document start; a zero row pads a document younger than W-1 rows
    x, w, win0, _, _, _ = layer_inputs(rng, 120, 1)
    y, wins = cp.short_conv_cp_varlen(x, w, ranks=60, cu_seqlens=VARLEN_CU, window=win0)
    for d in range(len(VARLEN_CU) - 1):
        t = slice(VARLEN_CU[d], VARLEN_CU[d + 1])
        y_d, win_d = conv.short_conv(x[t], w, win0 if d == 0 else np.zeros_like(win0))
        assert np.array_equal(y[t], y_d) and np.array_equal(wins[d], win_d)
    assert np.array_equal(wins[1], x[37:40])  # [5, 40): its own last three rows
    assert np.array_equal(wins[2][:2], np.zeros((2, x.shape[1])))  # [40, 41): one row
    assert np.array_equal(wins[2][2], x[40])
    y1, n1 = cp.short_conv_cp(x, w, ranks=7, window=win0)  # no cu_seqlens: one document
    y0, n0 = conv.short_conv(x, w, win0)
    assert np.array_equal(y1, y0) and np.array_equal(n1, n0)


def test_contract_facade_is_the_real_cp():
    # kda_core.cp.context_parallel is the public API entry; the code lives in kda_core.kda.cp
    import kda_core.cp as facade

    assert facade.context_parallel is cp.context_parallel
    assert facade.short_conv_cp_varlen is cp.short_conv_cp_varlen and facade.SCANS == cp.SCANS
