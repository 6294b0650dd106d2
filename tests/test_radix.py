"""Scenario tests for kda_core.radix written from the SGLang / Marconi semantics."""

from __future__ import annotations

import gc
import random
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kda_core.cache.radix import IntegrityError, RadixStateCache
from kda_core.cache.radix.nodes import _common_prefix


def _free_log():
    log = {"kv": [], "state": []}

    def on_kv(payload, n):
        log["kv"].append((payload, n))

    def on_state(payload, n):
        log["state"].append((payload, n))

    return log, on_kv, on_state


def _cache(**kw) -> RadixStateCache:
    kw.setdefault("grid", 4)
    return RadixStateCache(**kw)


def _states(cache: RadixStateCache) -> dict[tuple, int]:
    """{prefix: nbytes} of every checkpoint, from the drawing export."""
    out = {}
    by_id = {v.id: v for v in cache.export()}
    for v in by_id.values():
        if v.has_state:
            key, n = [], v
            while n.parent != -1:
                key = list(n.key) + key
                n = by_id[n.parent]
            out[tuple(key)] = v.state_bytes
    return out


# ---------------------------------------------------------------- basics


def test_match_reports_token_match_and_restore_point_with_kv_up_to_restore():
    c = _cache()
    kv = np.arange(10.0) * 10
    r = c.insert(list(range(10)), kv=kv, states=[(4, "s4", 100), (10, "s10", 100)])
    assert (r.prefix_len, r.inserted_len, r.new, r.existed, r.capped) == (0, 10, (4, 10), (), 0)
    m = c.match([0, 1, 2, 3, 4, 5, 6, 99])
    assert (m.token_match, m.restore_at, m.state, m.state_bytes) == (7, 4, "s4", 100)
    assert m.mid_edge
    np.testing.assert_array_equal(np.concatenate(m.kv), kv[:4])
    assert m.branch is None  # floor(7/4)*4 = 4 == restore_at
    m = c.match(list(range(12)))
    assert (m.token_match, m.restore_at, m.state) == (10, 10, "s10")
    np.testing.assert_array_equal(np.concatenate(m.kv), kv)
    m = c.match([5, 6])
    assert (m.token_match, m.restore_at, m.node, m.kv, m.state) == (0, 0, c.root, (), None)
    c.check_integrity()


def test_branch_hint_is_grid_aligned_token_match_beyond_restore():
    c = _cache(grid=4)
    c.insert(list(range(20)), states=[(20, "a", 1)])
    m = c.match(list(range(11)) + [99])
    assert (m.token_match, m.restore_at, m.branch) == (11, 0, 8)
    m = c.match([0, 1, 2])
    assert m.branch is None  # floor(3/4)*4 = 0
    c2 = _cache(grid=64)
    c2.insert(list(range(200)), states=[(64, "a", 1), (200, "b", 1)])
    m = c2.match(list(range(150)) + [-1])
    assert (m.token_match, m.restore_at, m.branch) == (150, 64, 128)


def test_insert_divergence_creates_tombstone_and_match_ending_in_it_restores_above():
    c = _cache()
    c.insert(list(range(8)), states=[(2, "s2", 1), (8, "s8", 1)])
    r = c.insert([0, 1, 2, 3, 9, 9], states=[(6, "b6", 1)])
    assert (r.prefix_len, r.inserted_len, r.new) == (4, 6, (6,))
    views = {(v.start, v.end): v for v in c.export()}
    assert not views[(2, 4)].has_state  # split node: a tombstone
    assert views[(0, 2)].has_state and views[(4, 8)].has_state and views[(4, 6)].has_state
    assert c.stats().tombstones == 1 and c.stats().splits == 1
    # a match ending exactly at the tombstone: token match 4, restore at the ancestor (2)
    m = c.match([0, 1, 2, 3])
    assert (m.token_match, m.restore_at, m.state, m.mid_edge) == (4, 2, "s2", False)
    assert not m.last_node.has_state and m.last_node.plen == 4
    c.check_integrity()


