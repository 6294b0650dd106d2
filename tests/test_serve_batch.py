"""Batched model passes against per-request TinyHybrid calls (any weights: two seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.model import TinyHybrid
from kda_core.serve.batch import decode_batch, forward_batch

MODELS = {0: TinyHybrid(), 5: TinyHybrid(weights="random", seed=5)}


def prefilled(model, rng, n):
    st = model.new_state()
    if n:
        model.prefill(list(rng.integers(0, 256, n)), st)
    return st


@pytest.mark.parametrize("seed", sorted(MODELS))
@pytest.mark.parametrize(
    "pasts, lens",
    [([0], [1]), ([0, 3, 0], [1, 1, 1]), ([0, 5, 17, 0], [40, 1, 3, 70]), ([2] * 9, [1] * 9)],
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
def test_decode_batch_equals_decode_step_over_many_steps(seed):
    model = MODELS[seed]
    rng = np.random.default_rng(1)
    states = [prefilled(model, rng, n) for n in (1, 9, 30, 2, 64)]
    twins = [st.copy() for st in states]
    toks = [int(t) for t in rng.integers(0, 256, len(states))]
    for _ in range(6):
        got = decode_batch(model, toks, states)
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
