"""kda_core.studies.context_parallel: the demo's numbers are the cp machinery's (exact, the
schedule's bytes), the cost model follows from the costs passed in (no timing), bytes vs T."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kda_core import kda, sizing
from kda_core.kda import cp
from kda_core.studies import context_parallel as cps
from kda_core.studies._kda_inputs import random_inputs


def test_demo_is_exact_and_hands_on_the_true_states():
    d = cps.demo(T=512, P=4, scan="logdepth")
    assert d.o_rel.max() <= 1e-10 and d.S_final_rel <= 1e-10 and d.S_in_rel.max() <= 1e-10
    assert d.o_rel[0] == 0.0  # rank 0 runs plain chunked on its rows
    # the true state at rank 1's start, computed here without the study
    x = random_inputs(512, H=2, K=16, V=16, seed=0)
    t1 = int(d.bounds[1])
    _, S1 = kda.chunked(x.q[:t1], x.k[:t1], x.v[:t1], x.g[:t1], x.beta[:t1], initial_state=x.S0)
    assert np.allclose(d.S_in[1], S1[0], rtol=0, atol=1e-12)
    assert np.abs(d.S_in[1]).max() > 0.1  # a real state, not zeros


def test_demo_messages_are_the_schedule():
    d = cps.demo(T=256, P=5, scan="logdepth")
    sched = cp.logdepth_schedule([True, False, False, False, False])
    msgs = [m for step in sched for m in step]
    assert d.msg_src.tolist() == [m.src for m in msgs]
    assert d.msg_kind.tolist() == [m.kind for m in msgs]
    m, s = 2 * 16 * 32 * 8, 2 * 16 * 16 * 8  # H = 2, K = V = 16, float64
    assert set(d.msg_bytes.tolist()) == {m, s}
    assert d.bytes_sent.sum() == d.msg_bytes.sum()
    ag = cps.demo(T=256, P=5, scan="allgather")
    assert ag.bytes_sent.tolist() == [4 * m] * 5 == d.bytes_other.tolist()


def test_demo_varlen_resets():
    d = cps.demo(T=300, P=3, docs=[50, 200, 50])
    assert d.cu_seqlens.tolist() == [0, 50, 250, 300]
    assert d.constant.tolist() == [True, False, True]  # rank 2 [200, 300) holds the start 250
    assert d.o_rel.max() <= 1e-10 and d.S_final_rel <= 1e-10


def test_mla_bytes_are_k3s():
    spec = sizing.preset("kimi-k3")
    assert cps.mla_layer_bytes_per_token() == (512 + 64) * 2 == 1152
    assert cps.mla_layer_bytes_per_token() * spec.n_mla_layers == sizing.mla_kv_bytes_per_token(
        spec
    )
    assert cps.kv_allgather_bytes(32768, 2, 1152) == 16384 * 1152


def test_k3_bytes_compare_like_with_like_by_hand():
    """T = 512, P = 8: the demo's messages at one K3 layer's size (8 heads, K = V = 128,
    fp32: map 8·128·256·4 B, state 8·128·128·4 B) next to K3's MLA KV all-gather (7 ranks ×
    64 tokens × 1152 B); the demo layer's own bytes stay the demo's (H = 2, K = V = 16, f64)."""
    k3_map, k3_state = 8 * 128 * 256 * 4, 8 * 128 * 128 * 4
    assert (k3_map, k3_state) == (1_048_576, 524_288)
    d = cps.demo(T=512, P=8, scan="logdepth")
    per_rank = [0] * 8
    for src, kind in zip(d.msg_src.tolist(), d.msg_kind.tolist()):
        per_rank[src] += k3_map if kind == "map" else k3_state
    assert max(per_rank) == 3 * k3_map + k3_state == d.k3_scan_bytes["logdepth"] == 3_670_016
    assert d.k3_scan_bytes["allgather"] == 7 * k3_map  # P - 1 maps from every rank
    assert d.kv_bytes == 7 * 64 * (512 + 64) * 2 == 516_096
    assert d.bytes_sent.max() == 3 * 2 * 16 * 32 * 8 + 2 * 16 * 16 * 8 == 28_672
    # packed documents change the schedule: the K3 bytes follow the demo's messages
    p = cps.demo(T=512, P=4, docs=[128, 384])
    per_rank = [0] * 4
    for src, kind in zip(p.msg_src.tolist(), p.msg_kind.tolist()):
        per_rank[src] += k3_map if kind == "map" else k3_state
    assert p.k3_scan_bytes["logdepth"] == max(per_rank)


COSTS = cps.StepCosts(
    chunked_s_per_token=1e-5, local_s_per_token=2e-5, finish_s_per_token=1e-6,
    compose_s=1e-3, apply_s=5e-4, latency_s=1e-4, bandwidth_Bps=1e9,
)  # fmt: skip


def test_cost_model_by_hand_p2():
    m = cps.cost_model(COSTS, T=32768, P_values=(1, 2))
    w = cp.balance_weight(32768, 8, 128, 128)
    t1 = cp.split_points(32768, 2, 64, w)[1]
    ready0, ready1 = 1e-5 * t1, 2e-5 * (32768 - t1)
    state = 8 * 128 * 128 * 4
    # log-depth at P = 2: one message, rank 0's state, no compose
    arrive = ready0 + 1e-4 + state / 1e9
    want = max(ready1, arrive) + 1e-6 * (32768 - t1)
    assert m.wall_s["logdepth"][1] == pytest.approx(want, rel=1e-12)
    assert m.wall_s["logdepth"][0] == pytest.approx(1e-5 * 32768)
    assert m.speedup["logdepth"][1] == pytest.approx(1e-5 * 32768 / want)
    # the phases of the slowest rank add up to its wall time
    ph = m.phases["logdepth"]
    assert ph["local"][1] + ph["scan"][1] + ph["finish"][1] == pytest.approx(want)
    assert m.bytes_sent["logdepth"].tolist() == [0, state]


def test_cost_model_bytes_flat_in_T_kv_grows():
    a = cps.cost_model(COSTS, T=4096, P_values=(8, 64))
    b = cps.cost_model(COSTS, T=1 << 20, P_values=(8, 64))
    for s in cp.SCANS:
        assert np.array_equal(a.bytes_sent[s], b.bytes_sent[s])
    assert (b.kv_bytes > 200 * a.kv_bytes).all()
    mp = 8 * 128 * 256 * 4
    assert a.bytes_sent["allgather"].tolist() == [7 * mp, 63 * mp]
    # log-depth: at most 1 + ceil(log2(P - 1)) messages of a map per rank
    assert a.bytes_sent["logdepth"][1] <= (1 + math.ceil(math.log2(63))) * mp


def test_logdepth_beats_allgather_at_many_ranks():
    m = cps.cost_model(COSTS, T=32768, P_values=(64,))
    assert m.scan_s["logdepth"][0] < m.scan_s["allgather"][0]


def test_bytes_vs_context_crossover():
    b = cps._bytes_vs_context(8, [1024, 4096, 1 << 20], COSTS)
    for s in cp.SCANS:
        T = b.crossover[s]
        per = cps.mla_layer_bytes_per_token() * 7 / 8
        assert (T - 1) * per < b.scan_bytes[s] <= T * per


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"T": 8, "P": 9}, r"P must be in \[1, 8\]"), ({"scan": "tree"}, "scan must be one of"),
     ({"T": 100, "docs": [50, 20]}, "summing to T=100"), ({"T": 5000}, r"T must be in")],
)  # fmt: skip
def test_demo_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cps.demo(**kwargs)


def test_cost_model_bad_costs():
    bad = cps.StepCosts(0.0, 1e-5, 0, 0, 0, 0, 1e9)
    with pytest.raises(ValueError, match="chunked_s_per_token must be > 0"):
        cps.cost_model(bad)