def test_match_split_true_creates_tombstone_and_default_does_not_mutate():
    c = _cache()
    c.insert(list(range(8)), states=[(8, "s8", 1)])
    before = [(v.id, v.start, v.end, v.has_state) for v in c.export()]
    m = c.match([0, 1, 2, 3, 4, 77], split=False)
    assert (m.token_match, m.restore_at, m.mid_edge) == (5, 0, True)
    assert [(v.id, v.start, v.end, v.has_state) for v in c.export()] == before
    m = c.match([0, 1, 2, 3, 4, 77], split=True)
    assert (m.token_match, m.restore_at, m.mid_edge) == (5, 0, True)
    assert m.last_node.plen == 5 and not m.last_node.has_state
    spans = sorted((v.start, v.end, v.has_state) for v in c.export() if v.parent != -1)
    assert spans == [(0, 5, False), (5, 8, True)]
    assert c.stats().splits == 1
    c.check_integrity()


def test_never_restores_past_deepest_checkpoint():
    c = _cache()
    c.insert(list(range(16)), kv=np.arange(16), states=[(4, "a", 1), (16, "b", 1)])
    c.insert(list(range(8)) + [50, 51, 52, 53], kv=np.arange(12), states=[(12, "c", 1)])
    # the node at 8 is a tombstone: a query matching 10 tokens restores at 4
    for q, exp in [
        (list(range(10)), (10, 4)),
        (list(range(8)), (8, 4)),
        (list(range(3)), (3, 0)),
        (list(range(8)) + [50, 51, 52, 53, 54], (12, 12)),
        (list(range(16)), (16, 16)),
    ]:
        m = c.match(q)
        assert (m.token_match, m.restore_at) == exp, q
        assert m.restore_at <= m.token_match
        kv = np.concatenate(m.kv) if m.kv else np.zeros(0)
        np.testing.assert_array_equal(kv, np.arange(m.restore_at))


def test_insert_cuts_key_at_deepest_checkpoint_and_revives_tombstones():
    log, on_kv, on_state = _free_log()
    c = _cache(on_free_kv=on_kv, on_free_state=on_state)
    r = c.insert(list(range(12)), states=[(4, "a", 1), (8, "b", 1)])
    assert r.inserted_len == 8 and c.kv_tokens == 8
    # a checkpoint inside an existing edge splits it and stores the state there
    c.insert(list(range(20)), states=[(20, "t", 1)])
    r = c.insert(list(range(20)), states=[(14, "x", 1)])
    assert (r.new, r.existed, r.prefix_len) == ((14,), (), 14)
    assert set(_states(c)) == {tuple(range(p)) for p in (4, 8, 14, 20)}
    # tombstone revival: make 14 a tombstone via state eviction, then re-insert
    node14 = c.match(list(range(14))).node
    assert c.evict_state_node(node14).tombstoned == 1
    assert log["state"] == [("x", 1)]
    r = c.insert(list(range(14)), states=[(14, "y", 2)])
    assert (r.new, r.existed) == ((14,), ())
    assert c.match(list(range(15))).state == "y"
    # already present: reported, payload not taken, not freed by the tree
    r = c.insert(list(range(14)), states=[(8, "dup", 1), (14, "dup2", 2)])
    assert (r.new, r.existed) == ((), (8, 14))
    assert c.match(list(range(14))).state == "y"
    assert log["state"] == [("x", 1)] and log["kv"] == []
    st = c.stats()
    assert (st.states_inserted, st.states_existed) == (5, 2)
    c.check_integrity()


def test_insert_without_states_is_a_noop_reporting_prefix():
    c = _cache()
    c.insert(list(range(6)), states=[(6, "a", 1)])
    r = c.insert([0, 1, 2, 9], states=())
    assert (r.prefix_len, r.inserted_len, r.node, r.new) == (3, 0, None, ())
    assert c.n_nodes == 1
    c.check_integrity()


# ---------------------------------------------------------------- payloads


def test_array_kv_payloads_are_split_consistently():
    c = _cache()
    kv = np.arange(30).reshape(10, 3)
    c.insert(list(range(10)), kv=kv, states=[(10, "a", 1)])
    kv2 = -np.arange(24).reshape(8, 3)
    c.insert([0, 1, 2, 3, 4, 5, 40, 41], kv=kv2, states=[(3, "m", 1), (8, "b", 1)])
    m = c.match(list(range(10)))
    np.testing.assert_array_equal(np.concatenate(m.kv), kv)
    m = c.match([0, 1, 2, 3, 4, 5, 40, 41])
    assert m.restore_at == 8
    got = np.concatenate(m.kv)
    np.testing.assert_array_equal(got[:6], kv[:6])  # shared part keeps the first owner's KV
    np.testing.assert_array_equal(got[6:], kv2[6:])


