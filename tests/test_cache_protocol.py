"""The cache protocol (kda_core.cache.protocol, after mini-sglang's ``BasePrefixCache`` in
python/minisgl/kvcache/base.py): RadixStateCache conforms to it, the protocol and the node API
agree step by step on scripted operations, and handle misuse raises clear errors."""

from __future__ import annotations

import gc
import random
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
    assert c.size_info == SizeInfo(kv_evictable=4, kv_protected=4, state_bytes_evictable=20,
                                   state_bytes_protected=10)  # fmt: skip
    assert c.size_info.kv_total == 8 and c.size_info.state_bytes_total == 30
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
# conformance: the same script through the node API (A) and the protocol (B)


def _script(rng: random.Random, steps: int) -> list[tuple]:
    ops: list[tuple] = []
    bases = [[rng.randrange(4) for _ in range(rng.randrange(4, 24))] for _ in range(4)]
    for _ in range(steps):
        base = rng.choice(bases)
        key = base[: rng.randrange(1, len(base) + 1)] + [
            rng.randrange(4) for _ in range(rng.randrange(0, 6))
        ]
        kind = rng.random()
        if kind < 0.35:
            n = rng.randrange(1, 4)
            pos = sorted(rng.sample(range(1, len(key) + 1), min(n, len(key))))
            ops.append(("insert", key, pos, rng.random() < 0.3))
        elif kind < 0.65:
            ops.append(("match", key, rng.random() < 0.8, rng.random()))
        elif kind < 0.8:
            ops.append(("unlock", rng.random()))
        else:
            ops.append(("evict", rng.randrange(0, 12), rng.randrange(0, 3), rng.randrange(0, 40)))
    return ops


def _same_state(a: RadixStateCache, b: RadixStateCache) -> None:
    assert a.export() == b.export()
    assert a.paths() == b.paths()
    sa = a.stats()
    assert sa == b.stats()
    assert b.size_info == SizeInfo(
        sa.kv_evictable, sa.kv_protected, sa.state_bytes_evictable, sa.state_bytes_protected
    )
    a.check_integrity()
    b.check_integrity()


def _page_key(key: list[int], page: int) -> list[int]:
    return key[: len(key) - len(key) % page] if len(key) >= page else []


def _run_insert(a, b, op, page, held_a, held_b) -> None:
    _, key, pos, lock = op
    key = _page_key(key, page)
    pos = sorted({p - p % page for p in pos if page <= p <= len(key)})
    states = [(p, f"s{p}", p) for p in pos]
    ra = a.insert(key, kv=list(key), states=states)
    rb = b.insert_prefix(key, kv=list(key), states=states)
    assert (rb.cached_len, rb.inserted_len, rb.new, rb.existed, rb.capped) == (
        ra.prefix_len,
        ra.inserted_len,
        ra.new,
        ra.existed,
        ra.capped,
    )
    assert (rb.handle is None) == (ra.node is None)
    if lock and ra.node is not None:
        a.lock_state(ra.node)
        b.lock_handle(rb.handle)
        held_a.append((a.unlock_state, ra.node))
        held_b.append(rb.handle)


def _run_match(a, b, op, held_a, held_b) -> None:
    _, key, touch, lock = op
    ma = a.match(key, touch=touch)
    mb = b.match_prefix(key, touch=touch)
    assert (mb.token_match, mb.restore_at, mb.state, mb.state_bytes, mb.kv) == (
        ma.token_match,
        ma.restore_at,
        ma.state,
        ma.state_bytes,
        ma.kv,
    )
    assert (mb.branch, mb.mid_edge) == (ma.branch, ma.mid_edge)
    assert mb.restore.cached_len == ma.restore_at
    assert mb.path.cached_len == ma.last_node.plen  # token keys: plen counts tokens
    if lock < 0.4:
        a.lock_state(ma.node)
        b.lock_handle(mb.restore)
        held_a.append((a.unlock_state, ma.node))
        held_b.append(mb.restore)
    elif lock < 0.6:
        a.lock_kv(ma.last_node)
        b.lock_handle(mb.path)
        held_a.append((a.unlock_kv, ma.last_node))
        held_b.append(mb.path)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("page", [1, 2])
