"""Scenario tests for kda_core.radix written from the SGLang / Marconi semantics."""

from __future__ import annotations

import numpy as np
import pytest

from tests.radix_helpers import Pick, _cache, _free_log, _states, view_at

# ---------------------------------------------------------------- basics


def test_match_reports_token_match_and_restore_point_with_kv_up_to_restore():
    c = _cache()
    kv = np.arange(10.0) * 10
    r = c.insert_prefix(list(range(10)), kv=kv, states=[(4, "s4", 100), (10, "s10", 100)])
    assert (r.cached_len, r.inserted_len, r.new, r.existed, r.capped) == (0, 10, (4, 10), (), 0)
    m = c.match_prefix([0, 1, 2, 3, 4, 5, 6, 99])
    assert (m.token_match, m.restore_at, m.state, m.state_bytes) == (7, 4, "s4", 100)
    assert m.mid_edge
    np.testing.assert_array_equal(np.concatenate(m.kv), kv[:4])
    assert m.branch is None  # floor(7/4)*4 = 4 == restore_at
    m = c.match_prefix(list(range(12)))
    assert (m.token_match, m.restore_at, m.state) == (10, 10, "s10")
    np.testing.assert_array_equal(np.concatenate(m.kv), kv)
    m = c.match_prefix([5, 6])
    assert (m.token_match, m.restore_at, m.kv, m.state) == (0, 0, (), None)
    assert m.restore.cached_len == 0 and m.path.cached_len == 0  # the root
    c.check_integrity()


def test_branch_hint_is_grid_aligned_token_match_beyond_restore():
    c = _cache(grid=4)
    c.insert_prefix(list(range(20)), states=[(20, "a", 1)])
    m = c.match_prefix(list(range(11)) + [99])
    assert (m.token_match, m.restore_at, m.branch) == (11, 0, 8)
    m = c.match_prefix([0, 1, 2])
    assert m.branch is None  # floor(3/4)*4 = 0
    c2 = _cache(grid=64)
    c2.insert_prefix(list(range(200)), states=[(64, "a", 1), (200, "b", 1)])
    m = c2.match_prefix(list(range(150)) + [-1])
    assert (m.token_match, m.restore_at, m.branch) == (150, 64, 128)


def test_insert_divergence_creates_tombstone_and_match_ending_in_it_restores_above():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(2, "s2", 1), (8, "s8", 1)])
    r = c.insert_prefix([0, 1, 2, 3, 9, 9], states=[(6, "b6", 1)])
    assert (r.cached_len, r.inserted_len, r.new) == (4, 6, (6,))
    views = {(v.start, v.end): v for v in c.export()}
    assert not views[(2, 4)].has_state  # split node: a tombstone
    assert views[(0, 2)].has_state and views[(4, 8)].has_state and views[(4, 6)].has_state
    assert c.stats().tombstones == 1 and c.stats().splits == 1
    # a match ending exactly at the tombstone: token match 4, restore at the ancestor (2)
    m = c.match_prefix([0, 1, 2, 3])
    assert (m.token_match, m.restore_at, m.state, m.mid_edge) == (4, 2, "s2", False)
    assert m.path.cached_len == 4 and not view_at(c, [0, 1, 2, 3]).has_state
    c.check_integrity()


def test_match_split_true_creates_tombstone_and_default_does_not_mutate():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(8, "s8", 1)])
    before = [(v.id, v.start, v.end, v.has_state) for v in c.export()]
    m = c.match_prefix([0, 1, 2, 3, 4, 77], split=False)
    assert (m.token_match, m.restore_at, m.mid_edge) == (5, 0, True)
    assert [(v.id, v.start, v.end, v.has_state) for v in c.export()] == before
    m = c.match_prefix([0, 1, 2, 3, 4, 77], split=True)
    assert (m.token_match, m.restore_at, m.mid_edge) == (5, 0, True)
    assert m.path.cached_len == 5 and not view_at(c, [0, 1, 2, 3, 4]).has_state
    spans = sorted((v.start, v.end, v.has_state) for v in c.export() if v.parent != -1)
    assert spans == [(0, 5, False), (5, 8, True)]
    assert c.stats().splits == 1
    c.check_integrity()