def test_byte_count_kv_payloads_split_proportionally_and_conserve_total():
    log, on_kv, _ = _free_log()
    c = _cache(on_free_kv=on_kv)
    c.insert(list(range(7)), kv=7001, states=[(7, "a", 1)])
    c.insert([0, 1, 2, 9], kv=4000, states=[(4, "b", 1)])
    c.insert([0, 9], kv=2000, states=[(2, "c", 1)])
    freed = c.evict_kv(10**9)
    assert freed.kv_tokens == 7 + 1 + 1 and c.n_nodes == 0
    tot = sum(p for p, _ in log["kv"])
    # 7001 fully kept (split 1/2/4 tokens); 4000 * 1/4 and 2000 * 1/2 for the new tokens
    assert tot == 7001 + 1000 + 1000
    assert sorted(n for _, n in log["kv"]) == [1, 1, 1, 2, 4]


def test_kv_too_short_is_rejected():
    c = _cache()
    with pytest.raises(ValueError, match="kv"):
        c.insert(list(range(10)), kv=np.zeros(5), states=[(8, "a", 1)])


# ---------------------------------------------------------------- LRU orders


def test_kv_lru_evicts_least_recent_leaf_first_and_keeps_tombstone_parents_as_leaves():
    log, on_kv, on_state = _free_log()
    c = _cache(on_free_kv=on_kv, on_free_state=on_state)
    c.insert([1, 1, 1], states=[(3, "A", 10)])
    c.insert([2, 2, 2], states=[(3, "B", 10)])
    c.insert([3, 3, 3], states=[(3, "C", 10)])
    c.match([1, 1, 1])  # A becomes most recent
    r = c.evict_kv(1)
    assert (r.kv_tokens, r.states, r.state_bytes, r.nodes) == (3, 1, 10, 1)
    assert log["state"] == [("B", 10)]
    c.evict_kv(1)
    assert log["state"][-1] == ("C", 10)
    # two leaves under a split tombstone. Before issue #12 evicting both pruned the tombstone
    # in the same call (4 tokens freed); SGLang keeps it as a KV leaf (unified_tree_core.py,
    # ``_delete_leaf`` + ``_update_evictable_leaf_sets(parent)``): it goes by a later eviction.
    c.insert([5, 5, 5, 5], states=[(4, "D", 1)])
    c.insert([5, 5, 6, 6], states=[(4, "E", 1)])
    assert c.stats().tombstones == 1
    r = c.evict_kv(5)  # stops once 5 tokens are freed: A (3 tokens) then D (2)
    assert (r.kv_tokens, r.nodes, r.states) == (5, 2, 2)
    r = c.evict_kv(1)  # E goes; the tombstone [5, 5] stays, now a leaf
    assert (r.kv_tokens, r.nodes, r.states) == (2, 1, 1) and c.stats().pruned == 0
    assert c.n_nodes == 1 and c.match([5, 5, 6]).token_match == 2
    r = c.evict_kv(1)  # the tombstone leaf: KV only
    assert (r.kv_tokens, r.nodes, r.states) == (2, 1, 0)
    assert c.n_nodes == 0 and c.kv_tokens == 0 and c.n_states == 0
    c.check_integrity()


def test_kv_eviction_of_a_leaf_keeps_a_stateful_parent_as_new_leaf():
    c = _cache()
    c.insert(list(range(8)), states=[(4, "a", 1), (8, "b", 1)])
    r = c.evict_kv(1)
    assert (r.kv_tokens, r.states) == (4, 1)
    assert _states(c) == {(0, 1, 2, 3): 1}
    assert c.match(list(range(8))).restore_at == 4
    c.check_integrity()


