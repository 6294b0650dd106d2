"""Tests for kda_core.cache.policy, part 2: eviction against naive twins (LRU, Marconi) and
repeat requests (part 1, placement: tests/test_policy.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kda_core.cache import policy as P
from kda_core.cache.radix import RadixStateCache
from tests.radix_helpers import Pick

# ---------------------------------------------------------------- eviction


def _views(cache) -> tuple[dict, dict]:
    """(id -> NodeView, id -> number of children) of the cache's export."""
    views = cache.export()
    kids: dict[int, int] = {}
    for v in views:
        kids[v.parent] = kids.get(v.parent, 0) + 1
    return {v.id: v for v in views}, kids


def _row(rows, node_id) -> int:
    """The state-table row of a node id (-1: none)."""
    if node_id is None:
        return -1
    return int(np.flatnonzero(rows.live & (rows.node_id == node_id))[0])


def _rows(cache):
    """The state table as the cache's victim hook would see it now."""
    tree = cache._tree
    return tree.table.rows(tree.clock, tree.owner)


def _naive_lru_victim(cache):
    """Independent LRU over the export: the unprotected state touched longest ago.
    Protected = state-locked, or a KV-locked leaf (docs/radix.md, invariant 5)."""
    best = None
    for v in cache.export()[1:]:
        if not v.has_state or v.state_lock > 0 or (v.is_leaf and v.kv_lock > 0):
            continue
        if best is None or v.state_age > best.state_age:
            best = v
    return best


class _WalkingLRU(P.IntervalPolicy):
    """Its cache's victim hook walks the export (``_naive_lru_victim``), so eviction runs the
    general victim loop (``_cache_of`` builds that cache)."""


def _cache_of(pol, page_size=1, **kw) -> RadixStateCache:
    """The cache a policy runs on (``RadixStateCache(page, **cache_options(), **hooks)``)."""
    if not isinstance(pol, _WalkingLRU):
        return RadixStateCache(page_size, **pol.cache_options(), **kw)
    box = {}

    def victim(rows):
        v = _naive_lru_victim(box["cache"])
        return _row(rows, None if v is None else v.id)

    box["cache"] = RadixStateCache(page_size, **pol.cache_options(), victim=victim, **kw)
    return box["cache"]


def _random_cache(pol, ops, **hooks):
    c = _cache_of(pol, 1, **hooks)
    for key, pos, nbytes, touch, lock in ops:
        ps = sorted(p for p in pos if p <= len(key)) or [len(key)]
        c.insert_prefix(key, states=[(p, (tuple(key), p), nbytes + p) for p in ps])
        m = c.match_prefix(key[: max(1, len(key) * touch // 4)])
        if lock and m.restore_at:
            c.lock_handle(m.restore)
    return c


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=10),
            st.sets(st.integers(1, 10), min_size=1, max_size=3),
            st.integers(1, 50),
            st.integers(0, 4),
            st.booleans(),
        ),
        min_size=1,
        max_size=15,
    ),
    st.integers(0, 6),
    st.integers(0, 400),
    st.sampled_from(["interval", "sglang", "vllm", "walking"]),
)
def test_lru_eviction_agrees_with_an_independent_lru(ops, num, nbytes, name):
    # The cache's state eviction (its fast path for the LRU policies, the general victim loop
    # for "walking") against a naive loop over _naive_lru_victim on a twin cache, each victim
    # evicted by a Pick hook: same victims in the same order, same totals, stopping as soon
    # as both targets are met.
    pol = _WalkingLRU() if name == "walking" else P.make(name)
    got_log: list = []
    want_log: list = []
    pick = Pick()
    got_c = _random_cache(pol, ops, on_free_state=lambda s, n: got_log.append((s, n)))
    want_c = _random_cache(
        P.make("interval") if name == "walking" else pol,
        ops,
        on_free_state=lambda s, n: want_log.append((s, n)),
        victim=pick,
    )
    r = got_c.evict(states=num, state_bytes=nbytes)
    states = freed = 0
    while states < num or freed < nbytes:
        v = _naive_lru_victim(want_c)
        if v is None:
            break
        states += 1
        freed += v.state_bytes
        pick.id = v.id
        assert want_c.evict(states=1).states == 1
    assert got_log == want_log
    assert (r.states, r.state_bytes) == (states, freed)
    assert freed == sum(n for _, n in want_log) and states == len(want_log)
    got_c.check_integrity()


