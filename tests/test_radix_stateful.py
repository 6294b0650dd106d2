"""Hypothesis stateful test: RadixStateCache against a brute-force model.

The model is the set of inserted sequences as prefix dictionaries: ``kv`` maps every cached
prefix (in key elements) to the KV entries of its last element, ``states`` maps every
checkpointed prefix to its payload. Inserts and matches are predicted independently;
evictions are checked for legality (only unlocked data goes, the exact LRU victim goes
first, freed sizes add up) and the model then adopts the surviving prefixes.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kda_core.cache.radix import RadixStateCache
from tests.radix_helpers import Pick, paths, view_at

KEYS = st.lists(st.integers(0, 2), min_size=0, max_size=10)


class RadixModelMachine(RuleBasedStateMachine):
    PAGE = 1
    BLOCK_KEYS = False
    TOUCH = "node"

    @initialize()
    def setup(self) -> None:
        self.freed_kv: list = []
        self.freed_states: list = []
        self.cache = RadixStateCache(
            page_size=self.PAGE,
            block_keys=self.BLOCK_KEYS,
            grid=2 * self.PAGE,
            state_touch=self.TOUCH,
            on_free_kv=lambda p, n: self.freed_kv.extend(p) or self._check_len(p, n),
            on_free_state=lambda p, n: self.freed_states.append((p, n)),
        )
        self.tpe = self.PAGE if self.BLOCK_KEYS else 1
        self.epp = 1 if self.BLOCK_KEYS else self.PAGE
        self.unit = self.epp * self.tpe  # tokens per model entry (one page)
        self.kv: dict[tuple, tuple] = {}
        self.states: dict[tuple, tuple] = {}
        self.held: list[tuple[str, object, tuple]] = []
        self.given: list = []
        self.caller_freed: list = []
        self.kept_kv: list = []
        self.n_inserts = 0

    def _check_len(self, payload, n):
        assert len(payload) == n

    # ---------------------------------------------------------------- model helpers
    def _aligned(self, key: list) -> list:
        return key[: len(key) - len(key) % self.epp]

    def _model_match(self, key: list) -> tuple[int, int]:
        key = self._aligned(key)
        tm = 0
        for i in range(self.epp, len(key) + 1, self.epp):
            if tuple(key[:i]) in self.kv:
                tm = i
            else:
                break
        ra = max(
            [p for p in range(self.epp, tm + 1, self.epp) if tuple(key[:p]) in self.states],
            default=0,
        )
        return tm, ra

    def _adopt_cache_contents(self) -> tuple[set, set]:
        kv_after, st_after = set(), set()
        for key, positions in paths(self.cache):
            for i in range(self.epp, len(key) + 1, self.epp):
                kv_after.add(key[:i])
            for p in positions:
                st_after.add(key[: p // self.tpe])
        assert kv_after <= set(self.kv), "eviction invented KV"
        assert st_after <= set(self.states), "eviction invented states"
        removed_kv = set(self.kv) - kv_after
        removed_st = set(self.states) - st_after
        self.kv = {k: v for k, v in self.kv.items() if k in kv_after}
        self.states = {k: v for k, v in self.states.items() if k in st_after}
        return removed_kv, removed_st

    def _export_by_id(self):
        return {v.id: v for v in self.cache.export()}

    # ---------------------------------------------------------------- rules
    @rule(key=KEYS, data=st.data())
    def insert(self, key, data):
        al = self._aligned(key)
        cands = list(range(self.epp, len(al) + 1, self.epp))
        if not cands:
            r = self.cache.insert_prefix(key, states=())
            assert (r.inserted_len, r.new, r.existed) == (0, (), ())
            return
        chosen = sorted(data.draw(st.sets(st.sampled_from(cands), min_size=1, max_size=4)))
        nbytes = data.draw(st.integers(0, 5))
        self.n_inserts += 1
        iid = self.n_inserts
        kvlist = [("kv", iid, t) for t in range(len(key) * self.tpe)]
        payloads = {p: ("st", iid, p) for p in chosen}
        cut = chosen[-1]
        tm_before, _ = self._model_match(key[:cut])
        states = [(p * self.tpe, payloads[p], nbytes) for p in chosen]
        r = self.cache.insert_prefix(key, kv=kvlist, states=states)
        exp_new = tuple(p * self.tpe for p in chosen if tuple(key[:p]) not in self.states)
        exp_old = tuple(p * self.tpe for p in chosen if tuple(key[:p]) in self.states)
        assert r.cached_len == tm_before * self.tpe
        assert r.inserted_len == cut * self.tpe
        assert (r.new, r.existed, r.capped) == (exp_new, exp_old, 0)
        assert r.handle.cached_len == cut * self.tpe
        tpe, epp = self.tpe, self.epp
        for i in range(epp, cut + 1, epp):
            pre = tuple(key[:i])
            if pre not in self.kv:
                entries = tuple(kvlist[(i - epp) * tpe : i * tpe])
                self.kv[pre] = entries
                self.kept_kv.extend(entries)
        for p in chosen:
            pre = tuple(key[:p])
            self.given.append(payloads[p])
            if pre in self.states:
                self.caller_freed.append(payloads[p])
            else:
                self.states[pre] = (payloads[p], nbytes)

    @rule(key=KEYS, touch=st.booleans(), split=st.booleans())
    def match(self, key, touch, split):
        tm, ra = self._model_match(key)
        m = self.cache.match_prefix(key, touch=touch, split=split)
        assert (m.token_match, m.restore_at) == (tm * self.tpe, ra * self.tpe)
        got = [e for part in m.kv for e in part]
        exp = [e for i in range(self.epp, ra + 1, self.epp) for e in self.kv[tuple(key[:i])]]
        assert got == exp
        if ra:
            assert (m.state, m.state_bytes) == self.states[tuple(key[:ra])]
            assert m.restore.cached_len == ra * self.tpe
        else:
            assert m.restore.cached_len == 0 and m.state is None
        aligned = tm * self.tpe // self.cache.grid * self.cache.grid
        assert m.branch == (aligned if aligned > ra * self.tpe else None)
        if split and m.mid_edge:
            assert m.path.cached_len == tm * self.tpe

    @precondition(lambda self: bool(self.states))
    @rule(data=st.data(), kind=st.sampled_from(["state", "kv"]))
    def lock_checkpoint(self, data, kind):
        pre = data.draw(st.sampled_from(sorted(self.states)))
        m = self.cache.match_prefix(list(pre), touch=False)
        assert m.restore.cached_len == m.path.cached_len == len(pre) * self.tpe
        handle = m.restore if kind == "state" else m.path
        self.cache.lock_handle(handle)
        self.held.append((kind, handle, pre))

    @precondition(lambda self: bool(self.kv))
    @rule(data=st.data())
    def lock_kv_anywhere(self, data):
        pres = sorted(p for p in self.kv if len(p) % self.epp == 0)
        pre = data.draw(st.sampled_from(pres))
        m = self.cache.match_prefix(list(pre), touch=False, split=True)
        assert m.path.cached_len == len(pre) * self.tpe
        self.cache.lock_handle(m.path)
        self.held.append(("kv", m.path, pre))

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def unlock(self, data):
        i = data.draw(st.integers(0, len(self.held) - 1))
        _, handle, _ = self.held.pop(i)
        self.cache.lock_handle(handle, unlock=True)
        removed_kv, removed_st = self._adopt_cache_contents()
        assert not removed_st, "unlocking dropped a state"
        # SGLang's dec_lock_ref removes nothing (a tombstone leaf stays)
        assert not removed_kv, "unlocking dropped KV"

    @rule(n=st.integers(0, 12))
    def evict_kv(self, n):
        views = self._export_by_id()
        leaves = [v for v in views.values() if v.is_leaf and v.kv_lock == 0]
        naive = max(leaves, key=lambda v: v.kv_age) if leaves else None
        kv_before = len(self.kv)
        r = self.cache.evict(n * self.tpe)
        removed_kv, removed_st = self._adopt_cache_contents()
        assert r.kv_tokens == len(removed_kv) * self.unit == (kv_before - len(self.kv)) * self.unit
        assert r.states == len(removed_st)
        assert r.state_bytes == sum(
            n for p, n in self.freed_states[len(self.freed_states) - r.states :]
        )
        if n > 0 and naive is not None:
            assert naive.id not in self._export_by_id(), "LRU leaf not evicted first"
        if r.kv_tokens < n * self.tpe:
            assert not any(v.is_leaf and v.kv_lock == 0 for v in self.cache.export())

    @rule(n=st.integers(0, 3), by_bytes=st.booleans())
    def evict_states(self, n, by_bytes):
        views = self._export_by_id()
        cands = [
            v
            for v in views.values()
            if v.has_state and v.state_lock == 0 and not (v.is_leaf and v.kv_lock > 0)
        ]
        naive = max(cands, key=lambda v: v.state_age) if cands else None
        naive_is_leaf = naive is not None and naive.is_leaf
        before_kv = set(self.kv)
        r = self.cache.evict(state_bytes=n) if by_bytes else self.cache.evict(states=n)
        removed_kv, removed_st = self._adopt_cache_contents()
        assert r.states == len(removed_st)
        assert r.kv_tokens == len(removed_kv) * self.unit
        assert r.state_bytes == sum(
            n for p, n in self.freed_states[len(self.freed_states) - r.states :]
        )
        if r.states:
            assert naive is not None and naive.id not in {
                v.id for v in self.cache.export() if v.has_state
            }, "LRU state not evicted first"
        if r.states == 1 and r.tombstoned == 1:
            (s,) = removed_st
            assert s in self.kv and not naive_is_leaf  # internal: KV kept
            assert any(len(k) > len(s) and k[: len(s)] == s for k in before_kv)
        want = n
        got = r.state_bytes if by_bytes else r.states
        if got < want:
            assert self.cache.stats().states_evictable == 0

    # ---------------------------------------------------------------- invariants
    @invariant()
    def integrity(self):
        self.cache.check_integrity()
        st_ = self.cache.stats()
        assert st_.kv_tokens == len(self.kv) * self.unit
        assert st_.states == len(self.states)
        assert st_.state_bytes == sum(n for _, n in self.states.values())
        for kind, _, pre in self.held:
            assert view_at(self.cache, pre) is not None and pre in self.kv, "locked KV evicted"
            if kind == "state":
                assert pre in self.states, "locked state evicted"

    def teardown(self):
        if not hasattr(self, "cache"):
            return
        for _, handle, _ in reversed(self.held):
            self.cache.lock_handle(handle, unlock=True)
        self.held = []
        self.cache.evict(1 << 40)
        self.cache.check_integrity()
        s = self.cache.stats()
        assert (s.nodes, s.kv_tokens, s.states, s.state_bytes) == (0, 0, 0, 0)
        assert (s.kv_protected, s.state_bytes_protected) == (0, 0)
        tree_freed = [p for p, _ in self.freed_states]
        assert len(set(tree_freed)) == len(tree_freed), "state freed twice"
        assert not set(tree_freed) & set(self.caller_freed)
        assert Counter(tree_freed + self.caller_freed) == Counter(self.given)
        assert Counter(self.freed_kv) == Counter(self.kept_kv), "KV leaked or double freed"


class RadixPage2PathMachine(RadixModelMachine):
    PAGE = 2
    TOUCH = "path"


class RadixBlockKeysMachine(RadixModelMachine):
    PAGE = 3
    BLOCK_KEYS = True
    TOUCH = "path_tail_first"


_settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

TestRadixModel = RadixModelMachine.TestCase
TestRadixModel.settings = _settings
TestRadixPage2Path = RadixPage2PathMachine.TestCase
TestRadixPage2Path.settings = settings(_settings, max_examples=80)
TestRadixBlockKeys = RadixBlockKeysMachine.TestCase
TestRadixBlockKeys.settings = settings(_settings, max_examples=80)


# ---------------------------------------------------------------- per-path cap twin


def _children(views) -> dict[int, int]:
    out: dict[int, int] = {}
    for v in views:
        out[v.parent] = out.get(v.parent, 0) + 1
    return out


def _naive_cap(cache: RadixStateCache, pick: Pick, tail_key: list, cap: int) -> int:
    """SGLang _evict_excess_path_states through the protocol (root-first, skip the tail,
    locked states, forks): each chosen state evicted by ``pick``, the cache's victim hook.
    The caller runs it only after an insert stored a state (commit_insert_component_data)."""
    views = cache.export()
    by_id, kids = {v.id: v for v in views}, _children(views)
    tail = view_at(cache, tail_key)
    holders, v = [], tail
    while v.parent != -1:
        if v.has_state:
            holders.append(v)
        v = by_id[v.parent]
    excess = len(holders) - cap
    done = 0
    for v in reversed(holders):
        if excess <= 0:
            break
        if v.id == tail.id or v.state_lock > 0 or kids.get(v.id, 0) != 1:
            continue
        pick.id = v.id
        assert cache.evict(states=1).states == 1
        excess -= 1
        done += 1
    pick.id = None
    return done


def _state_set(cache: RadixStateCache) -> set:
    return {key[:p] for key, ps in paths(cache) for p in ps}


INSERTS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 2), min_size=1, max_size=12),
        st.sets(st.integers(1, 12), min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(INSERTS, st.integers(1, 3), st.lists(st.booleans(), min_size=25, max_size=25))
def test_per_path_cap_agrees_with_naive_twin(inserts, cap, locks):
    capped = RadixStateCache(max_states_per_path=cap)
    pick = Pick()
    twin = RadixStateCache(victim=pick)
    for i, (key, pos) in enumerate(inserts):
        if locks[i]:  # hold a state lock on the deepest checkpoint of a half key, in both
            for c in (capped, twin):
                m = c.match_prefix(key[: len(key) // 2 + 1], touch=False)
                c.lock_handle(m.restore)
        positions = sorted(p for p in pos if p <= len(key)) or [len(key)]
        states = [(p, (i, p), 1) for p in positions]
        a = capped.insert_prefix(key, states=states)
        b = twin.insert_prefix(key, states=states)
        n = _naive_cap(twin, pick, key[: positions[-1]], cap) if b.new else 0
        assert (a.new, a.existed, a.capped) == (b.new, b.existed, n)
        assert _state_set(capped) == _state_set(twin)
        capped.check_integrity()
        # soft cap: after an insert that stored a state, over the cap only when every extra
        # holder is a fork, locked or the tail (an insert that stored none caps nothing)
        views = capped.export()
        by_id, kids = {v.id: v for v in views}, _children(views)
        tail = view_at(capped, key[: positions[-1]])
        holders, v = [], tail
        while v.parent != -1:
            if v.has_state:
                holders.append(v)
            v = by_id[v.parent]
        if a.new and len(holders) > cap:
            assert all(h.id == tail.id or kids.get(h.id, 0) != 1 or h.state_lock for h in holders)
