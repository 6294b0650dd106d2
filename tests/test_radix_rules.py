"""Scenario tests for kda_core.cache.radix, part 2: path cap, pages, export, integrity, input,
fast-path twins and SGLang's rules (part 1: tests/test_radix.py)."""

from __future__ import annotations

import gc
import random
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kda_core.cache.radix import IntegrityError, RadixStateCache
from kda_core.cache.radix._node import common_prefix
from tests.radix_helpers import Pick, _cache, _free_log, _states, view_at

# ---------------------------------------------------------------- per-path budget


def test_per_path_cap_tombstones_root_first_skipping_forks_locked_and_tail():
    log, _, on_state = _free_log()
    c = _cache(max_states_per_path=2, on_free_state=on_state)
    r = c.insert_prefix(
        list(range(16)), states=[(4, "a", 1), (8, "b", 1), (12, "c", 1), (16, "d", 1)]
    )
    assert r.capped == 2 and r.new == (4, 8, 12, 16)
    assert [p for p, _ in log["state"]] == ["a", "b"]
    assert set(_states(c)) == {tuple(range(12)), tuple(range(16))}
    c.check_integrity()
    # forks are skipped: a state at a fork survives even over the cap (soft cap)
    c2 = _cache(max_states_per_path=1)
    c2.insert_prefix(list(range(4)) + [100], states=[(4, "f", 1), (5, "x", 1)])  # capped: f goes
    assert set(_states(c2)) == {(0, 1, 2, 3, 100)}
    c2.insert_prefix(list(range(4)) + [100], states=[(4, "f2", 1)])  # revive f at a 1-child node
    c2.insert_prefix(list(range(4)) + [200], states=[(5, "y", 1)])  # now 4 is a fork: kept
    assert set(_states(c2)) == {(0, 1, 2, 3), (0, 1, 2, 3, 100), (0, 1, 2, 3, 200)}
    # locked states are skipped too
    c3 = _cache(max_states_per_path=1)
    c3.insert_prefix(list(range(4)), states=[(4, "L", 1)])
    n = c3.match_prefix(list(range(4))).restore
    c3.lock_handle(n)
    r = c3.insert_prefix(list(range(8)), states=[(8, "T", 1)])
    assert r.capped == 0 and c3.n_states == 2
    c3.lock_handle(n, unlock=True)
    # an insert that stores no state does not cap (SGLang's commit_insert_component_data emits
    # the cap for a new or revived state only): both states stay
    r = c3.insert_prefix(list(range(8)), states=[(8, "T2", 1)])
    assert r.capped == 0 and r.existed == (8,) and c3.n_states == 2
    r = c3.insert_prefix(list(range(12)), states=[(12, "U", 1)])
    assert r.capped == 2 and r.new == (12,) and set(_states(c3)) == {tuple(range(12))}
    assert c3.stats().capped == 2 and c3.stats().evicted_states == 0
    for cache in (c, c2, c3):
        cache.check_integrity()


# ---------------------------------------------------------------- pages and block keys


def test_page_size_truncates_and_splits_only_at_page_boundaries():
    c = RadixStateCache(page_size=2)
    assert c.grid == 64
    r = c.insert_prefix([1, 2, 3, 4, 5], states=[(4, "a", 1)])
    assert r.inserted_len == 4
    m = c.match_prefix([1, 2, 3, 9])
    assert (m.token_match, m.restore_at) == (2, 0)
    m = c.match_prefix([1, 2, 3, 4, 5])
    assert (m.token_match, m.restore_at) == (4, 4)
    c.insert_prefix([1, 2, 3, 9], states=[(4, "b", 1)])
    spans = sorted((v.start, v.end) for v in c.export() if v.parent != -1)
    assert spans == [(0, 2), (2, 4), (2, 4)]
    with pytest.raises(ValueError, match="multiple of page_size"):
        c.insert_prefix([1, 2, 3, 4], states=[(3, "x", 1)])
    c.check_integrity()


def test_block_keys_report_lengths_in_tokens():
    c = RadixStateCache(page_size=512, block_keys=True)
    assert c.grid == 512
    c.insert_prefix([10, 11, 12], states=[(1024, "a", 7), (1536, "b", 7)])
    m = c.match_prefix([10, 11, 13])
    assert (m.token_match, m.restore_at, m.branch) == (1024, 1024, None)
    m = c.match_prefix([10, 11, 12, 14])
    assert (m.token_match, m.restore_at) == (1536, 1536)
    c.insert_prefix([10, 99], states=[(1024, "c", 7)])
    m = c.match_prefix([10, 11])
    assert (m.token_match, m.restore_at, m.branch) == (1024, 1024, None)
    m = c.match_prefix([10])
    assert (m.token_match, m.restore_at, m.branch) == (512, 0, 512)
    assert c.kv_tokens == 4 * 512
    assert c.stats().kv_evictable == 2048
    with pytest.raises(ValueError, match="multiple of page_size"):
        c.insert_prefix([1, 2], states=[(600, "x", 1)])
    c.check_integrity()