def test_marconi_flops_formula():
    pol = P.make("marconi", d_model=2, d_state=3, n_ssm_layers=5, n_attn_layers=7, n_mlp_layers=11)
    got = pol._flops(np.array([10.0]), np.array([4.0]))

    def attn(x):
        return 8 * x * 4 + 4 * x * x * 2

    ssm = 12 * 6 * 4 + 16 * 6 * 2 * 3 + 10 * 6 * 2
    exp = 5 * ssm + 7 * (attn(10) - attn(4)) + 11 * 16 * 6 * 4
    assert got[0] == pytest.approx(exp, rel=1e-15)


def _naive_marconi_victim(pol, cache):
    by_id, kids = _views(cache)
    rows = []
    for v in list(by_id.values())[1:]:
        if not v.has_state or kids.get(v.id, 0) > 1:
            continue
        if v.state_lock > 0 or (v.is_leaf and v.kv_lock > 0):
            continue
        anc = by_id[v.parent]
        while anc.parent != -1 and not anc.has_state:
            anc = by_id[anc.parent]
        L, Lp = float(v.end), float(anc.end)
        D, N = float(pol.d_model), float(pol.d_state)

        def attn(x, D=D):
            return 8 * x * D * D + 4 * x * x * D

        own = L - Lp
        fl = (
            pol.n_ssm_layers * (12 * own * D * D + 16 * own * D * N + 10 * own * D)
            + pol.n_attn_layers * (attn(L) - attn(Lp))
            + pol.n_mlp_layers * 16 * own * D * D
        )
        eff = fl / max(v.state_bytes + pol.kv_bytes_per_token * L, 1.0)
        rec = 1.0 / (1.0 + v.state_age)
        rows.append((v, rec, eff))
    if not rows:
        return None

    def norm(xs):
        lo, hi = min(xs), max(xs)
        return [1.0] * len(xs) if len(xs) <= 1 or hi <= lo else [(x - lo) / (hi - lo) for x in xs]

    rn = norm([r[1] for r in rows])
    en = norm([r[2] for r in rows])
    scored = [
        (rn[i] + pol.alpha_value * en[i], -rows[i][0].state_age, rows[i][0])
        for i in range(len(rows))
    ]
    return min(scored, key=lambda t: (t[0], t[1]))[2]


