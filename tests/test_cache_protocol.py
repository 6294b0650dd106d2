"""The cache protocol (kda_core.cache.protocol, after mini-sglang's ``BasePrefixCache`` in
python/minisgl/kvcache/base.py): RadixStateCache conforms to it, handle misuse raises clear
errors, and the read-only views and the eviction hooks see what they should."""

from __future__ import annotations

import gc
import weakref

import pytest

from kda_core.cache.protocol import (
    CacheHandle,
    DroppedState,
    Evicted,
    HandleError,
    PrefixCache,
    PrefixInsert,
    PrefixMatch,
    SizeInfo,
)
from kda_core.cache.radix import RadixStateCache
from tests.radix_helpers import Pick, view_at

BIG = 10**9


def test_runtime_checkable_protocol() -> None:
    assert isinstance(RadixStateCache(), PrefixCache)
    assert isinstance(RadixStateCache(4, block_keys=True), PrefixCache)
    assert not isinstance(object(), PrefixCache)

    class NoSizes:  # everything but size_info / check_integrity
        def match_prefix(self, key, *, touch=True): ...
        def insert_prefix(self, key, kv=None, states=(), *, state_bytes=0): ...
        def lock_handle(self, handle, unlock=False): ...
        def evict(self, kv_tokens=0, *, states=0, state_bytes=0): ...

    assert not isinstance(NoSizes(), PrefixCache)


def test_protocol_by_hand() -> None:
    c = RadixStateCache()
    r = c.insert_prefix(list(range(8)), kv=list(range(8)), states=[(4, "s4", 10), (8, "s8", 20)])
    assert isinstance(r, PrefixInsert)
    assert (r.cached_len, r.inserted_len, r.new, r.existed, r.capped) == (0, 8, (4, 8), (), 0)
    assert isinstance(r.handle, CacheHandle) and r.handle.cached_len == 8
    assert c.size_info == SizeInfo(8, 0, 30, 0)
    m = c.match_prefix([0, 1, 2, 3, 4, 5, 99])
    assert isinstance(m, PrefixMatch)
    # the restore point is the checkpoint at 4; the token match goes on inside the next edge
    assert (m.token_match, m.restore_at, m.state, m.state_bytes) == (6, 4, "s4", 10)
    assert m.kv == ([0, 1, 2, 3],) and m.mid_edge
    assert m.restore.cached_len == 4 and m.path.cached_len == 4
    c.lock_handle(m.restore)
    # the state at 4 and the KV [0, 4) are protected; the leaf (4, 8] is not
    want = SizeInfo(
        kv_evictable=4, kv_protected=4, state_bytes_evictable=20, state_bytes_protected=10
    )
    assert c.size_info == want
    assert c.kv_tokens == 8 and c.state_bytes == 30
    ev = c.evict(BIG, states=BIG)
    assert ev == Evicted(states=1, state_bytes=20, kv_tokens=4, nodes=1, tombstoned=0)
    assert c.match_prefix(list(range(8))).restore_at == 4
    c.lock_handle(m.restore, unlock=True)
    assert c.evict(BIG, states=BIG) == Evicted(1, 10, 4, 1, 0)
    assert c.size_info == SizeInfo(0, 0, 0, 0)
    c.check_integrity()


def test_path_handle_locks_kv_only() -> None:
    c = RadixStateCache()
    c.insert_prefix([1, 2, 3, 4], states=[(2, "a", 5), (4, "b", 5)])
    m = c.match_prefix([1, 2, 3, 4])
    c.lock_handle(m.path)  # KV of [1, 2, 3, 4]; states stay evictable (only leaf's is kept)
    assert c.size_info.kv_protected == 4
    ev = c.evict(BIG, states=BIG)
    # the internal state at 2 is tombstoned; the KV-locked leaf keeps its state (SGLang:
    # a KV-locked leaf's state is protected) and no KV goes
    assert (ev.states, ev.kv_tokens, ev.tombstoned) == (1, 0, 1)
    c.lock_handle(m.path, unlock=True)
    assert c.evict(BIG, states=BIG).kv_tokens == 4
    c.check_integrity()


# ------------------------------------------------------------------------------------------
# misuse


def _cache_with_two_states(**kw) -> RadixStateCache:
    c = RadixStateCache(**kw)
    c.insert_prefix([1, 2, 3, 4, 5, 6], states=[(3, "a", 8), (6, "b", 8)])
    c.insert_prefix([1, 2, 3, 9, 9], states=[(5, "c", 8)])  # node at 3 is internal now
    return c


def test_foreign_handle() -> None:
    c1, c2 = _cache_with_two_states(), _cache_with_two_states()
    h = c1.match_prefix([1, 2, 3]).restore
    with pytest.raises(HandleError, match="belongs to another cache"):
        c2.lock_handle(h)
    assert c2.size_info.kv_protected == 0
    with pytest.raises(HandleError, match="must be a handle returned by match_prefix"):
        c1.lock_handle(CacheHandle(3))
    with pytest.raises(HandleError, match="must be a handle"):
        c1.lock_handle("node 3")  # type: ignore[arg-type]


def test_double_unlock() -> None:
    c = _cache_with_two_states()
    h1 = c.match_prefix([1, 2, 3]).restore
    h2 = c.match_prefix([1, 2, 3]).restore
    with pytest.raises(HandleError, match="not locked"):
        c.lock_handle(h1, unlock=True)  # never locked
    c.lock_handle(h1)
    c.lock_handle(h2)  # same node, another holder
    c.lock_handle(h1, unlock=True)
    # the node is still locked by h2, but h1 is not: a second unlock of h1 is misuse
    with pytest.raises(HandleError, match="double unlock"):
        c.lock_handle(h1, unlock=True)
    assert c.size_info.state_bytes_protected == 8
    c.lock_handle(h2, unlock=True)
    assert c.size_info.state_bytes_protected == 0
    with pytest.raises(ValueError, match="unlock must be a bool"):
        c.lock_handle(h2, unlock=1)  # type: ignore[arg-type]
    c.check_integrity()


