"""vLLM 0.33's block-level prefix cache (``kda_core.cache.vllm_blocks``): hand-derived cases.

The model is checked step by step against vLLM's own ``KVCacheManager`` in
tests/real/test_vllm_blocks.py (block ids, keys, references, free order); here the values
are derived by hand from vLLM's rules so the main suite pins them without vLLM installed.
"""

from __future__ import annotations

import pytest

from kda_core.cache.policy.vllm import aligned_split
from kda_core.cache.vllm_blocks import VLLMBlockCache


def _distinct(n: int, base: int = 0) -> list[int]:
    return [base + i for i in range(n)]


def test_aligned_split_matches_vllms_documented_schedule():
    # vLLM's tests/v1/core/prefix_cache/test_partial_prefix_cache_hits.py: block 512, unit 32,
    # prompt 10000, budget 8192: 0 -> 8192 -> 9728 -> 9984 -> 10000
    ends, start = [], 0
    while start < 10_000:
        start += aligned_split(
            start, min(8192, 10_000 - start), 10_000, 10_000, 512, 32, True, 8192, 0
        )
        ends.append(start)
    assert ends == [8192, 9728, 9984, 10_000]
    # partial hits off: no stop at the prompt's last unit boundary
    assert aligned_split(9728, 272, 10_000, 10_000, 512, 32, False, 8192, 0) == 272
    # resumed mid-block (a hit at 9984 of a 12000-token prompt): stop at the next boundary
    assert aligned_split(9984, 2016, 12_000, 12_000, 512, 32, True, 8192, 0) == 256


def test_96_of_a_128_token_block():
    cache = VLLMBlockCache(128, 32, num_blocks=16)
    first = _distinct(97)
    steps = cache.serve(first, [500])
    # the prompt's last 32-token boundary before its final token is 96: a chunk stops there
    assert [(s.start, s.end) for s in steps] == [(0, 96), (96, 97), (97, 98)]
    assert steps[0].registered == ((0, 96, 1), (1, 96, 2))  # KV block 1, state block 2
    # the running state moves on in block 2, so its key moves to a copy, block 3
    assert steps[1].copies == ((2, 3),) and steps[1].registered == ((1, 96, 3),)
    other = first[:96] + _distinct(40, 900)
    hit = cache.lookup(other)
    assert (hit.tokens, hit.state_block, hit.table_index, hit.partial) == (96, 3, 0, True)
    assert hit.kv_blocks == (1,) and hit.kv_tokens == 96
    second = cache.serve(other, [])
    # a hit inside a block is copied before the request writes: KV 1 and state 3
    assert [src for src, _ in second[0].copies] == [1, 3]
    assert second[0].start == 96
    # block-aligned matching only: the same request finds nothing to resume from
    coarse = VLLMBlockCache(128, num_blocks=16)
    coarse.serve(first, [500])
    assert coarse.lookup(other).tokens == 0


def test_4480_inside_4096():
    cache = VLLMBlockCache(4096, 64, num_blocks=8, max_num_batched_tokens=2048)
    first = _distinct(4481)
    steps = cache.serve(first, [1, 2])
    assert [s.end for s in steps] == [2048, 4096, 4480, 4481, 4482, 4483]
    follow = first[:4480] + _distinct(300, 10_000)
    hit = cache.lookup(follow)
    assert (hit.tokens, hit.table_index, hit.partial) == (4480, 1, True)
    coarse = VLLMBlockCache(4096, num_blocks=8, max_num_batched_tokens=2048)
    coarse.serve(first, [1, 2])
    hit = coarse.lookup(follow)
    assert (hit.tokens, hit.table_index, hit.partial) == (4096, 0, False)


def test_a_hit_needs_a_registered_entry_not_just_a_shared_prefix():
    # keys exist only at block ends and at the prompt's last unit boundary (192 here)
    cache = VLLMBlockCache(128, 32, num_blocks=16)
    first = _distinct(200)
    cache.serve(first, [])
    states = sorted(e.tokens for e in cache.export().entries if e.group == 1)
    assert states == [128, 192]
    assert cache.lookup(first[:180] + _distinct(30, 5000)).tokens == 128  # not 160
    assert cache.lookup(first[:196] + _distinct(30, 5000)).tokens == 192
    assert cache.lookup(first).tokens == 192  # a resend is capped at P - 1 = 199


def test_block_aligned_prompt_resend():
    fine = VLLMBlockCache(64, 16, num_blocks=16)
    prompt = _distinct(128)
    assert [s.end for s in fine.serve(prompt, [])] == [64, 112, 128]
    assert fine.lookup(prompt).tokens == 112
    coarse = VLLMBlockCache(64, num_blocks=16)
    assert [s.end for s in coarse.serve(prompt, [])] == [64, 128]
    assert coarse.lookup(prompt).tokens == 64


