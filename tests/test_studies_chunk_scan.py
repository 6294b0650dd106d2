"""kda_core.studies.chunk_scan: chunked == recurrent, grouping vs order of segment maps."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import kda
from kda_core.model import TinyHybrid, encode
from kda_core.studies import chunk_scan as cs

TEXT = "Kimi Delta Attention 前缀命中不等于状态命中。" * 4


@pytest.fixture(scope="module")
def study() -> cs.ChunkScanStudy:
    return cs.chunk_scan_study()


def test_agreement_is_float64_exact(study):
    a = study.agreement
    assert a.T_values.tolist() == [16, 64, 200, 512]
    assert a.chunk_sizes.tolist() == [1, 8, 16, 32, 64, 128]
    for arr in (a.o_max_abs, a.S_max_abs, a.o_rel, a.S_rel):
        assert arr.shape == (4, 6)
        assert arr.max() <= 1e-12
    # a cell recomputed directly (prefix of one seeded sequence)
    x = cs.random_inputs(512)
    args = (x.q[:200], x.k[:200], x.v[:200], x.g[:200], x.beta[:200])
    o_ref, S_ref = kda.recurrent(*args, initial_state=x.S0)
    o, S = kda.chunked(*args, initial_state=x.S0, chunk_size=32)
    assert a.o_max_abs[2, 3] == np.abs(o - o_ref).max()
    assert a.S_max_abs[2, 3] == np.abs(S - S_ref).max()
    assert a.S_rel[2, 3] == pytest.approx(np.linalg.norm(S - S_ref) / np.linalg.norm(S_ref))


def test_random_inputs_are_valid_kda_inputs():
    x = cs.random_inputs(300, H=3, K=8, V=5, seed=4)
    assert x.q.shape == (300, 3, 8) and x.v.shape == (300, 3, 5) and x.S0.shape == (3, 8, 5)
    np.testing.assert_allclose(np.linalg.norm(x.k, axis=-1), 1.0, atol=1e-6)
    alpha = np.exp(x.g)
    assert alpha.min() > np.exp(-5.0) and alpha.max() < 1.0
    # a spread of key-channel decays (fla's dt init): slow and fast channels both present
    assert alpha.mean(axis=0).max() > 0.99 and alpha.mean(axis=0).min() < 0.8
    assert x.beta.min() > 0 and x.beta.max() < 1
    y = cs.random_inputs(300, H=3, K=8, V=5, seed=4)
    np.testing.assert_array_equal(x.g, y.g)


def test_model_inputs_are_the_first_kda_layer():
    x = cs.model_inputs(TEXT, T=40)
    m = TinyHybrid()
    tokens = encode(TEXT)[:40]
    f = m.kda_features(0, m.norm1(0, m.embed[tokens]), np.zeros((3, 384)))
    for a, b in ((x.q, f.q), (x.k, f.k), (x.v, f.v), (x.g, f.g), (x.beta, f.beta)):
        np.testing.assert_array_equal(a, b)
    assert x.S0.shape == (4, 32, 32) and not x.S0.any()


def test_agreement_on_real_features():
    a = cs.agreement(T_values=(16, 80), chunk_sizes=(1, 16, 64), text=TEXT)
    assert a.source == "TinyHybrid layer 0"
    assert a.o_max_abs.max() <= 1e-12 and a.S_max_abs.max() <= 1e-12


def test_cost_model_k3_layer(study):
    c = study.cost
    assert (c.H, c.K, c.V) == (96, 128, 128)
    assert c.T_values.tolist() == [1024, 8192, 65536]
    assert c.chunk_sizes.tolist() == [16, 32, 64, 128]
    assert c.recurrent_steps.tolist() == [1024, 8192, 65536]
    assert c.chunked_steps[1].tolist() == [512, 256, 128, 64]
    np.testing.assert_array_equal(c.steps_ratio, np.broadcast_to([16.0, 32.0, 64.0, 128.0], (3, 4)))
    assert c.recurrent_flops[1] == 6 * 8192 * 96 * 128 * 128
    # by hand, C = 64, K = V = 128, per chunk and head:
    # intra 2*128*64*128 + (2*64^3)//3 + 2*64*64*256 = 4,369,066; inter 6*64*128*128 +
    # 2*64*64*128 = 7,340,032 -> 11,709,098 per 64 tokens vs 6*128*128 = 98,304 per token
    assert c.chunked_flops[1, 2] == 96 * 128 * 11_709_098
    assert c.flops_ratio[1, 2] == pytest.approx(11_709_098 / 64 / 98_304, rel=1e-15)
    # chunking buys sequential steps with extra arithmetic
    assert (c.flops_ratio > 1).all() and (np.diff(c.flops_ratio, axis=1) > 0).all()


def test_cost_ragged_and_short():
    c = cs.cost(T_values=(1, 100), chunk_sizes=(64,), H=1, K=4, V=4)
    assert c.chunked_steps[:, 0].tolist() == [1, 2]
    assert c.chunked_flops[0, 0] == kda.chunked_flops(1, 1, 4, 4, 64)


def test_grouping_same_order_different(study):
    c = study.composition
    assert c.labels == ("A", "B", "C") and c.lengths.tolist() == [16, 16, 16]
    assert c.grouping_labels[:2] == ("(A->B)->C", "A->(B->C)")
    assert len(c.grouping_labels) == 5
    assert c.grouping_M_diff.max() <= 1e-12 and c.grouping_b_diff.max() <= 1e-12
    assert c.grouping_S_diff.max() <= 1e-12  # every grouping lands on the recurrent state
    assert c.order_labels[:2] == ("A->B->C", "A->C->B") and len(c.order_labels) == 6
    assert c.order_M_diff[0] == 0 and c.order_b_diff[0] == 0 and c.order_S_rel[0] <= 1e-12
    assert c.order_M_diff[1:].min() > 1e-3  # not commutative, in M as well as in b
    assert c.order_b_diff[1:].min() > 1e-2
    assert c.order_S_rel[1:].min() > 1e-2
    # the swapped order recomputed here from token-by-token maps (seed 0, H=2, K=V=16): the
    # study's max over heads equals it, and the heatmap's head is one of those heads
    x = cs.random_inputs(48, 2, 16, 16, 0)
    a, b, cc = (
        kda.segment_map_naive(x.k[s : s + 16], x.v[s : s + 16], x.g[s : s + 16], x.beta[s : s + 16])
        for s in (0, 16, 32)
    )
    true, swapped = a.then(b).then(cc), a.then(cc).then(b)
    per_head = np.abs(true.M - swapped.M).max(axis=(1, 2))
    assert c.order_M_diff[1] == pytest.approx(per_head.max(), rel=1e-9)
    head_diff = np.abs(c.M_true - c.M_swapped).max()
    assert head_diff == pytest.approx(per_head[c.head], rel=1e-9) and head_diff > 1e-3
    assert c.boundary_tokens.tolist() == [16, 32, 48]
    assert c.boundary_S_diff.max() <= 1e-12


def test_composition_matches_manual_then():
    c = cs.composition(lengths=(5, 7), H=2, K=6, V=4, seed=3, head=1)
    x = cs.random_inputs(12, 2, 6, 4, 3)
    a = kda.segment_map_naive(x.k[:5], x.v[:5], x.g[:5], x.beta[:5])
    b = kda.segment_map_naive(x.k[5:], x.v[5:], x.g[5:], x.beta[5:])
    ab, ba = a.then(b), b.then(a)
    np.testing.assert_allclose(c.M_true, ab.M[1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(c.M_swapped, ba.M[1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(c.b_swapped, ba.b[1], rtol=0, atol=1e-13)
    assert c.order_labels == ("A->B", "B->A")
    assert c.grouping_labels == (
        "A->B",
        "pairwise tree (parallel scan)",
        "closed form of the whole span",
        "token by token",
    )


def test_four_segments_and_real_text():
    c = cs.composition(lengths=(4, 8, 3, 9), text=TEXT)
    assert c.grouping_labels[:2] == ("((A->B)->C)->D", "A->(B->(C->D))")
    assert len(c.order_labels) == 24 and c.order_labels[1] == "A->B->D->C"
    assert c.grouping_M_diff.max() <= 1e-12 and c.grouping_S_diff.max() <= 1e-12
    assert c.order_S_rel[1:].min() > 1e-3


def test_timing_shapes():
    t = cs.timing(T_values=(32, 64), chunk_sizes=(16,), H=1, K=8, V=8, repeats=1)
    assert t.recurrent_s.shape == (2,) and t.chunked_s.shape == (2, 1)
    assert (t.recurrent_s > 0).all() and (t.chunked_s > 0).all()
    np.testing.assert_array_equal(t.speedup, t.recurrent_s[:, None] / t.chunked_s)


def test_study_bundle():
    s = cs.chunk_scan_study(chunk_size=24)
    assert s.timing is None
    assert 24 in s.agreement.chunk_sizes.tolist() and 24 in s.cost.chunk_sizes.tolist()
    t = cs.chunk_scan_study(text=TEXT)
    assert t.agreement.T_values.tolist() == [16, 64, 200, len(TEXT.encode())]
    assert t.composition.source == "TinyHybrid layer 0"


@pytest.mark.parametrize(
    "fn,kwargs,name",
    [
        (cs.agreement, dict(T_values=()), "T_values"),
        (cs.agreement, dict(T_values=(0,)), "T_values"),
        (cs.agreement, dict(T_values=(cs.MAX_T + 1,)), "T_values"),
        (cs.agreement, dict(chunk_sizes=(0,)), "chunk_sizes"),
        (cs.agreement, dict(chunk_sizes="64"), "chunk_sizes"),
        (cs.agreement, dict(H=cs.MAX_HEADS + 1), "H"),
        (cs.agreement, dict(T_values=(600,), text="short"), "T_values"),
        (cs.agreement, dict(text=""), "text"),
        (cs.timing, dict(repeats=0), "repeats"),
        (cs.cost, dict(K=0), "K"),
        (cs.composition, dict(lengths=(16,)), "lengths"),
        (cs.composition, dict(lengths=(1, 1, 1, 1, 1, 1)), "lengths"),
        (cs.composition, dict(lengths=(4, 0)), "lengths"),
        (cs.composition, dict(lengths=(4, 4), head=2), "head"),
        (cs.composition, dict(lengths=(40, 40), text="tiny"), "lengths"),
        (cs.chunk_scan_study, dict(chunk_size=0), "chunk_size"),
        (cs.chunk_scan_study, dict(seed=-1), "seed"),
    ],
)
def test_bad_input(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)
