"""kda_core.cp on real ranks: three processes in one torch.distributed gloo group on 127.0.0.1
(started once for the module: spawning takes 7-20 s). Both scans, varlen and the conv halo
equal single-rank kda.chunked / short_conv and the in-process ranks; bytes handed to gloo equal
the schedule's count; the workers are gone afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from kda_testdata import kda_inputs
from test_cp import VARLEN_CU, conv_kda_layer, layer_inputs

from kda_core import kda
from kda_core.kda import conv, cp

pytest.importorskip("torch.distributed", reason="real ranks need torch (CI installs torch==2.13.0)")
from kda_core.kda.cp_gloo import GlooGroup  # noqa: E402

P = 3


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def group():
    g = GlooGroup(P)
    procs = list(g._procs)
    assert len(procs) == P and all(p.poll() is None for p in procs)
    yield g
    g.close()
    assert all(p.poll() is not None for p in procs)  # every worker exited


@pytest.mark.parametrize("scan", cp.SCANS)
def test_gloo_equals_chunked(group, scan):
    q, k, v, g, beta, S0 = kda_inputs(np.random.default_rng(7), 250)
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o, S = cp.context_parallel(q, k, v, g, beta, ranks=P, scan=scan, initial_state=S0, group=group)
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10
    o_sim, S_sim = cp.context_parallel(q, k, v, g, beta, ranks=P, scan=scan, initial_state=S0)
    assert np.allclose(o, o_sim, rtol=0, atol=1e-13) and np.allclose(S, S_sim, rtol=0, atol=1e-13)


@pytest.mark.parametrize("scan", cp.SCANS)
def test_gloo_bytes_match_the_schedule(group, scan):
    H, K, V = 3, 8, 6
    q, k, v, g, beta, S0 = kda_inputs(np.random.default_rng(8), 200)
    plan = cp.make_plan(200, P)
    res = group.run_plan(plan, (q, k, v, g, beta), S0[None], scan, K**-0.5, 64)
    sched = cp.allgather_schedule(P) if scan == "allgather" else cp.logdepth_schedule(plan.constant)
    want = cp.bytes_sent(sched, P, H, K, V, 8)
    assert [r["bytes_sent"] for r in res] == want.tolist()
    for r in res:
        s = r["seconds"]
        assert s["total"] >= s["local"] >= 0 and s["scan"] >= 0


@pytest.mark.parametrize("scan", cp.SCANS)
def test_gloo_varlen(group, scan):
    rng = np.random.default_rng(9)
    cu = [0, 50, 51, 180, 300]  # a document start inside a rank, one spanning two ranks
    q, k, v, g, beta, _ = kda_inputs(rng, 300)
    S0 = rng.standard_normal((4, 3, 8, 6))
    o, S = cp.context_parallel_varlen(
        q, k, v, g, beta, ranks=P, cu_seqlens=cu, initial_states=S0, scan=scan, group=group
    )
    for d in range(4):
        t = slice(cu[d], cu[d + 1])
        o_d, S_d = kda.chunked(q[t], k[t], v[t], g[t], beta[t], initial_state=S0[d])
        assert rel(o[t], o_d) <= 1e-10 and rel(S[d], S_d) <= 1e-10


def test_gloo_conv_halo(group):
    rng = np.random.default_rng(10)
    x, w, win = (
        rng.standard_normal((40, 6)),
        rng.standard_normal((6, 4)),
        rng.standard_normal((3, 6)),
    )
    y_ref, n_ref = conv.short_conv(x, w, win)
    y, n = cp.short_conv_cp(x, w, ranks=P, window=win, group=group)
    assert np.allclose(y, y_ref, rtol=0, atol=1e-14) and np.array_equal(n, n_ref)


@pytest.mark.parametrize("cu", [VARLEN_CU, [0, 5, 38, 42, 120]])
def test_gloo_varlen_conv_and_scan_equal_each_document_alone(group, cu):
    """The conv halo over real ranks resets at document starts too. Bounds (0, 40, 80, 120):
    with VARLEN_CU rank 1 starts a document (no halo is sent to it) and rank 2 starts inside
    [61, 120); with the second split rank 1 starts inside [38, 42), 2 rows old (a zero row
    pads its halo)."""
    H, K = 2, 4
    x, w, win0, g, beta, S0 = layer_inputs(np.random.default_rng(12), 120, len(cu) - 1, H, K)
    y, wins, o, S = conv_kda_layer(x, w, win0, g, beta, S0, cu, H, K, P=P, group=group)
    y_ref, wins_ref, o_ref, S_ref = conv_kda_layer(x, w, win0, g, beta, S0, cu, H, K)
    assert np.array_equal(y, y_ref) and np.array_equal(wins, wins_ref)
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10
    res = group.run_conv(x, w, win0, "silu", cp.make_plan(120, P, cu))
    halo = [r["bytes_sent"] for r in res]
    assert halo == ([0, win0.nbytes, 0] if cu == VARLEN_CU else [win0.nbytes, win0.nbytes, 0])


def test_group_size_must_match(group, rng):
    q, k, v, g, beta, _ = kda_inputs(rng, 20)
    with pytest.raises(ValueError, match="group has 3 ranks, but ranks=2"):
        cp.context_parallel(q, k, v, g, beta, ranks=2, group=group)


def test_a_failing_rank_is_reported(group):
    # a task a worker cannot run comes back as an error naming the rank; the group survives
    with pytest.raises(RuntimeError, match="gloo rank 0 failed"):
        group._run([{"kind": "nope"}] * P, "bogus")
    q, k, v, g, beta, S0 = kda_inputs(np.random.default_rng(11), 60)
    o, _ = cp.context_parallel(q, k, v, g, beta, ranks=P, initial_state=S0, group=group)
    assert rel(o, kda.chunked(q, k, v, g, beta, initial_state=S0)[0]) <= 1e-10