@pytest.mark.parametrize(
    "touch, order",
    [
        ("node", ["s4", "other", "s8"]),  # only the restore node is refreshed
        ("path", ["other", "s4", "s8"]),  # path refreshed, ancestors older
        ("path_tail_first", ["other", "s8", "s4"]),  # path refreshed, deepest older
    ],
)
def test_state_lru_order_by_touch_mode(touch, order):
    log, _, on_state = _free_log()
    c = _cache(state_touch=touch, on_free_state=on_state)
    c.insert(list(range(8)), states=[(4, "s4", 1), (8, "s8", 1)])
    c.insert([9, 9, 9, 9, 9, 9, 9, 9], states=[(8, "other", 1)])
    c.match(list(range(8)))
    for _ in range(3):
        c.evict_states(num=1)
        c.check_integrity()
    assert [p for p, _ in log["state"]] == order
    # s4 evicted while it still had a child leaves [0..3] a tombstone; once s8 goes too it is
    # a childless tombstone, which SGLang keeps as a KV leaf (issue #12). s8 first: s4's node
    # is a leaf when its state goes, so it is deleted with its KV.
    tombstone_left = order.index("s4") < order.index("s8")
    assert (c.n_nodes, c.kv_tokens) == ((1, 4) if tombstone_left else (0, 0))


def test_state_eviction_tombstones_internal_and_deletes_leaves():
    c = _cache(state_touch="path")
    c.insert(list(range(8)), states=[(4, "a", 5), (8, "b", 7)])
    r = c.evict_states(num=1)  # ancestor is least recent under "path"
    assert (r.states, r.state_bytes, r.kv_tokens, r.tombstoned) == (1, 5, 0, 1)
    assert c.kv_tokens == 8 and c.n_states == 1
    assert c.match(list(range(6))).restore_at == 0  # KV still matches, no state
    assert c.match(list(range(6))).token_match == 6
    r = c.evict_states(nbytes=1)  # the leaf: deleted with its KV; the tombstone stays (#12)
    assert (r.states, r.state_bytes, r.kv_tokens, r.nodes) == (1, 7, 4, 1)
    assert c.n_nodes == 1 and c.match(list(range(8))).token_match == 4
    c.check_integrity()


def test_evict_states_by_bytes_and_stops_when_nothing_evictable():
    c = _cache()
    for i in range(5):
        c.insert([i, i], states=[(2, i, 100 * (i + 1))])
    r = c.evict_states(nbytes=250)
    assert (r.states, r.state_bytes) == (2, 300)
    r = c.evict_states(num=99)
    assert r.states == 3 and c.n_states == 0 and c.n_nodes == 0


# ---------------------------------------------------------------- locks and sizes


def test_locks_protect_and_evictable_sizes_add_up():
    c = _cache()
    c.insert(list(range(8)), states=[(4, "a", 10), (8, "b", 20)])
    c.insert([0, 1, 2, 3, 7, 7], states=[(6, "c", 30)])
    st = c.stats()
    assert (st.kv_tokens, st.kv_evictable, st.kv_protected) == (10, 10, 0)
    assert (st.states, st.state_bytes, st.state_bytes_evictable) == (3, 60, 60)
    m = c.match(list(range(8)))
    c.lock_state(m.node)  # locks state b and KV of [0, 8)
    st = c.stats()
    assert (st.kv_protected, st.kv_evictable) == (8, 2)
    assert (st.states_protected, st.state_bytes_protected, st.state_bytes_evictable) == (1, 20, 40)
    r = c.evict_kv(10**6)  # only the unlocked leaf c goes
    assert (r.kv_tokens, r.states) == (2, 1)
    r = c.evict_states(num=10)  # a is internal and unlocked: tombstoned; b is locked
    assert (r.states, r.tombstoned) == (1, 1)
    assert _states(c) == {tuple(range(8)): 20}
    with pytest.raises(ValueError, match="protected"):
        c.evict_state_node(m.node)
    c.check_integrity()
    c.unlock_state(m.node)
    st = c.stats()
    assert (st.kv_protected, st.state_bytes_protected, st.state_bytes_evictable) == (0, 0, 20)
    c.evict_kv(10**6)
    assert c.n_nodes == 0
    c.check_integrity()