# ---------------------------------------------------------------- export, integrity, input


def test_export_describes_nodes_for_drawing():
    c = _cache()
    c.insert_prefix([1, 2, 3, 4], states=[(4, "a", 9)])
    c.insert_prefix([1, 2, 7], states=[(3, "b", 9)])
    n = c.match_prefix([1, 2, 3, 4]).restore
    c.lock_handle(n)
    views = c.export()
    assert views[0].parent == -1 and views[0].depth == 0 and views[0].id == 0
    rows = sorted((v.depth, v.start, v.end, v.key, v.has_state, v.is_leaf) for v in views[1:])
    assert rows == [
        (1, 0, 2, (1, 2), False, False),
        (2, 2, 3, (7,), True, True),
        (2, 2, 4, (3, 4), True, True),
    ]
    leaf = next(v for v in views if v.key == (3, 4))
    assert (leaf.kv_lock, leaf.state_lock, leaf.state_bytes) == (1, 1, 9)
    # match([1, 2, 3, 4]) ticks the clock once per touch: KV of [1, 2], KV of [3, 4], then the
    # restore node's state ("node" mode); export reads ages against the clock after that. So
    # the leaf's KV is 1 tick old, its parent's 2, and the leaf's state 0.
    assert leaf.kv_age == 1 and leaf.state_age == 0
    assert next(v for v in views if v.key == (1, 2)).kv_age == 2
    other = next(v for v in views if v.key == (7,))
    assert other.state_age > leaf.state_age  # touched longer ago
    assert next(v for v in views if v.key == (1, 2)).state_age == -1


