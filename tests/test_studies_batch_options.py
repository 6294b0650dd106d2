"""studies.batch_view with the engine's two options: one byte buffer (the border per step, the
request that waits for it) and decode on captured sizes (the index table, padding and sink).

Real values: the border's state side is the pool's slots times a slot's bytes, the three byte
columns add up to the buffer, the waiting request's need exceeds the gap it saw; each all-decode
step is padded to the smallest captured size that holds it (SGLang's
``BaseCudaGraphRunner._pad_to_bucket``), its rows carry the running requests' slot + 1 and the
padding rows index 0 (SGLang's sink, ``MambaSlotAllocator.clear``); tokens stay exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.model import TinyHybrid, encode
from kda_core.serve._slots import StateShape
from kda_core.serve.engine import Engine
from kda_core.studies import batch_view as bv
from kda_core.studies import exports

MODEL = TinyHybrid()
S = StateShape.of(MODEL).native_bytes
KVB = 8 * len(MODEL.mla_layers) * MODEL.config.mla_latent
_BASE = "The quick brown fox jumps over the lazy dog while the scheduler counts bytes. "
LONG = [f"Req {i}: " + (_BASE * 7)[:500] for i in range(6)]  # ~507 tokens: KV > one slot
ARRIVALS = [0, 0, 0, 2, 4, 6]


@pytest.fixture(scope="module")
def buffered() -> bv.BatchView:
    return bv.batch_view(
        LONG,
        8,
        ARRIVALS,
        strategy="extra_buffer_lazy",
        state_slots=None,
        unified_memory=4000 * 1024,
        model=MODEL,
        reference=True,
    )


def test_the_border_is_the_pools_bytes(buffered):
    v = buffered
    assert v.buffer_bytes == 4000 * 1024 and v.slot_bytes == S and v.kv_token_bytes == KVB
    assert v.state_slots == 4000 * 1024 // S == 16 and v.max_running == 16 // 4
    assert v.max_abs_logit_diff is not None and v.max_abs_logit_diff < 1e-9
    state_end, kv_start = v.border[:, 0], v.border[:, 1]
    assert np.array_equal(state_end, (v.slots_running + v.slots_cached) * S)  # up from byte 0
    assert np.all((state_end <= kv_start) & (kv_start <= v.buffer_bytes))
    assert np.all((v.buffer_bytes - kv_start) % KVB == 0)  # whole KV tokens down from the top
    assert len(set(state_end.tolist())) > 3 and len(set(kv_start.tolist())) > 3  # it moves
    t = exports.columns("batch_pool", v)
    assert np.array_equal(t["state_bytes"] + t["free_bytes"] + t["kv_bytes"], t["buffer_bytes"])
    assert np.array_equal(t["state_bytes"], state_end)


def test_a_request_waits_because_the_buffer_is_full(buffered):
    v = buffered
    held = np.flatnonzero(v.held_for_memory >= 0)
    assert held.size > 0
    code = bv.PHASES.index("waiting_memory")
    assert np.array_equal(np.flatnonzero((v.phase == code).any(axis=0)), held)
    ups = 2  # extra_buffer_lazy opens an active slot and one track slot at admission
    for s in held:
        i = int(v.held_for_memory[s])
        assert v.phase[i, s] == code and ARRIVALS[i] <= s < v.admitted_step[i]
        assert v.running[s] < v.max_running  # not the running cap: the buffer
        if not np.any(v.finished_step == s):  # a finish frees bytes after the admission try
            gap = v.border[s, 1] - v.border[s, 0]
            assert gap < ups * S + len(encode(LONG[i])) * KVB
    # the same batch in a buffer four times larger: nobody waits for memory
    big = bv.batch_view(
        LONG,
        8,
        ARRIVALS,
        strategy="extra_buffer_lazy",
        state_slots=None,
        unified_memory=16000 * 1024,
        model=MODEL,
    )
    assert np.all(big.held_for_memory < 0) and not np.any(big.phase == code)


def test_separate_pools_have_no_border_and_the_options_refuse_each_other():
    v = bv.batch_view(["hi", "there"], 3, state_slots=16, model=MODEL)
    assert v.border is None and v.buffer_bytes is None and v.graph_bs is None
    assert (
        "state_bytes" not in exports.columns("batch_pool", v)
        and exports.columns("batch_index", v)["step"] == []
    )
    with pytest.raises(ValueError, match="leave state_slots None"):
        bv.batch_view(["hi"], state_slots=16, unified_memory=4000 * 1024, model=MODEL)


@pytest.mark.parametrize("strategy", ["no_buffer", "extra_buffer", "extra_buffer_lazy"])
def test_buffer_floor_is_the_engines(strategy):
    floor = bv.buffer_floor(strategy, MODEL)
    reserved = {"no_buffer": 3, "extra_buffer": 5, "extra_buffer_lazy": 4}[strategy]
    assert floor == reserved * S + KVB
    Engine(model=MODEL, strategy=strategy, unified_memory=floor)
    with pytest.raises(ValueError, match="unified_memory"):
        Engine(model=MODEL, strategy=strategy, unified_memory=floor - 1)


@pytest.mark.parametrize("sizes", [(1, 2, 4, 8, 12), (2, 3), (1, 8)])
def test_the_index_table_pads_to_the_captured_size_and_the_sink(sizes):
    prompts = list(bv.DEFAULT_PROMPTS)
    v = bv.batch_view(
        prompts,
        6,
        list(bv.DEFAULT_ARRIVALS),
        state_slots=40,
        cuda_graph_bs=sizes,
        model=MODEL,
        reference=True,
    )
    assert v.graph_bs == tuple(sorted(sizes))
    # 40 slots // 5 reserved = 8, capped by the largest captured size (cuda_graph_max_bs)
    assert v.max_running == min(8, max(sizes)) and v.peak_running <= max(sizes)
    assert v.max_abs_logit_diff is not None and v.max_abs_logit_diff < 1e-9
    decode = bv.PHASES.index("decode")
    all_decode = (v.prefill_tokens == 0) & (v.decode_tokens > 0)
    assert np.array_equal(v.graph_padded > 0, all_decode)  # prefill steps stay eager
    for s in np.flatnonzero(all_decode):
        n, p = int(v.graph_batch[s]), int(v.graph_padded[s])
        assert n == v.decode_tokens[s] == v.running[s]
        assert p == min(c for c in sizes if c >= n)  # the smallest captured size >= batch
        rows, reqs = v.state_index[s], v.row_request[s]
        assert np.all(rows[:n] >= 1) and len(set(rows[:n].tolist())) == n  # slot + 1, distinct
        assert np.all(rows[n:p] == 0) and np.all(rows[p:] == -1)  # the sink, then no row
        assert sorted(reqs[:n].tolist()) == sorted(np.flatnonzero(v.phase[:, s] == decode))
        assert np.all(reqs[n:] == -1)
    t = exports.columns("batch_index", v)
    assert len(t["step"]) == int(v.graph_padded.sum())
    assert all((r == 0) == (i == 0) for r, i in zip(t["request"], t["state_index"]))
    assert sum(1 for i in t["state_index"] if i == 0) == int((v.graph_padded - v.graph_batch).sum())


def test_a_request_waits_for_the_kv_pool_of_separate_pools_too():
    """Separate pools: two 40-token requests hold 80 to 94 of the 100 KV tokens, so the third
    (its prompt needs 40 more) waits at the head until one finishes; the cap (8) is not it."""
    prompts = ["r" * 40, "a" * 40, "b" * 40, "c" * 40]
    assert {len(encode(p)) for p in prompts} == {40}
    v = bv.batch_view(prompts, 8, state_slots=40, kv_tokens=100, model=MODEL)
    held = np.flatnonzero(v.held_for_memory >= 0)
    assert held.size and set(v.held_for_memory[held].tolist()) == {2}
    assert np.all(v.running[held] == 2) and v.max_running == 8
    assert v.admitted_step[2] == held[-1] + 1 == v.finished_step[0] + 1