def test_kv_lock_on_leaf_protects_its_state_but_not_internal_states():
    c = _cache()
    c.insert(list(range(8)), states=[(4, "a", 1), (8, "b", 1)])
    leaf = c.match(list(range(8)), touch=False).node
    c.lock_kv(leaf)
    assert c.stats().states_protected == 1  # a KV-locked leaf's state cannot go alone
    r = c.evict_states(num=5)
    assert (r.states, r.tombstoned) == (1, 1)  # only the internal state
    assert c.n_states == 1 and c.kv_tokens == 8
    # extending the leaf makes it internal: its state becomes evictable
    c.insert(list(range(10)), states=[(10, "c", 1)])
    assert c.stats().states_protected == 0
    c.unlock_kv(leaf)
    c.check_integrity()


def test_kv_locked_tombstone_leaf_is_kept_and_stays_after_unlock():
    c = _cache()
    c.insert(list(range(8)), states=[(8, "a", 1)])
    c.insert([0, 1, 2, 3, 5], states=[(5, "b", 1)])
    tomb = c.match([0, 1, 2, 3], touch=False).last_node
    assert not tomb.has_state and tomb.plen == 4
    c.lock_kv(tomb)
    c.evict_kv(10**6)
    assert c.n_nodes == 1 and c.kv_tokens == 4  # locked tombstone leaf survives
    c.check_integrity()
    c.unlock_kv(tomb)
    # SGLang's dec_lock_ref only moves the sizes to evictable (before #12 the lab pruned here)
    assert c.n_nodes == 1 and tomb.alive and c.stats().kv_evictable == 4
    c.check_integrity()
    r = c.evict_kv(1)
    assert (r.kv_tokens, r.nodes, r.states) == (4, 1, 0) and not tomb.alive
    c.check_integrity()
    with pytest.raises(ValueError, match="not alive"):
        c.lock_kv(tomb)


def test_lock_counts_and_errors():
    c = _cache()
    c.insert(list(range(4)), states=[(2, "a", 1), (4, "b", 1)])
    m = c.match([0, 1, 2])
    c.lock_state(m.node)
    c.lock_state(m.node)
    c.unlock_state(m.node)
    assert c.stats().states_protected == 1
    c.unlock_state(m.node)
    with pytest.raises(ValueError, match="unlock_state"):
        c.unlock_state(m.node)
    with pytest.raises(ValueError, match="unlock_kv"):
        c.unlock_kv(m.node)
    c.lock_state(c.root)  # no-op on the root
    c.unlock_state(c.root)
    c.insert([0, 1, 9, 9], states=[(4, "x", 1)])  # tombstone? no: node at 2 holds a
    c.insert([7, 7, 7, 7], states=[(4, "y", 1)])
    c.insert([7, 7, 8, 8], states=[(4, "z", 1)])
    tomb = c.match([7, 7]).last_node
    with pytest.raises(ValueError, match="no state"):
        c.lock_state(tomb)
    other = _cache()
    other.insert([1], states=[(1, "q", 1)])
    with pytest.raises(ValueError, match="node"):
        c.lock_kv(other.match([1]).node)
    with pytest.raises(ValueError, match="node"):
        c.lock_kv("not a node")
    c.check_integrity()


# ---------------------------------------------------------------- per-path budget


def test_per_path_cap_tombstones_root_first_skipping_forks_locked_and_tail():
    log, _, on_state = _free_log()
    c = _cache(max_states_per_path=2, on_free_state=on_state)
    r = c.insert(list(range(16)), states=[(4, "a", 1), (8, "b", 1), (12, "c", 1), (16, "d", 1)])
    assert r.capped == 2 and r.new == (4, 8, 12, 16)
    assert [p for p, _ in log["state"]] == ["a", "b"]
    assert set(_states(c)) == {tuple(range(12)), tuple(range(16))}
    c.check_integrity()
    # forks are skipped: a state at a fork survives even over the cap (soft cap)
    c2 = _cache(max_states_per_path=1)
    c2.insert(list(range(4)) + [100], states=[(4, "f", 1), (5, "x", 1)])  # capped: f goes
    assert set(_states(c2)) == {(0, 1, 2, 3, 100)}
    c2.insert(list(range(4)) + [100], states=[(4, "f2", 1)])  # revive f at a 1-child node
    c2.insert(list(range(4)) + [200], states=[(5, "y", 1)])  # now 4 is a fork: kept
    assert set(_states(c2)) == {(0, 1, 2, 3), (0, 1, 2, 3, 100), (0, 1, 2, 3, 200)}
    # locked states are skipped too
    c3 = _cache(max_states_per_path=1)
    c3.insert(list(range(4)), states=[(4, "L", 1)])
    n = c3.match(list(range(4))).node
    c3.lock_state(n)
    r = c3.insert(list(range(8)), states=[(8, "T", 1)])
    assert r.capped == 0 and c3.n_states == 2
    c3.unlock_state(n)
    r = c3.insert(list(range(8)), states=[(8, "T2", 1)])
    assert r.capped == 1 and r.existed == (8,) and set(_states(c3)) == {tuple(range(8))}
    assert c3.stats().capped == 1 and c3.stats().evicted_states == 0
    for cache in (c, c2, c3):
        cache.check_integrity()