def test_stale_handle_after_eviction() -> None:
    c = _cache_with_two_states()
    m = c.match_prefix([1, 2, 3, 4, 5, 6])
    assert m.restore_at == 6
    c.evict(BIG, states=BIG)
    assert c.size_info == SizeInfo(0, 0, 0, 0)
    for h in (m.restore, m.path):
        with pytest.raises(HandleError, match="stale: its node was evicted"):
            c.lock_handle(h)


def test_stale_handle_state_tombstoned() -> None:
    pick = Pick()
    c = _cache_with_two_states(victim=pick)
    h = c.match_prefix([1, 2, 3]).restore
    pick.id = view_at(c, [1, 2, 3]).id  # evict exactly that state (internal: tombstone)
    assert c.evict(states=1).tombstoned == 1
    with pytest.raises(HandleError, match="state was evicted"):
        c.lock_handle(h)
    # the KV path handle of the same node is still good
    p = c.match_prefix([1, 2, 3, 4, 5, 6]).path
    c.lock_handle(p)
    c.lock_handle(p, unlock=True)
    c.check_integrity()


def test_handle_keeps_no_evicted_node_alive() -> None:
    c = _cache_with_two_states()
    h = c.match_prefix([1, 2, 3, 4, 5, 6]).restore
    ref = weakref.ref(c._tree.live[view_at(c, [1, 2, 3, 4, 5, 6]).id])
    c.evict(BIG, states=BIG)
    gc.collect()
    assert ref() is None  # the handle holds its node weakly
    with pytest.raises(HandleError, match="stale"):
        c.lock_handle(h)


def test_handle_errors_are_value_errors() -> None:
    assert issubclass(HandleError, ValueError)
    c = RadixStateCache()
    root = c.match_prefix([5, 6]).restore  # no hit: the root, nothing to lock
    assert root.cached_len == 0
    c.lock_handle(root)
    c.lock_handle(root, unlock=True)
    with pytest.raises(ValueError, match="not locked"):
        c.lock_handle(root, unlock=True)
    with pytest.raises(ValueError, match="kv_tokens must be"):
        c.evict(-1)
    with pytest.raises(ValueError, match="touch must be a bool"):
        c.match_prefix([1], touch=None)  # type: ignore[arg-type]


def _payloads(c: RadixStateCache) -> list:
    return [v.state for v in c.export() if v.has_state]


def test_state_payloads_follow_inserts_and_evictions() -> None:
    """The engine checks its checkpoint pool against the export's payloads (CacheOps)."""
    c = RadixStateCache()
    c.insert_prefix(list(range(8)), kv=list(range(8)), states=[(4, "s4", 10), (8, "s8", 20)])
    c.insert_prefix([0, 1, 2, 3, 7, 7], kv=[0, 1, 2, 3, 7, 7], states=[(6, "b6", 5)])
    assert sorted(_payloads(c)) == ["b6", "s4", "s8"]
    edges = {v.key: v.kv for v in c.export()[1:]}
    assert edges == {(0, 1, 2, 3): [0, 1, 2, 3], (4, 5, 6, 7): [4, 5, 6, 7], (7, 7): [7, 7]}
    assert c.evict(states=2).states == 2
    assert len(_payloads(c)) == 1
    assert _payloads(RadixStateCache()) == []


def test_before_drop_sees_the_path_and_the_state() -> None:
    """A lower tier (kda_core.transfer._tiers) copies what a dropped state needs: its path's
    tokens and KV root-first, and the payload, while still attached."""
    seen: list = []
    c = RadixStateCache(before_drop=seen.append)
    c.insert_prefix([1, 2, 3, 4], kv=["a", "b", "c", "d"], states=[(2, "s2", 7), (4, "s4", 9)])
    c.evict(states=2)
    by_state = {d.state: d for d in seen}
    assert set(by_state) == {"s2", "s4"}
    assert by_state["s2"] == DroppedState((1, 2), (["a", "b"],), "s2", 7)
    assert by_state["s4"].tokens == (1, 2, 3, 4) and by_state["s4"].state_bytes == 9
    assert [x for part in by_state["s4"].kv for x in part] == ["a", "b", "c", "d"]


def test_read_kv_and_reset() -> None:
    freed = []
    c = RadixStateCache(on_free_state=lambda p, n: freed.append(p))
    c.insert_prefix(list(range(8)), kv=list(range(8)), states=[(4, "s4", 1), (8, "s8", 1)])
    # the KV of a matched prefix, root first, the edge it ends inside cut
    assert c.read_kv([0, 1, 2, 3, 4, 5, 99], 6) == ([0, 1, 2, 3], [4, 5])
    assert c.read_kv([0, 1, 2, 3], 4) == ([0, 1, 2, 3],) and c.read_kv([7], 0) == ()
    with pytest.raises(ValueError, match="past the cached prefix"):
        c.read_kv([0, 1, 9], 3)
    m = c.match_prefix(list(range(8)))
    assert c.reset() == 2 and sorted(freed) == ["s4", "s8"]
    assert (c.n_nodes, c.n_states, c.kv_tokens, c.state_bytes) == (0, 0, 0, 0)
    with pytest.raises(HandleError, match="another cache"):
        c.lock_handle(m.restore)
    c.check_integrity()
