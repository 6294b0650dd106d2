"""Fast paths of kda_core.cache.radix against their general twins.

* State eviction on a plain cache (no state hook or state table) runs the plain LRU loop
  (``evict._evict_lru_plain``); a no-op ``before_drop`` hook forces the general loop
  (``RadixTree.detach_state`` / ``remove_leaf``). Both must leave the same tree, counters and
  results, and later KV evictions (the leaf heap the plain loop fills at its end) must agree;
  with an ``on_free_kv`` hook on both, it must hear the same payloads in the same order.
* ``insert.parse_states`` tries ``parse_states_fast`` first; the per-entry loop must give the
  same list for every input the fast path accepts, and the fast path must decline the rest.
"""

from __future__ import annotations

import random

import pytest

from kda_core.cache.radix import RadixStateCache
from kda_core.cache.radix import _insert as insert
from tests.radix_helpers import paths


def _twin_caches(page: int, block_keys: bool, freed: list | None) -> tuple:
    """(plain, hooked); ``freed``: two lists, each cache's ``on_free_kv`` calls."""
    kw: list[dict] = [{}, {}]
    if freed is not None:
        kw = [{"on_free_kv": lambda kv, n, out=out: out.append((kv, n))} for out in freed]
    plain = RadixStateCache(page, block_keys=block_keys, **kw[0])
    hooked = RadixStateCache(page, block_keys=block_keys, before_drop=lambda d: None, **kw[1])
    assert plain._tree.plain and not hooked._tree.plain  # the hook forces the general loop
    return plain, hooked


def _view(c: RadixStateCache) -> tuple:
    nodes = [
        (v.parent, v.depth, v.start, v.end, v.key, v.has_state, v.state_bytes, v.kv_lock)
        for v in c.export()
    ]
    return nodes, c.stats(), sorted(paths(c))


@pytest.mark.parametrize("kv_hook", [False, True])
@pytest.mark.parametrize("page,block_keys", [(1, False), (4, False), (4, True)])
@pytest.mark.parametrize("seed", range(4))
def test_plain_lru_eviction_matches_the_general_loop(
    page: int, block_keys: bool, seed: int, kv_hook: bool
):
    rng = random.Random(seed)
    freed: list | None = [[], []] if kv_hook else None
    plain, hooked = _twin_caches(page, block_keys, freed)
    tpe = page if block_keys else 1
    epp = 1 if block_keys else page
    held: list[tuple] = []  # (handle in plain, handle in hooked) locked now
    heard = 0  # on_free_kv calls during state evictions
    for step in range(300):
        n_pages = rng.randint(1, 12)
        key = [rng.choice((0, 0, 1, 2)) for _ in range(n_pages * epp)]
        op = rng.random()
        if op < 0.55:
            pos = sorted(rng.sample(range(1, n_pages + 1), rng.randint(1, n_pages)))
            states = [(p * epp * tpe, f"s{step}.{p}", rng.randint(1, 9)) for p in pos]
            kv = tuple(f"{step}:{j}" for j in range(n_pages * epp * tpe)) if kv_hook else None
            a = plain.insert_prefix(key, kv, states)
            b = hooked.insert_prefix(key, kv, states)
            assert a[:5] == b[:5]
        elif op < 0.75:
            a, b = plain.match_prefix(key), hooked.match_prefix(key)
            assert a[:7] == b[:7]
            if a.restore_at and rng.random() < 0.5:
                plain.lock_handle(a.restore)
                hooked.lock_handle(b.restore)
                held.append((a.restore, b.restore))
            elif a.path.cached_len and rng.random() < 0.5:
                plain.lock_handle(a.path)
                hooked.lock_handle(b.path)
                held.append((a.path, b.path))
        elif op < 0.85 and held:
            ha, hb = held.pop(rng.randrange(len(held)))
            plain.lock_handle(ha, unlock=True)
            hooked.lock_handle(hb, unlock=True)
        elif op < 0.95:
            num, nbytes = rng.randint(0, 4), rng.randint(0, 30)
            before = len(freed[0]) if freed is not None else 0
            ev = plain.evict(states=num, state_bytes=nbytes)
            assert ev == hooked.evict(states=num, state_bytes=nbytes)
            heard += (len(freed[0]) if freed is not None else 0) - before
        else:  # KV leaves in heap order: the parents the plain loop left as leaves count
            n_tok = rng.randint(1, 8) * tpe * epp
            assert plain.evict(kv_tokens=n_tok) == hooked.evict(kv_tokens=n_tok)
        assert _view(plain) == _view(hooked)
        if freed is not None:
            assert freed[0] == freed[1]
    plain.check_integrity()
    hooked.check_integrity()
    assert plain.stats().evicted_states > 50  # the comparison covered real evictions
    if freed is not None:  # the hook heard leaves that went with their state
        assert heard > 20


@pytest.mark.parametrize(
    "states",
    [
        [(4, "a"), (8, "b")],
        ((4, "a"), (12, "b"), (16, "c")),
        [(8, "a"), (4, "b")],  # unsorted: the loop sorts
        [(4, "a"), (4, "b")],  # duplicate: the loop raises
        [(4, "a", 3), (8, "b")],  # an explicit size
        [(0, "a")],
        [(20, "a")],  # beyond the key
        [(6, "a")],  # off the page grid
        [(True, "a")],
        [[4, "a"]],
        {4: "a", 8: "b"},
        [],
    ],
)
@pytest.mark.parametrize("page,block_keys", [(1, False), (4, False), (4, True)])
def test_fast_state_parse_agrees_with_the_loop(states, page: int, block_keys: bool, monkeypatch):
    tree = RadixStateCache(page, block_keys=block_keys)._tree
    n_elems = 16 if not block_keys else 4  # a 16-token key either way
    fast = insert.parse_states_fast(tree, states, n_elems, 7)
    monkeypatch.setattr(insert, "parse_states_fast", lambda *a: None)  # the loop alone
    try:
        slow = insert.parse_states(tree, states, n_elems, 7)
    except ValueError:
        assert fast is None  # the fast path never accepts what the loop rejects
        return
    pairs = type(states) in (list, tuple) and all(type(s) is tuple and len(s) == 2 for s in states)
    ascending = pairs and [s[0] for s in states] == sorted({s[0] for s in states})
    if pairs and ascending and states:
        assert fast == slow  # the common call takes the fast path
    else:
        assert fast is None or fast == slow