def test_never_restores_past_deepest_checkpoint():
    c = _cache()
    c.insert_prefix(list(range(16)), kv=np.arange(16), states=[(4, "a", 1), (16, "b", 1)])
    c.insert_prefix(list(range(8)) + [50, 51, 52, 53], kv=np.arange(12), states=[(12, "c", 1)])
    # the node at 8 is a tombstone: a query matching 10 tokens restores at 4
    for q, exp in [
        (list(range(10)), (10, 4)),
        (list(range(8)), (8, 4)),
        (list(range(3)), (3, 0)),
        (list(range(8)) + [50, 51, 52, 53, 54], (12, 12)),
        (list(range(16)), (16, 16)),
    ]:
        m = c.match_prefix(q)
        assert (m.token_match, m.restore_at) == exp, q
        assert m.restore_at <= m.token_match
        kv = np.concatenate(m.kv) if m.kv else np.zeros(0)
        np.testing.assert_array_equal(kv, np.arange(m.restore_at))


def test_insert_cuts_key_at_deepest_checkpoint_and_revives_tombstones():
    log, on_kv, on_state = _free_log()
    pick = Pick()
    c = _cache(on_free_kv=on_kv, on_free_state=on_state, victim=pick)
    r = c.insert_prefix(list(range(12)), states=[(4, "a", 1), (8, "b", 1)])
    assert r.inserted_len == 8 and c.kv_tokens == 8
    # a checkpoint inside an existing edge splits it and stores the state there
    c.insert_prefix(list(range(20)), states=[(20, "t", 1)])
    r = c.insert_prefix(list(range(20)), states=[(14, "x", 1)])
    assert (r.new, r.existed, r.cached_len) == ((14,), (), 14)
    assert set(_states(c)) == {tuple(range(p)) for p in (4, 8, 14, 20)}
    # tombstone revival: make 14 a tombstone via state eviction, then re-insert
    pick.id = view_at(c, range(14)).id
    assert c.evict(states=1).tombstoned == 1
    assert log["state"] == [("x", 1)]
    r = c.insert_prefix(list(range(14)), states=[(14, "y", 2)])
    assert (r.new, r.existed) == ((14,), ())
    assert c.match_prefix(list(range(15))).state == "y"
    # already present: reported, payload not taken, not freed by the tree
    r = c.insert_prefix(list(range(14)), states=[(8, "dup", 1), (14, "dup2", 2)])
    assert (r.new, r.existed) == ((), (8, 14))
    assert c.match_prefix(list(range(14))).state == "y"
    assert log["state"] == [("x", 1)] and log["kv"] == []
    st = c.stats()
    assert (st.states_inserted, st.states_existed) == (5, 2)
    c.check_integrity()


def test_insert_without_states_is_a_noop_reporting_prefix():
    c = _cache()
    c.insert_prefix(list(range(6)), states=[(6, "a", 1)])
    r = c.insert_prefix([0, 1, 2, 9], states=())
    assert (r.cached_len, r.inserted_len, r.handle, r.new) == (3, 0, None, ())
    assert c.n_nodes == 1
    c.check_integrity()


# ---------------------------------------------------------------- payloads


def test_array_kv_payloads_are_split_consistently():
    c = _cache()
    kv = np.arange(30).reshape(10, 3)
    c.insert_prefix(list(range(10)), kv=kv, states=[(10, "a", 1)])
    kv2 = -np.arange(24).reshape(8, 3)
    c.insert_prefix([0, 1, 2, 3, 4, 5, 40, 41], kv=kv2, states=[(3, "m", 1), (8, "b", 1)])
    m = c.match_prefix(list(range(10)))
    np.testing.assert_array_equal(np.concatenate(m.kv), kv)
    m = c.match_prefix([0, 1, 2, 3, 4, 5, 40, 41])
    assert m.restore_at == 8
    got = np.concatenate(m.kv)
    np.testing.assert_array_equal(got[:6], kv[:6])  # shared part keeps the first owner's KV
    np.testing.assert_array_equal(got[6:], kv2[6:])


def test_byte_count_kv_payloads_split_proportionally_and_conserve_total():
    log, on_kv, _ = _free_log()
    c = _cache(on_free_kv=on_kv)
    c.insert_prefix(list(range(7)), kv=7001, states=[(7, "a", 1)])
    c.insert_prefix([0, 1, 2, 9], kv=4000, states=[(4, "b", 1)])
    c.insert_prefix([0, 9], kv=2000, states=[(2, "c", 1)])
    freed = c.evict(10**9)
    assert freed.kv_tokens == 7 + 1 + 1 and c.n_nodes == 0
    tot = sum(p for p, _ in log["kv"])
    # 7001 fully kept (split 1/2/4 tokens); 4000 * 1/4 and 2000 * 1/2 for the new tokens
    assert tot == 7001 + 1000 + 1000
    assert sorted(n for _, n in log["kv"]) == [1, 1, 1, 2, 4]


def test_kv_too_short_is_rejected():
    c = _cache()
    with pytest.raises(ValueError, match="kv"):
        c.insert_prefix(list(range(10)), kv=np.zeros(5), states=[(8, "a", 1)])