def test_state_table_keeps_the_running_state_and_its_copy_source_only():
    # vLLM's align mode reserves 2 state blocks per request (MambaSpec.max_memory_usage_bytes):
    # the running one and the previous one, the source of the copy into the new block
    cache = VLLMBlockCache(16, 4, num_blocks=32, max_num_batched_tokens=16)
    cache.add("r", _distinct(70))
    live = []
    for _ in range(4):
        cache.step("r")
        kv_table, state_table = cache.export().tables["r"]
        assert 0 not in kv_table  # KV keeps every page
        live.append(sum(b != 0 for b in state_table))
    assert live == [1, 2, 2, 2]
    assert state_table[:2] == (0, 0) and 0 not in state_table[2:]
    cache.finish("r")
    assert cache.export().tables == {}


def test_lookup_is_read_only_and_tail_first_free_order():
    cache = VLLMBlockCache(16, 4, num_blocks=24)
    cache.serve(_distinct(40), _distinct(5, 100))
    before = cache.export()
    cache.lookup(_distinct(40) + [7, 7, 7])
    cache.lookup(_distinct(30, 999))
    assert cache.export() == before
    # keyed blocks sit at the back of the free queue (evicted last), unkeyed at the front
    keyed = {b.block_id for b in before.blocks if b.key_tokens}
    assert set(before.free[-len(keyed) :]) == keyed


def test_small_pool_evicts_least_recently_used_keys():
    cache = VLLMBlockCache(16, 4, num_blocks=10)
    old = _distinct(33)
    cache.serve(old, [])
    assert cache.lookup(old + [1]).tokens == 32
    for i in range(6):
        cache.serve(_distinct(33, 1000 * (i + 1)), [])
    assert cache.pool.evictions > 0
    assert cache.lookup(old + [1]).tokens == 0


def test_retention_zero_keeps_only_reachable_boundaries():
    # a state exists only where a chunk ends on a block boundary: chunks of one block here
    dense = VLLMBlockCache(32, num_blocks=40, max_num_batched_tokens=32)
    sparse = VLLMBlockCache(32, num_blocks=40, max_num_batched_tokens=32, retention=0)
    one_chunk = VLLMBlockCache(32, num_blocks=40)
    prompt = _distinct(200)
    for cache in (dense, sparse, one_chunk):
        cache.serve(prompt, [])

    def states(c):
        return sorted(e.tokens for e in c.export().entries if e.group == 1)

    assert states(dense) == [32, 64, 96, 128, 160, 192]
    assert states(sparse) == [192]  # the replay boundary floor((P - 1) / B) * B
    assert states(one_chunk) == [192]  # one chunk to the last cacheable boundary
    # retention 64: the replay boundary and the multiples of 64
    every64 = VLLMBlockCache(32, num_blocks=40, max_num_batched_tokens=32, retention=64)
    every64.serve(prompt, [])
    assert states(every64) == [64, 128, 192]


def test_partial_hits_refused_outside_align_mode_and_bad_units():
    with pytest.raises(ValueError, match="mamba_cache_mode must be 'align'"):
        VLLMBlockCache(64, 16, mamba_cache_mode="none")
    with pytest.raises(ValueError, match="mamba_cache_mode"):
        VLLMBlockCache(64, 16, mamba_cache_mode="all")
    with pytest.raises(ValueError, match="prefix_match_unit=24 must divide block_size=64"):
        VLLMBlockCache(64, 24)
    with pytest.raises(ValueError, match="prefix_match_unit must be in"):
        VLLMBlockCache(64, 128)
    with pytest.raises(ValueError, match="retention must be a multiple of block_size=64"):
        VLLMBlockCache(64, 16, retention=96)
    assert VLLMBlockCache(64).fine is False and VLLMBlockCache(64, 16).fine is True


