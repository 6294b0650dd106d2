"""kda_core.studies.int8: a real TinyHybrid state parked compressed, restored, decoded on."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.kda import quant
from kda_core.model import TinyHybrid, encode
from kda_core.studies import int8 as si


@pytest.fixture(scope="module")
def parked() -> si.Parked:
    return si.park()


@pytest.fixture(scope="module")
def study() -> si.Int8Study:
    return si.int8_study()


def test_parked_state_is_the_models(parked):
    m = TinyHybrid()
    st = m.new_state()
    logits = m.prefill(encode(si.DEFAULT_TEXT)[:64], st)
    assert parked.n_tokens == 64 and parked.state.boundary == 64
    np.testing.assert_array_equal(parked.logits_last, logits[-1])
    for a, b in zip(parked.state.kda, st.kda):
        np.testing.assert_array_equal(a.S, b.S)
    assert parked.kda_states.shape == (6, 4, 32, 32)


def test_table_matches_quant_per_layer(parked):
    t = si._variant_table(parked)
    x = parked.kda_states
    assert t.labels[0] == "int8 / key channel"
    for i, (fmt, gran) in enumerate(zip(t.fmts, t.granularities)):
        # naive twin: quantize each layer's [H, K, V] on its own, accumulate squared errors
        err2 = sum(float(np.sum((quant.roundtrip(s, fmt, gran) - s) ** 2)) for s in x)
        assert t.rel_fro[i] == pytest.approx(np.sqrt(err2 / np.sum(x**2)), rel=1e-12)
        nb = sum(quant.quantize(s, fmt, gran).nbytes for s in x)
        assert t.state_bytes[i] == nb
    assert t.bound_holds.all() and (t.max_bound_ratio <= 1 + 1e-12).all()
    assert (t.rel_fro <= t.bound_rel_fro).all()
    # the bound is reached within 1 %: the errors are what rounding gives, not less
    assert (t.max_bound_ratio > 0.99).all()


def test_granularity_ordering_on_the_real_state(parked):
    t = si._variant_table(parked)
    ch, hd, te, fp8, bf16 = t.rel_fro
    # key channels of a real state live on very different magnitudes (decay per channel)
    amax = np.abs(parked.kda_states).max(axis=-1)
    assert amax.max() / amax.min() > 20
    assert ch < hd < te and te > 2 * ch
    # per-channel INT8 beats per-channel fp8-e4m3 (3 mantissa bits) on these states; bf16 wins
    assert ch < fp8 and bf16 < ch
    # INT8 per channel: relative error well inside its theoretical ceiling (scale / 2)
    assert t.rel_fro[0] < 0.01 < t.bound_rel_fro[0] < 0.02


def test_error_map(parked):
    e = si._error_map(parked, "int8", "channel", layer=2, head=3)
    s = parked.state.kda[2].S
    q = quant.quantize_int8(s)
    np.testing.assert_array_equal(e.state, s[3])
    np.testing.assert_array_equal(e.restored, q.dequantize()[3])
    np.testing.assert_array_equal(e.error, q.dequantize()[3] - s[3])
    np.testing.assert_array_equal(e.bound, np.broadcast_to(q.scale[3] / 2, (32, 32)))
    assert np.all(np.abs(e.error) <= e.bound * (1 + 1e-12))
    np.testing.assert_array_equal(e.amax, np.abs(s[3]).max(axis=1))
    n = parked.kda_states.size
    assert e.err_counts.sum() == n and e.value_counts.sum() == n
    assert len(e.err_edges) == si._HIST_BINS + 1
    assert e.err_edges[0] == -e.err_edges[-1]
    # per-channel errors are uniform-ish in [-scale/2, scale/2]: most mass near 0 because most
    # channels have small scales, every bin edge symmetric
    assert e.label == "int8 / key channel"
    t = si._error_map(parked, "int8", "tensor", layer=2, head=3)
    assert np.abs(t.error).mean() > np.abs(e.error).mean()


def test_divergence_park_once_vs_every_step(parked):
    d = si._divergence(parked, "int8", "channel", steps=16)
    t = si._variant_table(parked)
    assert d.steps.tolist() == list(range(17))
    # step 0: the one rounding at parking, exactly the table's relative Frobenius error
    assert d.park_once_state_dist[0] == pytest.approx(t.rel_fro[0], rel=1e-12)
    assert d.every_step_state_dist[0] == d.park_once_state_dist[0]
    assert d.park_once_logit_diff[0] == 0 == d.every_step_logit_diff[0]
    assert d.park_once_logit_diff[1] == d.every_step_logit_diff[1]  # same state until step 1
    # park once: one rounding that the decay and the delta rule do not amplify
    assert d.park_once_state_dist.max() < 1.25 * d.park_once_state_dist[0]
    # every step: a fresh rounding per token accumulates
    assert np.all(np.diff(d.every_step_state_dist) > 0)
    assert d.every_step_state_dist[-1] > 3 * d.park_once_state_dist[-1]
    assert d.every_step_logit_diff[8:].mean() > 2 * d.park_once_logit_diff[8:].mean()
    # bounded: logits move by a few hundredths, the greedy tokens do not change
    assert 0 < d.park_once_logit_diff.max() < 0.1
    assert d.park_once_agree.all()
    # the fed tokens are the exact greedy continuation
    ids, _ = TinyHybrid().generate(encode(si.DEFAULT_TEXT)[:64], 16)
    assert d.tokens.tolist() == ids


def test_divergence_orders_formats(parked):
    last = {}
    for fmt, gran in (("int8", "channel"), ("int8", "tensor"), ("bf16", None)):
        d = si._divergence(parked, fmt, gran, steps=6)
        last[fmt, gran] = d.park_once_state_dist[-1]
    assert last["bf16", None] < last["int8", "channel"] < last["int8", "tensor"]


def test_capacity_k3_bf16():
    c = si.capacity("kimi-k3", tp=8, native_dtype="bfloat16", budget_bytes=8 << 30)
    assert c.labels[0] == "native" and c.labels[1:] == tuple(v[0] for v in si.VARIANTS)
    conv = sizing.conv_state_bytes("kimi-k3", 8, "bfloat16")
    assert conv == 1_907_712 and (c.conv_bytes == conv).all()
    assert c.total_bytes[0] == 27_131_904 + 1_907_712
    # int8 per channel: 69 x 12 x 128 x 128 codes + 69 x 12 x 128 bf16 scales
    assert c.state_bytes[1] == 13_565_952 + 211_968
    assert c.state_bytes[2] == 13_565_952 + 69 * 12 * 2
    assert c.state_bytes[3] == 13_565_952 + 69 * 2
    assert c.state_bytes[4] == c.state_bytes[1]  # fp8 codes + scales: same bytes as int8
    assert c.state_bytes[5] == c.state_bytes[0]  # bf16 parking of a bf16 pool gains nothing
    assert c.capacity.tolist()[:2] == [(8 << 30) // 29_039_616, (8 << 30) // 15_685_632]
    assert c.capacity[0] == 295 and c.capacity[1] == 547
    assert c.gain[1] == pytest.approx(547 / 295, rel=1e-15)
    assert c.gain[5] == 1.0


def test_capacity_float32_and_tiny():
    c = si.capacity("kimi-k3", tp=8, native_dtype="float32", budget_bytes=8 << 30)
    native = 2 * 27_131_904 + 2 * 1_907_712
    int8 = 13_565_952 + 2 * 211_968 + 2 * 1_907_712
    assert c.total_bytes[0] == native and c.total_bytes[1] == int8
    assert c.gain[1] == pytest.approx(((8 << 30) // int8) / ((8 << 30) // native), rel=1e-15)
    assert c.gain[1] > 3.2
    spec = sizing.tiny_spec()
    assert (spec.n_kda_layers, spec.kda_heads, spec.head_k_dim) == (6, 4, 32)
    t = si.capacity(spec, tp=1, native_dtype="bfloat16", budget_bytes=1 << 20)
    # tiny: 6 x 4 x 32 x 32 x 2 state + 6 x 3 x 4 x 96 x 2 conv
    assert t.total_bytes[0] == 49_152 + 13_824
    assert t.total_bytes[1] == 24_576 + 6 * 4 * 32 * 2 + 13_824
    # the conv window's share is larger at tiny scale, so the gain is smaller than at K3 scale
    assert 1.5 < t.gain[1] < c.gain[1]


def test_study_bundle(study):
    assert study.n_tokens == 64
    assert study.parked_text == bytes(encode(si.DEFAULT_TEXT)[:64]).decode()
    assert study.errors.label == study.divergence.label == "int8 / key channel"
    assert study.memory_k3.model == "kimi-k3" and study.memory_tiny.model == "k3-mini"
    assert study.memory_k3.capacity[1] == 547
    assert study.table.rel_fro[0] == pytest.approx(study.divergence.park_once_state_dist[0])


def test_chinese_text_and_other_variant():
    s = si.int8_study("状态缓存" * 10, n_tokens=30, fmt="fp8_e4m3", layer=5, head=1, steps=3)
    assert s.n_tokens == 30 and s.errors.layer == 5 and s.errors.head == 1
    assert s.errors.label == "fp8-e4m3 / key channel"
    assert len(s.divergence.steps) == 4


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(text=""), "text"),
        (dict(text="x" * (si.MAX_TEXT_CHARS + 1)), "text"),
        (dict(text=123), "text"),
        (dict(text="short", n_tokens=6), "n_tokens"),
        (dict(n_tokens=0), "n_tokens"),
        (dict(n_tokens=2.5), "n_tokens"),
        (dict(granularity="row"), "granularity"),
        (dict(fmt="int4"), "fmt"),
        (dict(layer=6), "layer"),
        (dict(head=-1), "head"),
        (dict(steps=0), "steps"),
        (dict(steps=si.MAX_STEPS + 1), "steps"),
        (dict(native_dtype="float64"), "native_dtype"),
        (dict(budget_gib=0), "budget_gib"),
        (dict(tp=5), "tp"),
    ],
)
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        si.int8_study(**kwargs)


def test_error_map_ratio_and_agreement_counts(study):
    """The figures' numbers come from the study: a naive per-element loop for the error / bound
    ratio of the drawn (layer, head), and the agreement counts of both divergence runs."""
    e = study.errors
    worst, ratio = 0.0, 0.0
    for k in range(e.error.shape[0]):
        for v in range(e.error.shape[1]):
            err = abs(float(e.restored[k, v]) - float(e.state[k, v]))
            worst = max(worst, err)
            if e.bound[k, v] > 0:
                ratio = max(ratio, err / float(e.bound[k, v]))
    assert e.max_abs_error == pytest.approx(worst, rel=1e-12, abs=1e-18)
    assert e.max_bound_ratio == pytest.approx(ratio, rel=1e-12)
    assert 0.5 < e.max_bound_ratio <= 1 + 1e-12  # the bound holds and is nearly reached
    d = study.divergence
    assert d.decoded == 16 == d.tokens.size
    assert d.park_once_same == sum(bool(x) for x in d.park_once_agree[1:])
    assert d.every_step_same == sum(bool(x) for x in d.every_step_agree[1:])
    assert si.RUNS == ("park_once", "every_step")