# ---------------------------------------------------------------- LRU orders


def test_kv_lru_evicts_least_recent_leaf_first_and_keeps_tombstone_parents_as_leaves():
    log, on_kv, on_state = _free_log()
    c = _cache(on_free_kv=on_kv, on_free_state=on_state)
    c.insert_prefix([1, 1, 1], states=[(3, "A", 10)])
    c.insert_prefix([2, 2, 2], states=[(3, "B", 10)])
    c.insert_prefix([3, 3, 3], states=[(3, "C", 10)])
    c.match_prefix([1, 1, 1])  # A becomes most recent
    r = c.evict(1)
    assert (r.kv_tokens, r.states, r.state_bytes, r.nodes) == (3, 1, 10, 1)
    assert log["state"] == [("B", 10)]
    c.evict(1)
    assert log["state"][-1] == ("C", 10)
    # two leaves under a split tombstone. Evicting both does not prune the tombstone in the same
    # call: SGLang keeps it as a KV leaf (unified_tree_core.py, ``_delete_unbacked_device_leaf``:
    # ``_update_evictable_leaf_sets(parent)``, no cascade past KV), so a later eviction takes it.
    c.insert_prefix([5, 5, 5, 5], states=[(4, "D", 1)])
    c.insert_prefix([5, 5, 6, 6], states=[(4, "E", 1)])
    assert c.stats().tombstones == 1
    r = c.evict(5)  # stops once 5 tokens are freed: A (3 tokens) then D (2)
    assert (r.kv_tokens, r.nodes, r.states) == (5, 2, 2)
    r = c.evict(1)  # E goes; the tombstone [5, 5] stays, now a leaf
    assert (r.kv_tokens, r.nodes, r.states) == (2, 1, 1) and c.stats().pruned == 0
    assert c.n_nodes == 1 and c.match_prefix([5, 5, 6]).token_match == 2
    r = c.evict(1)  # the tombstone leaf: KV only
    assert (r.kv_tokens, r.nodes, r.states) == (2, 1, 0)
    assert c.n_nodes == 0 and c.kv_tokens == 0 and c.n_states == 0
    c.check_integrity()


def test_kv_eviction_of_a_leaf_keeps_a_stateful_parent_as_new_leaf():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(4, "a", 1), (8, "b", 1)])
    r = c.evict(1)
    assert (r.kv_tokens, r.states) == (4, 1)
    assert _states(c) == {(0, 1, 2, 3): 1}
    assert c.match_prefix(list(range(8))).restore_at == 4
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
    c.insert_prefix(list(range(8)), states=[(4, "s4", 1), (8, "s8", 1)])
    c.insert_prefix([9, 9, 9, 9, 9, 9, 9, 9], states=[(8, "other", 1)])
    c.match_prefix(list(range(8)))
    for _ in range(3):
        c.evict(states=1)
        c.check_integrity()
    assert [p for p, _ in log["state"]] == order
    # s4 evicted while it still had a child leaves [0..3] a tombstone; once s8 goes too it is
    # a childless tombstone, which SGLang keeps as a KV leaf (unified_tree_core.py). s8 first:
    # s4's node is a leaf when its state goes, so it is deleted with its KV.
    tombstone_left = order.index("s4") < order.index("s8")
    assert (c.n_nodes, c.kv_tokens) == ((1, 4) if tombstone_left else (0, 0))


def test_state_eviction_tombstones_internal_and_deletes_leaves():
    c = _cache(state_touch="path")
    c.insert_prefix(list(range(8)), states=[(4, "a", 5), (8, "b", 7)])
    r = c.evict(states=1)  # ancestor is least recent under "path"
    assert (r.states, r.state_bytes, r.kv_tokens, r.tombstoned) == (1, 5, 0, 1)
    assert c.kv_tokens == 8 and c.n_states == 1
    assert c.match_prefix(list(range(6))).restore_at == 0  # KV still matches, no state
    assert c.match_prefix(list(range(6))).token_match == 6
    r = c.evict(state_bytes=1)  # the leaf: deleted with its KV; the tombstone stays
    assert (r.states, r.state_bytes, r.kv_tokens, r.nodes) == (1, 7, 4, 1)
    assert c.n_nodes == 1 and c.match_prefix(list(range(8))).token_match == 4
    c.check_integrity()


def test_evict_states_by_bytes_and_stops_when_nothing_evictable():
    c = _cache()
    for i in range(5):
        c.insert_prefix([i, i], states=[(2, i, 100 * (i + 1))])
    r = c.evict(state_bytes=250)
    assert (r.states, r.state_bytes) == (2, 300)
    r = c.evict(states=99)
    assert r.states == 3 and c.n_states == 0 and c.n_nodes == 0


