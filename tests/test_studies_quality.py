"""kda_core.studies.quality: bits per byte after compressed / inconsistent restores, and the
greedy continuations the int8 app shows. Small passages keep it fast; every arm is recomputed
here by a second, direct route (no study internals)."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import model as M
from kda_core.kda import quant
from kda_core.model import corpus, tokenizer
from kda_core.studies import int8 as si
from kda_core.studies import quality as Q

ARGS = {"n_passages": 1, "length": 128, "park_at": 48, "gap": 4, "cycles": (1, 4), "lags": (8, 32)}


@pytest.fixture(scope="module")
def study() -> Q.QualityStudy:
    return Q.quality_study(**ARGS)


@pytest.fixture(scope="module")
def ids() -> list[int]:
    return Q.passages(1, 128)[0]


def _bits(model, state, ids, start):
    logits = model.prefill(ids[start:-1], state)
    return M.next_byte_bits(logits, ids[start + 1 :])


def test_passages_are_heldout_text(ids):
    doc = corpus.documents(corpus.load("heldout"))
    assert bytes(ids).decode() in "\n\n".join(doc) and len(ids) == 128


def test_exact_arm_is_the_uninterrupted_forward(study, ids):
    m = M.TinyHybrid()
    logits = m.prefill(ids[:-1], m.new_state())  # one pass, no parking at all
    want = M.next_byte_bits(logits, ids[1:])[48:].mean()
    assert study.exact_bpb == pytest.approx(want, abs=1e-9)
    assert study.scored == 128 - 48 - 1


def test_compressed_arms_equal_a_manual_park_and_restore(study, ids):
    m = M.TinyHybrid()
    for i, (_, fmt, gran) in enumerate(si.VARIANTS):
        st = m.new_state()
        m.prefill(ids[:48], st)
        bits = []
        for a, b in ((48, 52), (52, 56), (56, 60), (60, 127)):  # k = 4 cycles, gap 4
            for layer in st.kda:
                layer.S = quant.quantize(layer.S, fmt, gran).dequantize()
            bits.append(M.next_byte_bits(m.prefill(ids[a:b], st), ids[a + 1 : b + 1]))
        assert study.bpb[i, 1] == pytest.approx(np.concatenate(bits).mean(), abs=1e-9)
        assert study.delta[i, 1] == pytest.approx(study.bpb[i, 1] - study.exact_bpb)


def test_inconsistent_arm_equals_the_engine_splice(study, ids):
    """MLA KV of the whole prefix, KDA of 32 tokens earlier (engine.Engine restore=inconsistent)."""
    m = M.TinyHybrid()
    early, full = m.new_state(), m.new_state()
    m.prefill(ids[:16], early)
    m.prefill(ids[:48], full)
    full.kda = [s.copy() for s in early.kda]
    assert study.inconsistent_bpb[1] == pytest.approx(_bits(m, full, ids, 48).mean(), abs=1e-9)


def test_quality_relations_on_the_trained_model(study):
    """Measured relations the README and docs/pools.md state: compression moves bits per byte
    by less than 0.05 per restore format; skipping the replay costs more than any format does."""
    assert np.abs(study.delta).max() < 0.05
    assert study.inconsistent_bpb.max() > study.exact_bpb + np.abs(study.delta).max()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_passages": 0}, "n_passages"),
        ({"length": 64, "park_at": 63}, "park_at"),
        ({"length": 64, "park_at": 32, "gap": 4, "cycles": (16,), "lags": (8,)}, "cycles"),
        ({"park_at": 32, "lags": (32,)}, "lags"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Q.quality_study(**kwargs)


def test_more_passages_than_the_held_out_text_holds_are_refused():
    n = sum(len(d.encode()) >= 2048 for d in corpus.documents(corpus.load("heldout")))
    with pytest.raises(ValueError, match=f"passages: only {n} held-out documents"):
        Q.passages(n + 1, 2048)


def test_continuation_exact_run_is_plain_greedy():
    c = Q.continuation(steps=24, fmt="int8", granularity="tensor")
    prefix = M.encode(si.DEFAULT_TEXT)[:64]
    want, _ = M.TinyHybrid().generate(prefix, 24)
    assert list(c.exact) == want
    assert "".join(c.exact_pieces) == tokenizer.display(prefix + want)[len(
        tokenizer.display(prefix)):]  # fmt: skip
    diff = [i for i, (a, b) in enumerate(zip(c.exact, c.compressed)) if a != b]
    assert c.first_divergence == (diff[0] if diff else None)
    assert c.label == "int8 / tensor"