def test_check_integrity_detects_corruption():
    c = _cache()
    c.insert_prefix(list(range(6)), states=[(3, "a", 1), (6, "b", 1)])
    c.check_integrity()
    tree = c._tree  # corrupt the record behind the cache, as a bug would
    n = tree.live[view_at(c, range(6)).id]
    n.kv_lock = 5
    with pytest.raises(IntegrityError, match="kv"):
        c.check_integrity()
    n.kv_lock = 0
    tree.kv_tokens += 1
    with pytest.raises(IntegrityError, match="kv sizes"):
        c.check_integrity()
    tree.kv_tokens -= 1
    tree.slru.move_to_end(n.parent.id)
    with pytest.raises(IntegrityError, match="ordered"):
        c.check_integrity()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 1.5}, "page_size"),
        ({"page_size": 4, "grid": 6}, "grid"),
        ({"max_states_per_path": 0}, "max_states_per_path"),
        ({"state_touch": "all"}, "state_touch"),
        ({"on_free_kv": 3}, "on_free_kv"),
        ({"block_keys": 1}, "block_keys"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RadixStateCache(**kwargs)


def test_bad_call_arguments():
    c = _cache()
    c.insert_prefix([1, 2, 3], states=[(3, "a", 1)])
    bad = [
        (lambda: c.match_prefix("abc"), "key"),
        (lambda: c.match_prefix([1.0, 2.0]), "key"),
        (lambda: c.match_prefix(np.zeros((2, 2), dtype=int)), "key"),
        (lambda: c.match_prefix(np.zeros(3)), "key"),
        (lambda: c.insert_prefix([1, 2], states=[(3, "a")]), "position"),
        (lambda: c.insert_prefix([1, 2], states=[(0, "a")]), "position"),
        (lambda: c.insert_prefix([1, 2], states=[(1, "a"), (1, "b")]), "unique"),
        (lambda: c.insert_prefix([1, 2], states=[(1, "a", -1)]), "nbytes"),
        (lambda: c.insert_prefix([1, 2], states=[1]), "states"),
        (lambda: c.insert_prefix([1, 2], states=5), "states"),
        (lambda: c.insert_prefix([1, 2], states=[(1, "a")], state_bytes=-2), "state_bytes"),
        (lambda: c.evict(states=-1), "states"),
        (lambda: c.evict(state_bytes=1.5), "state_bytes"),
        (lambda: c.evict(-3), "kv_tokens"),
        (lambda: c.match_prefix([1] * (2**22 + 1)), "key"),  # over the 2**22-element cap
    ]
    for fn, name in bad:
        with pytest.raises(ValueError, match=name):
            fn()
    c.check_integrity()


def test_numpy_integer_keys_are_accepted():
    c = _cache()
    c.insert_prefix(np.array([5, 6, 7], dtype=np.int32), states=[(np.int64(3), "a", np.int64(4))])
    assert c.match_prefix([np.int64(5), np.int64(6), np.int64(7)]).restore_at == 3
    assert c.match_prefix((5, 6)).token_match == 2


def test_state_table_mirrors_nodes():
    seen: list = []
    pick = Pick()

    def victim(rows):  # the table as the hook sees it
        seen.append(rows)
        return pick(rows)

    c = _cache(victim=victim)
    c.insert_prefix(list(range(8)), states=[(2, "a", 3), (8, "b", 5)])
    c.insert_prefix([0, 1, 2, 3, 9], states=[(5, "c", 7)])
    c.evict(states=1)  # pick.id is None: the hook declines, nothing goes
    t = seen[-1]
    rows = np.flatnonzero(t.live)
    got = sorted(
        (int(t.length[r]), int(t.anc_length[r]), int(t.nbytes[r]), int(t.nchild[r])) for r in rows
    )
    assert got == [(2, 0, 3, 1), (5, 2, 7, 0), (8, 2, 5, 0)]
    # reviving the tombstone at 4 re-parents the checkpoints below it
    c.insert_prefix([0, 1, 2, 3], states=[(4, "d", 1)])
    c.evict(states=1)
    t = seen[-1]
    got = sorted((int(t.length[r]), int(t.anc_length[r])) for r in np.flatnonzero(t.live))
    assert got == [(2, 0), (4, 2), (5, 4), (8, 4)]
    pick.id = view_at(c, [0, 1]).id
    assert c.evict(states=1).tombstoned == 1
    pick.id = None
    c.evict(states=1)
    t = seen[-1]
    with pytest.raises(ValueError, match="read-only"):
        t.length[0] = 1
    got = sorted((int(t.length[r]), int(t.anc_length[r])) for r in np.flatnonzero(t.live))
    assert got == [(4, 0), (5, 4), (8, 4)]
    c.check_integrity()


def test_state_table_grows_past_initial_capacity():
    c = _cache(victim=lambda rows: int(np.flatnonzero(rows.live & rows.evictable)[0]))
    for i in range(200):
        c.insert_prefix([i, i + 1000], states=[(1, None, 1), (2, None, 2)])
    assert c.n_states == 400
    c.check_integrity()
    c.evict(states=400)
    # each path [i] -> [i + 1000]: the leaf goes with its KV, [i] stays a tombstone leaf
    assert c.n_states == 0 and c.n_nodes == 200 and c.kv_tokens == 200
    c.check_integrity()


# ---------------------------------------------------------------- fast-path twins


def _naive_common_prefix(e, k, i, limit):
    j = 0
    while j < limit and e[j] == k[i + j]:
        j += 1
    return j


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 3000),
    st.integers(0, 3000),
    st.integers(0, 50),
    st.integers(0, 2**31),
)
def test_common_prefix_agrees_with_naive(n, cut, off, seed):
    rng = random.Random(seed)
    e = [rng.randrange(3) for _ in range(n)]
    k = [rng.randrange(3) for _ in range(off)] + e[: min(cut, n)] + [7] * 5
    limit = min(n, len(k) - off)
    assert common_prefix(e, k, off, limit) == _naive_common_prefix(e, k, off, limit)


def test_long_keys_match_exactly():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 50000, 70000).tolist()
    c = _cache(grid=64)
    c.insert_prefix(base, states=[(64 * i, None, 1) for i in range(1, 1094)] + [(70000, None, 1)])
    q = base[:65432] + [-1] + base[65433:]
    m = c.match_prefix(q)
    assert (m.token_match, m.restore_at) == (65432, 65408)
    r = c.insert_prefix(q, states=[(70000, None, 1)])
    assert r.cached_len == 65432
    c.check_integrity()