# ---------------------------------------------------------------- pages and block keys


def test_page_size_truncates_and_splits_only_at_page_boundaries():
    c = RadixStateCache(page_size=2)
    assert c.grid == 64
    r = c.insert([1, 2, 3, 4, 5], states=[(4, "a", 1)])
    assert r.inserted_len == 4
    m = c.match([1, 2, 3, 9])
    assert (m.token_match, m.restore_at) == (2, 0)
    m = c.match([1, 2, 3, 4, 5])
    assert (m.token_match, m.restore_at) == (4, 4)
    c.insert([1, 2, 3, 9], states=[(4, "b", 1)])
    spans = sorted((v.start, v.end) for v in c.export() if v.parent != -1)
    assert spans == [(0, 2), (2, 4), (2, 4)]
    with pytest.raises(ValueError, match="multiple of page_size"):
        c.insert([1, 2, 3, 4], states=[(3, "x", 1)])
    c.check_integrity()


def test_block_keys_report_lengths_in_tokens():
    c = RadixStateCache(page_size=512, block_keys=True)
    assert c.grid == 512
    c.insert([10, 11, 12], states=[(1024, "a", 7), (1536, "b", 7)])
    m = c.match([10, 11, 13])
    assert (m.token_match, m.restore_at, m.branch) == (1024, 1024, None)
    m = c.match([10, 11, 12, 14])
    assert (m.token_match, m.restore_at) == (1536, 1536)
    c.insert([10, 99], states=[(1024, "c", 7)])
    m = c.match([10, 11])
    assert (m.token_match, m.restore_at, m.branch) == (1024, 1024, None)
    m = c.match([10])
    assert (m.token_match, m.restore_at, m.branch) == (512, 0, 512)
    assert c.kv_tokens == 4 * 512
    assert c.stats().kv_evictable == 2048
    with pytest.raises(ValueError, match="multiple of page_size"):
        c.insert([1, 2], states=[(600, "x", 1)])
    c.check_integrity()


# ---------------------------------------------------------------- export, integrity, input


def test_export_describes_nodes_for_drawing():
    c = _cache()
    c.insert([1, 2, 3, 4], states=[(4, "a", 9)])
    c.insert([1, 2, 7], states=[(3, "b", 9)])
    n = c.match([1, 2, 3, 4]).node
    c.lock_state(n)
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
    c.insert(list(range(6)), states=[(3, "a", 1), (6, "b", 1)])
    c.check_integrity()
    n = c.match(list(range(6))).node
    n.kv_lock = 5
    with pytest.raises(IntegrityError, match="kv"):
        c.check_integrity()
    n.kv_lock = 0
    c._kv_tokens += 1
    with pytest.raises(IntegrityError, match="kv sizes"):
        c.check_integrity()
    c._kv_tokens -= 1
    c._slru.move_to_end(n.parent.id)
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
    c.insert([1, 2, 3], states=[(3, "a", 1)])
    bad = [
        (lambda: c.match("abc"), "key"),
        (lambda: c.match([1.0, 2.0]), "key"),
        (lambda: c.match(np.zeros((2, 2), dtype=int)), "key"),
        (lambda: c.match(np.zeros(3)), "key"),
        (lambda: c.insert([1, 2], states=[(3, "a")]), "position"),
        (lambda: c.insert([1, 2], states=[(0, "a")]), "position"),
        (lambda: c.insert([1, 2], states=[(1, "a"), (1, "b")]), "unique"),
        (lambda: c.insert([1, 2], states=[(1, "a", -1)]), "nbytes"),
        (lambda: c.insert([1, 2], states=[1]), "states"),
        (lambda: c.insert([1, 2], states=5), "states"),
        (lambda: c.insert([1, 2], states=[(1, "a")], state_bytes=-2), "state_bytes"),
        (lambda: c.evict_states(num=-1), "num"),
        (lambda: c.evict_states(nbytes=1.5), "nbytes"),
        (lambda: c.evict_kv(-3), "num_tokens"),
        (lambda: c.node_at_row(63), "row"),
        (lambda: RadixStateCache(max_key_len=4).match([1] * 5), "key"),
    ]
    for fn, name in bad:
        with pytest.raises(ValueError, match=name):
            fn()
    c.check_integrity()