# ---------------------------------------------------------------- locks and sizes


def test_locks_protect_and_evictable_sizes_add_up():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(4, "a", 10), (8, "b", 20)])
    c.insert_prefix([0, 1, 2, 3, 7, 7], states=[(6, "c", 30)])
    st = c.stats()
    assert (st.kv_tokens, st.kv_evictable, st.kv_protected) == (10, 10, 0)
    assert (st.states, st.state_bytes, st.state_bytes_evictable) == (3, 60, 60)
    m = c.match_prefix(list(range(8)))
    c.lock_handle(m.restore)  # locks state b and KV of [0, 8)
    st = c.stats()
    assert (st.kv_protected, st.kv_evictable) == (8, 2)
    assert (st.states_protected, st.state_bytes_protected, st.state_bytes_evictable) == (1, 20, 40)
    r = c.evict(10**6)  # only the unlocked leaf c goes
    assert (r.kv_tokens, r.states) == (2, 1)
    r = c.evict(states=10)  # a is internal and unlocked: tombstoned; b is locked
    assert (r.states, r.tombstoned) == (1, 1)
    assert _states(c) == {tuple(range(8)): 20}
    c.check_integrity()
    c.lock_handle(m.restore, unlock=True)
    st = c.stats()
    assert (st.kv_protected, st.state_bytes_protected, st.state_bytes_evictable) == (0, 0, 20)
    c.evict(10**6)
    assert c.n_nodes == 0
    c.check_integrity()


def test_kv_lock_on_leaf_protects_its_state_but_not_internal_states():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(4, "a", 1), (8, "b", 1)])
    leaf = c.match_prefix(list(range(8)), touch=False).path  # the leaf at 8: KV only
    c.lock_handle(leaf)
    assert c.stats().states_protected == 1  # a KV-locked leaf's state cannot go alone
    r = c.evict(states=5)
    assert (r.states, r.tombstoned) == (1, 1)  # only the internal state
    assert c.n_states == 1 and c.kv_tokens == 8
    # extending the leaf makes it internal: its state becomes evictable
    c.insert_prefix(list(range(10)), states=[(10, "c", 1)])
    assert c.stats().states_protected == 0
    c.lock_handle(leaf, unlock=True)
    c.check_integrity()


def test_kv_locked_tombstone_leaf_is_kept_and_stays_after_unlock():
    c = _cache()
    c.insert_prefix(list(range(8)), states=[(8, "a", 1)])
    c.insert_prefix([0, 1, 2, 3, 5], states=[(5, "b", 1)])
    tomb = c.match_prefix([0, 1, 2, 3], touch=False).path
    assert tomb.cached_len == 4 and not view_at(c, [0, 1, 2, 3]).has_state
    c.lock_handle(tomb)
    c.evict(10**6)
    assert c.n_nodes == 1 and c.kv_tokens == 4  # locked tombstone leaf survives
    c.check_integrity()
    c.lock_handle(tomb, unlock=True)
    # SGLang's dec_lock_ref only moves the sizes to evictable; the tombstone leaf stays
    assert c.n_nodes == 1 and view_at(c, [0, 1, 2, 3]) is not None
    assert c.stats().kv_evictable == 4
    c.check_integrity()
    r = c.evict(1)
    assert (r.kv_tokens, r.nodes, r.states) == (4, 1, 0) and view_at(c, [0, 1, 2, 3]) is None
    c.check_integrity()
    with pytest.raises(ValueError, match="stale: its node was evicted"):
        c.lock_handle(tomb)


def test_lock_counts_and_errors():
    c = _cache()
    c.insert_prefix(list(range(4)), states=[(2, "a", 1), (4, "b", 1)])
    m = c.match_prefix([0, 1, 2])
    c.lock_handle(m.restore)
    c.lock_handle(m.restore)
    c.lock_handle(m.restore, unlock=True)
    assert c.stats().states_protected == 1
    c.lock_handle(m.restore, unlock=True)
    with pytest.raises(ValueError, match="not locked"):
        c.lock_handle(m.restore, unlock=True)
    with pytest.raises(ValueError, match="not locked"):
        c.lock_handle(m.path, unlock=True)
    root = c.match_prefix([9]).restore
    c.lock_handle(root)  # no-op on the root
    c.lock_handle(root, unlock=True)
    assert c.size_info.kv_protected == 0
    other = _cache()
    other.insert_prefix([1], states=[(1, "q", 1)])
    with pytest.raises(ValueError, match="another cache"):
        c.lock_handle(other.match_prefix([1]).restore)
    with pytest.raises(ValueError, match="handle"):
        c.lock_handle("not a handle")
    c.check_integrity()