def test_bad_requests_are_refused_and_leave_the_cache_as_it_was():
    cache = VLLMBlockCache(16, 4, num_blocks=4)
    with pytest.raises(ValueError, match="tokens must hold 1 to"):
        cache.lookup([])
    with pytest.raises(ValueError, match=r"tokens\[1\] must be >= 0"):
        cache.lookup([1, -2])
    with pytest.raises(ValueError, match=r"prompt\[0\] must be an int"):
        cache.add("a", [True])
    with pytest.raises(ValueError, match="is not in the cache"):
        cache.step("nobody")
    cache.add("a", _distinct(10))
    with pytest.raises(ValueError, match="request_id must be a new str"):
        cache.add("a", [1])
    assert [cache.step("a").end for _ in range(2)] == [8, 10]  # 8: the last unit boundary
    with pytest.raises(ValueError, match="has computed every token"):
        cache.step("a")
    cache.finish("a")
    before = cache.export()
    cache.add("big", _distinct(200))  # 3 usable blocks cannot hold 16 KV pages
    with pytest.raises(ValueError, match="num_blocks=4 is too small"):
        cache.step("big")
    cache.finish("big")
    assert cache.export() == before


def test_the_block_table_is_a_prefix_cache():
    """``VLLMBlockCache`` behind the cache protocol: a match is ``lookup``'s hit, a locked
    hit survives eviction, an insert keys what serving the prefix keys, a reset empties it."""
    from kda_core.cache.protocol import HandleError, PrefixCache

    cache = VLLMBlockCache(16, 4, num_blocks=12)
    assert isinstance(cache, PrefixCache)
    first = _distinct(41)
    ins = cache.insert_prefix(first)
    # prefill of 41 tokens: one chunk to the last cacheable boundary 32 (a state block keeps
    # the latest state only: none at 16), then the tail 40 = (41 - 1) // 4 * 4, then 41
    assert (ins.cached_len, ins.inserted_len, ins.new) == (0, 41, (32, 40))
    cache.check_integrity()
    m = cache.match_prefix(first[:40] + [999])
    assert (m.token_match, m.restore_at, m.mid_edge) == (40, 40, True)
    assert m.kv == cache.lookup(first[:40] + [999, 998]).kv_blocks and len(m.kv) == 3
    assert cache.read_kv(first, 20) == m.kv[:2]
    assert cache.kv_tokens == 3 * 16 and cache.n_states == 2 and cache.n_nodes > 3
    cache.lock_handle(m.restore)
    with pytest.raises(HandleError, match="not locked"):
        cache.lock_handle(m.path, unlock=True)
    ev = cache.evict(10**6, states=10)
    # every unlocked key goes: the state block at 32 (the one at 40 is locked) and no KV
    # block: the three of [0, 48) are the locked hit's
    assert (ev.states, ev.kv_tokens) == (1, 0)
    assert cache.match_prefix(first[:40] + [999]).restore_at == 40
    cache.check_integrity()
    cache.lock_handle(m.restore, unlock=True)
    assert cache.evict(10**6, states=10).states == 1
    assert cache.match_prefix(first).restore_at == 0
    with pytest.raises(HandleError, match="stale"):
        cache.lock_handle(m.restore)
    with pytest.raises(ValueError, match="holds no payloads"):
        cache.insert_prefix(first, states=[(16, "s")])
    cache.insert_prefix(first)
    assert cache.n_states == 2 and cache.reset() == 2 and cache.n_nodes == 0
    cache.check_integrity()


def test_a_state_keyed_this_step_is_no_hit_for_another_request_until_the_next():
    """vLLM's ``cached_blocks_this_step``: a state another request keys in this step is not
    computed yet, so a new request hitting it waits a step (``deferred``)."""
    cache = VLLMBlockCache(16, num_blocks=32)
    a = _distinct(40)
    cache.add("a", a)
    cache.new_step()
    assert cache.step("a", new_step=False).end == 32  # the last cacheable boundary
    b = a[:35] + [777]
    assert cache.lookup(b).tokens == 32 and cache.deferred(b)
    cache.new_step()
    assert not cache.deferred(b)
    cache.finish("a")


def test_a_key_moved_to_a_copy_is_no_hit_until_the_copy_ran():
    """vLLM's ``MambaManager.allocate_new_blocks``: when the producer of the prompt's partial
    tail key moves on, the key moves to a copy-on-write block the step's copy fills, and goes
    into ``cached_blocks_this_step``: a new request hitting it in that step waits a step."""
    cache = VLLMBlockCache(16, 4, num_blocks=32)
    a = _distinct(40)  # the prompt's last hash boundary, 36, lies inside block 2
    cache.add("a", a)
    assert [cache.step("a").end for _ in range(2)] == [32, 36]  # the last block, the tail
    b = a[:37] + [777]
    assert cache.lookup(b).tokens == 36 and cache.deferred(b)  # keyed in this step
    st = cache.step("a")  # the next step moves the key to a copy
    assert st.copies and cache.lookup(b).state_block == st.copies[0][1]
    assert cache.deferred(b)
    cache.new_step()
    assert not cache.deferred(b)
    cache.finish("a")