def _chosen(pol, cache):
    """The view of the node the policy's victim hook picks now (None: none)."""
    rows = _rows(cache)
    row = pol._choose_victim(rows)
    if row < 0:
        return None
    return _views(cache)[0][int(rows.node_id[row])]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=12),
            st.sets(st.integers(1, 12), min_size=1, max_size=3),
            st.integers(1, 10**7),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
)
def test_marconi_vectorised_victim_agrees_with_naive(ops, alpha):
    pol = P.make("marconi", alpha=alpha, d_model=64, d_state=16, kv_bytes_per_token=1000)
    cache = _cache_of(pol, 1)
    locked = []
    for key, pos, nbytes, lock in ops:
        ps = sorted(p for p in pos if p <= len(key)) or [len(key)]
        cache.insert_prefix(key, states=[(p, None, nbytes) for p in ps])
        m = cache.match_prefix(key[: len(key) // 2 + 1])
        if lock and m.restore_at:
            cache.lock_handle(m.restore)
            locked.append(m.restore)
    while True:
        exp = _naive_marconi_victim(pol, cache)
        got = _chosen(pol, cache)
        assert (got is None) == (exp is None)
        if got is None:
            break
        assert got.id == exp.id
        assert _views(cache)[1].get(got.id, 0) <= 1
        assert cache.evict(states=1).states == 1
        cache.check_integrity()
    for h in locked:  # every locked state is still there
        cache.lock_handle(h)


def test_marconi_alpha_trades_recency_for_flop_efficiency():
    # two candidate leaves: a long one (high FLOPs per byte) touched long ago and a short
    # recent one; alpha 0 evicts the old long one, a large alpha the recent short one
    def build(alpha):
        pol = P.make("marconi", alpha=alpha, d_model=256, d_state=16, kv_bytes_per_token=0)
        c = _cache_of(pol, 1)
        c.insert_prefix(list(range(4000)), states=[(4000, "long", 1000)])
        c.insert_prefix([-1] * 4, states=[(4, "short", 1000)])
        return pol, c

    pol, c = build(0.0)
    assert _chosen(pol, c).state == "long"
    pol, c = build(2.0)
    assert _chosen(pol, c).state == "short"
    rows, scores = pol._scores(_rows(c))
    assert rows.size == 2 and scores.min() >= 0 and scores.max() <= 3.0


def test_marconi_skips_forks_and_evicts_single_child_internal_as_tombstone():
    pol = P.make("marconi", alpha=0.0)
    c = _cache_of(pol, 1)
    c.insert_prefix(list(range(8)), states=[(4, "fork", 1), (8, "a", 1)])
    c.insert_prefix(list(range(4)) + [9, 9], states=[(6, "b", 1)])
    c.insert_prefix([50, 51, 52, 53], states=[(2, "single", 1), (4, "c", 1)])
    c.match_prefix([50, 51, 52, 53])  # c and its single-child parent are now the most recent
    order = []
    while (v := _chosen(pol, c)) is not None:
        order.append(v.state)
        assert v.state != "fork" or _views(c)[1].get(v.id, 0) <= 1
        c.evict(states=1)
        c.check_integrity()
    # the fork is a candidate only once one of its two children is gone
    assert order.index("fork") > min(order.index("a"), order.index("b"))
    assert set(order) == {"fork", "a", "b", "single", "c"}


def test_marconi_auto_alpha_bootstrap_and_tune():
    pol = P.make("marconi", alpha="auto", bootstrap=5)
    assert pol.alpha_value == 0.0 and not pol.tuning_due()
    c = _cache_of(pol, 1)
    for i in range(3):
        pol.note_request()
        c.insert_prefix([i, i], states=[(2, None, 1)])
    c.evict(states=1)  # first eviction after N0 = 3 requests
    for _ in range(11):
        pol.note_request()
        assert not pol.tuning_due()
    pol.note_request()  # 15 = 5 * 3
    assert pol.tuning_due()
    seen = []
    best = pol.tune(lambda a: seen.append(a) or -((a - 0.7) ** 2))
    assert best == 0.7 and pol.alpha_value == 0.7 and seen == list(P.MarconiPolicy().alpha_grid)
    assert not pol.tuning_due()
    fixed = pol.with_alpha(0.3)
    assert fixed.alpha_value == 0.3 and not fixed.tuning_due()
    assert pol.tune(lambda a: 1.0) == 0.0  # ties keep the smallest alpha
    with pytest.raises(ValueError, match="evaluate"):
        pol.tune(3)


def test_marconi_custom_efficiency_fn():
    calls = []

    def eff(length, anc, nbytes):
        calls.append((length.copy(), anc.copy(), nbytes.copy()))
        return -length.astype(float)  # prefer evicting the longest

    pol = P.make("marconi", alpha=100.0, efficiency_fn=eff)
    c = _cache_of(pol, 1)
    c.insert_prefix([1] * 10, states=[(10, "ten", 5)])
    c.insert_prefix([2] * 3, states=[(3, "three", 7)])
    assert _chosen(pol, c).state == "ten"
    lengths, ancs, nb = calls[-1]
    assert sorted(zip(lengths.tolist(), ancs.tolist(), nb.tolist())) == [(3, 0, 7), (10, 0, 5)]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 1 << 22),
    st.integers(0, 1 << 22),
    st.integers(0, 1 << 40),
    st.integers(1, 8192),
    st.integers(1, 256),
)
def test_scalar_efficiency_twin_equals_vectorised(length, anc, nbytes, d_model, d_state):
    anc = min(anc, length - 1)
    pol = P.make("marconi", d_model=d_model, d_state=d_state)
    vec = pol._efficiency(np.array([length]), np.array([anc]), np.array([nbytes]))[0]
    assert pol._scalar_efficiency(float(length), float(anc), float(nbytes)) == vec


@pytest.mark.parametrize("name", P.POLICY_NAMES)
@pytest.mark.parametrize("page", [1, 16])
def test_repeat_request_restores_at_the_deepest_planned_checkpoint(name, page):
    pol = P.make(name)
    cache = _cache_of(pol, page)
    rng = np.random.default_rng(7)
    for n in (100, 700, 1500, 3000):
        prompt = rng.integers(0, 1000, n).tolist()
        total = n + 300
        full = prompt + rng.integers(0, 1000, 300).tolist()
        m = cache.match_prefix(prompt[:-1])
        assert (m.token_match, m.restore_at) == (0, 0)
        plan = pol.checkpoint_positions(n, m, total_len=total, chunk_size=512, page_size=page)
        if plan:
            cache.insert_prefix(full, states=[(p, None, 1) for p in plan])
        # the same conversation continued: restore at the deepest checkpoint inside it
        again = full + [5] * 40
        m2 = cache.match_prefix(again[:-1])
        assert m2.restore_at == max(plan, default=0)
        assert m2.token_match == (max(plan) if plan else 0)
        cache.check_integrity()
