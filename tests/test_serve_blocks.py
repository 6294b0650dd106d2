"""Serving through vLLM's block table: ``Engine(block_cache=VLLMBlockCache(...))``.

The engine keeps every byte of a request's model state in the block model's physical blocks
(the MLA KV pages and ONE KDA state per state block) and follows its steps: the chunk cut
(``Scheduler._mamba_block_aligned_split``), the block copies (``take_kv_cache_block_copies``),
the state block each step writes. Every request's tokens and logits equal the uncached model's
(``TinyHybrid.generate``) whatever the block size, hash unit and chunk budget - including
fine-grained partial hits, where the hit ends inside a block and the request copies it first.
The block model itself is checked against vLLM 0.33 in tests/real/test_vllm_blocks.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.model import TinyHybrid, encode
from kda_core.serve import _blocks
from kda_core.serve.engine import Engine, Request

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "
PROMPTS = [SYSTEM * 2 + "A", SYSTEM * 2 + "B", SYSTEM + "C", SYSTEM * 2 + "A"]
REF = {p: MODEL.generate(encode(p), 5) for p in set(PROMPTS)}


def engine(block: int, unit: int, chunk: int = 24, num_blocks: int = 200) -> Engine:
    cache = VLLMBlockCache(block, unit, num_blocks=num_blocks, max_num_batched_tokens=chunk)
    return Engine(model=MODEL, block_cache=cache)


def assert_uncached(rep, prompts, n_new: int) -> None:
    for i, p in enumerate(prompts):
        ids, logits = REF[p] if n_new == 5 else MODEL.generate(encode(p), n_new)
        assert rep.tokens[i] == ids, f"request {i}"
        np.testing.assert_allclose(rep.logits[i], logits, atol=1e-9, rtol=0)


@pytest.mark.parametrize("block, unit", [(16, 16), (16, 4), (32, 8), (8, 8), (64, 16)])
def test_block_table_serving_equals_the_uncached_model(block, unit):
    e = engine(block, unit)
    rep = e.serve_blocks([Request(p, 5) for p in PROMPTS])
    assert_uncached(rep, PROMPTS, 5)
    assert rep.hits[0].tokens == 0
    # the repeated prompt hits at its last hash-unit boundary before the last token
    P = len(encode(PROMPTS[3]))
    assert rep.hits[3].tokens == (P - 1) // unit * unit
    assert rep.hits[3].partial == bool(rep.hits[3].tokens % block)


def test_partial_hit_copies_the_block_and_one_block_serves_several_prefixes():
    rep = engine(16, 4).serve_blocks([Request(p, 5) for p in PROMPTS])
    hit = rep.hits[3]
    assert hit.partial and hit.tokens == 88
    first = next(r for r in rep.steps if r.request == 3)
    assert first.step.hit == hit and first.step.start == 88
    # copy-on-write: the hit state block is copied into the request's own block, which the
    # step reads its starting state from
    assert (hit.state_block, first.read_block) in first.step.copies
    assert first.state_table[hit.table_index] == first.read_block != hit.state_block
    several = [b for b in rep.pool.blocks if len(b.key_tokens) > 1]
    assert several, "fine-grained keys: one physical block holds keys at several boundaries"


def test_every_step_reads_the_state_its_previous_step_wrote():
    rep = engine(16, 4, chunk=8).serve_blocks([Request(PROMPTS[0], 6)])
    rows = rep.steps
    assert [r.step.start for r in rows[1:]] == [r.step.end for r in rows[:-1]]
    for prev, row in zip(rows, rows[1:]):
        copied = dict(row.step.copies)
        assert row.read_block in (prev.step.state_block, copied.get(prev.step.state_block))
    assert {r.phase for r in rows} == {"prefill", "decode"}
    assert sum(r.phase == "decode" for r in rows) == 5  # the last token is not consumed


def test_a_missed_copy_is_caught(monkeypatch):
    """The engine keeps nothing outside the blocks: skipping the block copies fails."""
    monkeypatch.setattr(_blocks.BlockServer, "_copy", lambda self, src, dst: None)
    with pytest.raises(AssertionError, match="state block"):
        engine(16, 4).serve_blocks([Request(p, 5) for p in PROMPTS])


def test_modes_are_kept_apart():
    e = engine(16, 16)
    with pytest.raises(ValueError, match="use serve_blocks"):
        e.serve([Request("x", 2)])
    with pytest.raises(ValueError, match="use serve_blocks"):
        e.generate("x", 2)
    with pytest.raises(ValueError, match=r"serve_blocks needs Engine\(block_cache"):
        Engine(model=MODEL).serve_blocks([Request("x", 2)])
    with pytest.raises(ValueError, match="block_cache must be a VLLMBlockCache"):
        Engine(model=MODEL, block_cache="vllm")


def test_a_pool_too_small_is_refused_and_leaves_no_request_behind():
    e = engine(16, 16, num_blocks=4)
    with pytest.raises(ValueError, match="num_blocks=4 is too small"):
        e.serve_blocks([Request(SYSTEM * 3, 2)])
    assert e.blocks is not None and e.blocks.cache.export().tables == {}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 30), st.integers(1, 4)), min_size=1, max_size=4
    ),
    st.sampled_from([(8, 2), (16, 4), (16, 16), (32, 8)]),
    st.integers(4, 40),
)
def test_any_workload_equals_the_uncached_model(spec, block_unit, chunk):
    block, unit = block_unit
    prompts = [(SYSTEM * 2)[: 20 + 7 * k] + "xyz"[: n % 3] + str(n) for k, n, _ in spec]
    news = [m for _, _, m in spec]
    rep = engine(block, unit, chunk=chunk).serve_blocks(
        [Request(p, m) for p, m in zip(prompts, news)]
    )
    for i, (p, m) in enumerate(zip(prompts, news)):
        ids, logits = MODEL.generate(encode(p), m)
        assert rep.tokens[i] == ids
        np.testing.assert_allclose(rep.logits[i], logits, atol=1e-9, rtol=0)
