"""Serving through vLLM's block table: ``Engine(block_cache=VLLMBlockCache(...))``.

The engine's one serving loop batches the requests; each request's state lives in the block
model's physical blocks (the MLA KV pages and ONE KDA state per state block) and its chunks
follow the block model's steps: the chunk cut (``Scheduler._mamba_block_aligned_split``), the
block copies (``take_kv_cache_block_copies``), the state block each step writes. Every
request's tokens and logits equal the uncached model's (``TinyHybrid.generate``) whatever the
block size, hash unit, chunk budget and batching - including fine-grained partial hits, where
the hit ends inside a block and the request copies it first. The block model itself is
checked against vLLM 0.33 in tests/real/test_vllm_blocks.py.
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
from kda_core.serve.report import ServeReport

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "
PROMPTS = [SYSTEM * 2 + "A", SYSTEM * 2 + "B", SYSTEM + "C", SYSTEM * 2 + "A"]
REF = {p: MODEL.generate(encode(p), 5) for p in set(PROMPTS)}


def engine(block: int, unit: int, chunk: int = 24, num_blocks: int = 200) -> Engine:
    cache = VLLMBlockCache(block, unit, num_blocks=num_blocks, max_num_batched_tokens=chunk)
    return Engine(model=MODEL, block_cache=cache)


def assert_uncached(rep: ServeReport, prompts, n_new: int) -> None:
    for i, p in enumerate(prompts):
        ids, logits = REF[p] if n_new == 5 else MODEL.generate(encode(p), n_new)
        assert rep.reports[i].tokens == ids, f"request {i}"
        np.testing.assert_allclose(rep.reports[i].logits, logits, atol=1e-9, rtol=0)


def hits(rep: ServeReport) -> list:
    """Each request's lookup: its first chunk's."""
    first = {}
    for row in rep.block_steps:
        first.setdefault(row.request, row.step.hit)
    return [first[i] for i in range(len(rep.reports))]


def one_by_one(prompts, n_new: int = 5) -> list[Request]:
    """Requests arriving far apart: each finds the earlier ones finished."""
    return [Request(p, n_new, arrival=100 * i) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("block, unit", [(16, 16), (16, 4), (32, 8), (8, 8), (64, 16)])
def test_block_table_serving_equals_the_uncached_model(block, unit):
    e = engine(block, unit)
    rep = e.serve(one_by_one(PROMPTS))
    assert_uncached(rep, PROMPTS, 5)
    assert hits(rep)[0].tokens == 0
    # the repeated prompt hits at its last hash-unit boundary before the last token
    P = len(encode(PROMPTS[3]))
    assert hits(rep)[3].tokens == (P - 1) // unit * unit == rep.reports[3].restore_at
    assert hits(rep)[3].partial == bool(hits(rep)[3].tokens % block)
    e.check_integrity()


def test_requests_are_batched_and_a_state_keyed_this_step_is_no_hit_yet():
    """All at once: several requests run in one scheduler step (decodes and chunks of
    different requests), and each still equals the uncached model. A request whose hit
    another request keys in the same step waits for the next (cached_blocks_this_step)."""
    e = engine(16, 4, chunk=48)
    prompts = PROMPTS + [SYSTEM * 2 + "D", SYSTEM + "E"]
    rep = e.serve([Request(p, 5) for p in prompts])
    for i, p in enumerate(prompts):
        ids, logits = MODEL.generate(encode(p), 5)
        assert rep.reports[i].tokens == ids
        np.testing.assert_allclose(rep.reports[i].logits, logits, atol=1e-9, rtol=0)
    assert max(len(row.running) for row in rep.steps) >= 3
    assert any(row.decode_tokens and row.prefill_tokens for row in rep.steps)
    assert sum(r.restore_at > 0 for r in rep.reports) >= 2  # later requests hit earlier ones
    e.check_integrity()


def test_partial_hit_copies_the_block_and_one_block_serves_several_prefixes():
    e = engine(16, 4)
    rep = e.serve(one_by_one(PROMPTS))
    hit = hits(rep)[3]
    assert hit.partial and hit.tokens == 88
    first = next(r for r in rep.block_steps if r.request == 3)
    assert first.step.hit == hit and first.step.start == 88
    # copy-on-write: the hit state block is copied into the request's own block, which the
    # step reads its starting state from
    assert (hit.state_block, first.read_block) in first.step.copies
    assert first.state_table[hit.table_index] == first.read_block != hit.state_block
    several = [b for b in e.cache.export().blocks if len(b.key_tokens) > 1]
    assert several, "fine-grained keys: one physical block holds keys at several boundaries"


def test_every_step_reads_the_state_its_previous_step_wrote():
    rows = engine(16, 4, chunk=8).serve([Request(PROMPTS[0], 6)]).block_steps
    assert [r.step.start for r in rows[1:]] == [r.step.end for r in rows[:-1]]
    for prev, row in zip(rows, rows[1:]):
        copied = dict(row.step.copies)
        assert row.read_block in (prev.step.state_block, copied.get(prev.step.state_block))
    assert {r.phase for r in rows} == {"prefill", "decode"}
    assert sum(r.phase == "decode" for r in rows) == 5  # the last token is not consumed


def test_a_missed_copy_is_caught(monkeypatch):
    """The engine keeps nothing outside the blocks: skipping the block copies fails."""
    monkeypatch.setattr(_blocks.BlockLifecycle, "_copy", lambda self, src, dst: None)
    with pytest.raises(AssertionError, match="state block"):
        engine(16, 4).serve(one_by_one(PROMPTS))


def test_generate_goes_through_the_block_table_too_and_radix_options_are_refused():
    e = engine(16, 4)
    e.generate(PROMPTS[0], 3)
    r = e.generate(PROMPTS[0], 5)
    assert r.restore_at == 88 and r.tokens == REF[PROMPTS[0]][0]
    with pytest.raises(ValueError, match="restore must be one of"):
        e.generate("x", 2, restore="inconsistent")
    with pytest.raises(ValueError, match="kv_tokens"):
        e.serve([Request("x", 2)], kv_tokens=100)
    with pytest.raises(ValueError, match="block_cache must be a VLLMBlockCache"):
        Engine(model=MODEL, block_cache="vllm")
    cache = VLLMBlockCache(16)
    with pytest.raises(ValueError, match="not with int8_checkpoints, unified_memory"):
        Engine(model=MODEL, block_cache=cache, int8_checkpoints=True, unified_memory=1 << 30)


def test_a_pool_too_small_is_refused_and_leaves_no_request_behind():
    e = engine(16, 16, num_blocks=4)
    with pytest.raises(ValueError, match="num_blocks=4 is too small"):
        e.serve([Request(SYSTEM * 3, 2)])
    assert e.cache.export().tables == {}
    e.check_integrity()


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
    e = engine(block, unit, chunk=chunk)
    rep = e.serve([Request(p, m) for p, m in zip(prompts, news)])
    for i, (p, m) in enumerate(zip(prompts, news)):
        ids, logits = MODEL.generate(encode(p), m)
        assert rep.reports[i].tokens == ids
        np.testing.assert_allclose(rep.reports[i].logits, logits, atol=1e-9, rtol=0)
    e.check_integrity()


def test_a_request_whose_first_step_would_hit_a_state_keyed_in_that_step_waits():
    # request 2 is admitted while nothing is cached, and its lookup (its first step) comes
    # after request 1 keyed the state at 24 in the same step; it waits a step (vLLM's
    # cached_blocks_this_step) and then restores 24 tokens
    spec = [(2, 2, 1), (1, 1, 1), (1, 1, 1)]
    prompts = [(SYSTEM * 2)[: 20 + 7 * k] + "xyz"[: n % 3] + str(n) for k, n, _ in spec]
    e = engine(32, 8, chunk=33)
    rep = e.serve([Request(p, 1) for p in prompts])
    for i, p in enumerate(prompts):
        ids, logits = MODEL.generate(encode(p), 1)
        assert rep.reports[i].tokens == ids
        np.testing.assert_allclose(rep.reports[i].logits, logits, atol=1e-9, rtol=0)
    assert [r.restore_at for r in rep.reports] == [0, 0, 24]
    e.check_integrity()