def test_numpy_integer_keys_are_accepted():
    c = _cache()
    c.insert(np.array([5, 6, 7], dtype=np.int32), states=[(np.int64(3), "a", np.int64(4))])
    assert c.match([np.int64(5), np.int64(6), np.int64(7)]).restore_at == 3
    assert c.match((5, 6)).token_match == 2


def test_state_table_mirrors_nodes():
    c = _cache()
    c.insert(list(range(8)), states=[(2, "a", 3), (8, "b", 5)])
    c.insert([0, 1, 2, 3, 9], states=[(5, "c", 7)])
    t = c.state_table()
    rows = np.flatnonzero(t.live)
    got = sorted(
        (int(t.length[r]), int(t.anc_length[r]), int(t.nbytes[r]), int(t.nchild[r])) for r in rows
    )
    assert got == [(2, 0, 3, 1), (5, 2, 7, 0), (8, 2, 5, 0)]
    # reviving the tombstone at 4 re-parents the checkpoints below it
    c.insert([0, 1, 2, 3], states=[(4, "d", 1)])
    t = c.state_table()
    got = sorted((int(t.length[r]), int(t.anc_length[r])) for r in np.flatnonzero(t.live))
    assert got == [(2, 0), (4, 2), (5, 4), (8, 4)]
    c.evict_state_node(c.match([0, 1]).node)
    t = c.state_table()
    got = sorted((int(t.length[r]), int(t.anc_length[r])) for r in np.flatnonzero(t.live))
    assert got == [(4, 0), (5, 4), (8, 4)]
    c.check_integrity()


def test_state_table_grows_past_initial_capacity():
    c = _cache()
    for i in range(200):
        c.insert([i, i + 1000], states=[(1, None, 1), (2, None, 2)])
    assert c.n_states == 400
    c.check_integrity()
    c.evict_states(num=400)
    # each path [i] -> [i + 1000]: the leaf goes with its KV, [i] stays a tombstone leaf (#12)
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
    assert _common_prefix(e, k, off, limit) == _naive_common_prefix(e, k, off, limit)


def test_long_keys_match_exactly():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 50000, 70000).tolist()
    c = _cache(grid=64)
    c.insert(base, states=[(64 * i, None, 1) for i in range(1, 1094)] + [(70000, None, 1)])
    q = base[:65432] + [-1] + base[65433:]
    m = c.match(q)
    assert (m.token_match, m.restore_at) == (65432, 65408)
    r = c.insert(q, states=[(70000, None, 1)])
    assert r.prefix_len == 65432
    c.check_integrity()


def test_module_docstring_usage_example_runs():
    freed = []
    pool = type("Pool", (), {"free": staticmethod(freed.append)})()
    tokens = list(range(120))
    kv_array = np.zeros((120, 4))
    slot_a, slot_b = "slot-a", "slot-b"
    prompt = list(range(90)) + [7, 7]

    cache = RadixStateCache(
        page_size=1, max_states_per_path=None, on_free_state=lambda slot, nbytes: pool.free(slot)
    )
    r = cache.insert(tokens, kv=kv_array, states=[(64, slot_a, 1024), (100, slot_b, 1024)])
    assert r.existed == () and r.inserted_len == 100
    m = cache.match(prompt[:-1])
    assert (m.token_match, m.restore_at, m.state) == (90, 64, slot_a)
    cache.lock_state(m.node)
    assert np.concatenate(m.kv).shape == (64, 4)
    cache.unlock_state(m.node)
    # the hit refreshed slot_a: slot_b (a leaf) is the LRU state and goes with its 36 tokens
    r = cache.evict_states(num=1)
    assert (r.states, r.kv_tokens) == (1, 36) and freed == [slot_b]
    assert cache.evict_kv(4096).kv_tokens == 64 and freed == [slot_b, slot_a]
    cache.check_integrity()