def test_docs_usage_example_runs():
    """docs/radix.md, "Usage"."""
    freed = []
    pool = type("Pool", (), {"free": staticmethod(freed.append)})()
    tokens = list(range(120))
    kv_array = np.zeros((120, 4))
    slot_a, slot_b = "slot-a", "slot-b"
    prompt = list(range(90)) + [7, 7]

    cache = RadixStateCache(
        page_size=1, max_states_per_path=None, on_free_state=lambda slot, nbytes: pool.free(slot)
    )
    r = cache.insert_prefix(tokens, kv=kv_array, states=[(64, slot_a, 1024), (100, slot_b, 1024)])
    assert r.existed == () and r.inserted_len == 100
    m = cache.match_prefix(prompt[:-1])
    assert (m.token_match, m.restore_at, m.state) == (90, 64, slot_a)
    cache.lock_handle(m.restore)
    assert np.concatenate(m.kv).shape == (64, 4)
    cache.lock_handle(m.restore, unlock=True)
    # the hit refreshed slot_a: slot_b (a leaf) is the LRU state and goes with its 36 tokens
    r = cache.evict(states=1)
    assert (r.states, r.kv_tokens) == (1, 36) and freed == [slot_b]
    assert cache.evict(4096).kv_tokens == 64 and freed == [slot_b, slot_a]
    cache.check_integrity()


# ------------------------------------------------------------------------------ SGLang's rules
# Each example was run on the real SGLang 0.5.23 UnifiedRadixCache (FULL + MAMBA components,
# Python tree core) in tests/real/test_radix_vs_sglang.py; these copies need no real venv.


def test_sglang_keeps_a_childless_tombstone_as_a_kv_leaf():
    """sglang/srt/mem_cache/unified_cache/unified_tree_core.py: deleting a leaf only re-files
    its parent as an evictable leaf (``_update_evictable_leaf_sets``); nothing cascades.
    Insert [1..10] and [1..5, 99, 98], evict 2 states: SGLang frees 7 tokens (the two leaves,
    5 + 2) and still matches 5 tokens; pruning the tombstone [1..5] at once would free 12."""
    c = _cache()
    c.insert_prefix(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert_prefix([1, 2, 3, 4, 5, 99, 98], states=[(7, "b", 1)])
    r = c.evict(states=2)
    assert (r.states, r.kv_tokens) == (2, 7)
    m = c.match_prefix(list(range(1, 11)))
    assert (m.token_match, m.restore_at) == (5, 0)
    assert c.kv_tokens == 5 and c.n_states == 0
    c.check_integrity()


def test_sglang_split_stamps_the_lower_half_as_just_used_on_insert():
    """unified_tree_core.py ``_split_node``: ``child.last_access_time =
    get_and_increase_time_counter()``. Insert [1..10], [50..55], [1..5, 99], evict one KV leaf:
    the split-off tail [6..10] is newer than [50..55], so SGLang evicts [50..55] (6 tokens).
    Keeping the tail's old time would evict the tail instead (5 tokens)."""
    c = _cache()
    c.insert_prefix(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert_prefix(list(range(50, 56)), states=[(6, "b", 1)])
    c.insert_prefix([1, 2, 3, 4, 5, 99], states=[(6, "c", 1)])
    r = c.evict(1)
    assert (r.kv_tokens, r.states) == (6, 1)
    assert c.match_prefix(list(range(50, 56))).token_match == 0
    assert c.match_prefix(list(range(1, 11))).token_match == 10


def test_sglang_split_stamps_the_lower_half_as_just_used_on_a_splitting_match():
    """Same rule through ``match(split=True)`` (SGLang's match_prefix splits mid-edge)."""
    c = _cache()
    c.insert_prefix(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert_prefix(list(range(50, 56)), states=[(6, "b", 1)])
    m = c.match_prefix([1, 2, 3, 4, 5, 77], split=True)  # no state on the path: no other touch
    assert m.mid_edge and m.restore_at == 0
    r = c.evict(1)
    assert r.kv_tokens == 6 and c.match_prefix(list(range(1, 11))).token_match == 10
    c.check_integrity()


def _weak_nodes(cache: RadixStateCache) -> list:
    return [weakref.ref(nd) for nd in cache._tree.live.values()]


def test_removed_nodes_are_unreachable_at_once():
    """A node the tree removed is garbage as soon as the caller drops it: the KV heap holds no
    Node objects (or their key tuples) of leaves removed by state eviction until some rebuild
    threshold."""
    c = _cache()
    for i in range(200):
        c.insert_prefix([i, 10_000 + i], states=[(2, None, 1)])
    refs = _weak_nodes(c)
    assert len(refs) == 200
    c.evict(states=200)  # every leaf deleted with its KV (no tombstone: one node a path)
    assert c.n_nodes == 0
    for i in range(300):
        c.insert_prefix([50_000 + i], states=[(1, None, 1)])
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    # the same through KV eviction and through a split-then-evict
    refs = _weak_nodes(c)
    c.insert_prefix([50_000, 7], states=[(2, None, 1)])
    c.evict(10**6)
    gc.collect()
    assert c.n_nodes == 0 and sum(r() is not None for r in refs) == 0