def test_protocol_matches_node_api(seed: int, page: int) -> None:
    rng = random.Random(seed)
    touch_mode = ("node", "path", "path_tail_first")[seed % 3]
    cap = None if seed % 2 else 3
    a = RadixStateCache(page, state_touch=touch_mode, max_states_per_path=cap)
    b = RadixStateCache(page, state_touch=touch_mode, max_states_per_path=cap)
    held_a: list = []
    held_b: list = []
    for op in _script(rng, 250):
        if op[0] == "insert":
            _run_insert(a, b, op, page, held_a, held_b)
        elif op[0] == "match":
            _run_match(a, b, op, held_a, held_b)
        elif op[0] == "unlock" and held_a:
            i = int(op[1] * len(held_a))
            fn, node = held_a.pop(i)
            fn(node)
            b.lock_handle(held_b.pop(i), unlock=True)
        elif op[0] == "evict":
            _, kv, n, nb = op
            ea = a.evict_states(n, nb)
            eb_kv = a.evict_kv(kv)
            expect = Evicted(*(x + y for x, y in zip(ea, eb_kv)))
            assert b.evict(kv, states=n, state_bytes=nb) == expect
        _same_state(a, b)
    for (fn, node), h in zip(held_a, held_b):
        fn(node)
        b.lock_handle(h, unlock=True)
    _same_state(a, b)
    assert b.size_info.kv_protected == 0 and b.size_info.state_bytes_protected == 0


# ------------------------------------------------------------------------------------------
# misuse


def _cache_with_two_states() -> RadixStateCache:
    c = RadixStateCache()
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
    c = _cache_with_two_states()
    h = c.match_prefix([1, 2, 3]).restore
    node = c.match([1, 2, 3]).node  # node API: evict exactly that state (internal: tombstone)
    assert c.evict_state_node(node).tombstoned == 1
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
    ref = weakref.ref(c.match([1, 2, 3, 4, 5, 6]).node)
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
    with pytest.raises(ValueError, match="num_tokens must be"):
        c.evict(-1)
    with pytest.raises(ValueError, match="touch must be a bool"):
        c.match_prefix([1], touch=None)  # type: ignore[arg-type]


def test_state_payloads_follow_inserts_and_evictions() -> None:
    """The engine checks its checkpoint pool against these (serve/cache_ops.check_integrity)."""
    c = RadixStateCache()
    c.insert_prefix(list(range(8)), kv=list(range(8)), states=[(4, "s4", 10), (8, "s8", 20)])
    c.insert_prefix([0, 1, 2, 3, 7, 7], kv=[0, 1, 2, 3, 7, 7], states=[(6, "b6", 5)])
    assert sorted(c.state_payloads()) == ["b6", "s4", "s8"]
    assert c.evict(states=2).states == 2
    assert len(c.state_payloads()) == 1
    assert RadixStateCache().state_payloads() == []


def test_before_drop_state_sees_the_path_and_the_state() -> None:
    """A lower tier (kda_core.transfer.tiers) copies what a dropped state needs: its path's
    tokens and KV root-first, and the payload, while still attached."""
    c = RadixStateCache()
    c.insert_prefix([1, 2, 3, 4], kv=["a", "b", "c", "d"], states=[(2, "s2", 7), (4, "s4", 9)])
    seen = []
    c.before_drop_state = seen.append
    c.evict(states=2)
    by_state = {d.state: d for d in seen}
    assert set(by_state) == {"s2", "s4"}
    assert by_state["s2"] == DroppedState((1, 2), (["a", "b"],), "s2", 7)
    assert by_state["s4"].tokens == (1, 2, 3, 4) and by_state["s4"].state_bytes == 9
    assert [x for part in by_state["s4"].kv for x in part] == ["a", "b", "c", "d"]