# ---------------------------------------------------------------- SGLang's rules (issue #12)
# Each example was run on the real SGLang 0.5.23 UnifiedRadixCache (FULL + MAMBA components,
# Python tree core) in tests/real/test_radix_vs_sglang.py; these copies need no real venv.


def test_sglang_keeps_a_childless_tombstone_as_a_kv_leaf():
    """sglang/srt/mem_cache/unified_cache/unified_tree_core.py: deleting a leaf only re-files
    its parent as an evictable leaf (``_update_evictable_leaf_sets``); nothing cascades.
    Insert [1..10] and [1..5, 99, 98], evict 2 states: SGLang frees 7 tokens (the two leaves,
    5 + 2) and still matches 5 tokens. The lab used to prune the tombstone [1..5] too (12)."""
    c = _cache()
    c.insert(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert([1, 2, 3, 4, 5, 99, 98], states=[(7, "b", 1)])
    r = c.evict_states(num=2)
    assert (r.states, r.kv_tokens) == (2, 7)
    m = c.match(list(range(1, 11)))
    assert (m.token_match, m.restore_at) == (5, 0)
    assert c.kv_tokens == 5 and c.n_states == 0
    c.check_integrity()


def test_sglang_split_stamps_the_lower_half_as_just_used_on_insert():
    """unified_tree_core.py ``_split_node``: ``child.last_access_time =
    get_and_increase_time_counter()``. Insert [1..10], [50..55], [1..5, 99], evict one KV leaf:
    the split-off tail [6..10] is newer than [50..55], so SGLang evicts [50..55] (6 tokens).
    The lab used to keep the tail's old time and evict it (5 tokens)."""
    c = _cache()
    c.insert(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert(list(range(50, 56)), states=[(6, "b", 1)])
    c.insert([1, 2, 3, 4, 5, 99], states=[(6, "c", 1)])
    r = c.evict_kv(1)
    assert (r.kv_tokens, r.states) == (6, 1)
    assert c.match(list(range(50, 56))).token_match == 0
    assert c.match(list(range(1, 11))).token_match == 10


def test_sglang_split_stamps_the_lower_half_as_just_used_on_a_splitting_match():
    """Same rule through ``match(split=True)`` (SGLang's match_prefix splits mid-edge)."""
    c = _cache()
    c.insert(list(range(1, 11)), states=[(10, "a", 1)])
    c.insert(list(range(50, 56)), states=[(6, "b", 1)])
    m = c.match([1, 2, 3, 4, 5, 77], split=True)  # no state on the path: nothing else touched
    assert m.mid_edge and m.restore_at == 0
    r = c.evict_kv(1)
    assert r.kv_tokens == 6 and c.match(list(range(1, 11))).token_match == 10
    c.check_integrity()


def _weak_nodes(cache: RadixStateCache) -> list:
    return [weakref.ref(nd) for nd, _ in cache._walk() if nd is not cache.root]


def test_removed_nodes_are_unreachable_at_once():
    """Issue #11, bug 5: the KV heap kept Node objects (and their key tuples) of leaves removed
    by evict_states until a rebuild threshold (4 x nodes + 1024). A node the tree removed must
    be garbage as soon as the caller drops it."""
    c = _cache()
    for i in range(200):
        c.insert([i, 10_000 + i], states=[(2, None, 1)])
    refs = _weak_nodes(c)
    assert len(refs) == 200
    c.evict_states(num=200)  # every leaf deleted with its KV (no tombstone: one node a path)
    assert c.n_nodes == 0
    for i in range(300):
        c.insert([50_000 + i], states=[(1, None, 1)])
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    # the same through KV eviction and through a split-then-evict
    refs = _weak_nodes(c)
    c.insert([50_000, 7], states=[(2, None, 1)])
    c.evict_kv(10**6)
    gc.collect()
    assert c.n_nodes == 0 and sum(r() is not None for r in refs) == 0
