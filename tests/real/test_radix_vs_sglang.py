"""Differential test: kda_core.radix.RadixStateCache against SGLang 0.5.23's own
``UnifiedRadixCache`` (sglang/srt/mem_cache/unified_radix_cache.py, FULL + MAMBA components,
Python tree core ``unified_cache/unified_tree_core.py``), driven by the same seeded random
sequences of insert / match / lock / unlock / state eviction / KV eviction and compared after
every step: token match, restore point, branch hint, evictable and protected KV tokens and
states, and what each eviction freed; a quarter of the seeds also set the per-path state cap
(SGLang ``--mamba-max-states-per-path``).

Settings that make the two agree (documented lab options, not hidden switches):
``RadixStateCache(page_size=1, state_touch="node")`` (the default) with
``match_prefix(..., split=True)``:
SGLang's ``match_prefix`` splits an edge where the lookup ends inside it; the lab's default
``split=False`` keeps lookups pure and gives the same restore point but a different tree shape.
One state per insert at the end of the key, as SGLang's ``cache_finished_req`` does."""

from __future__ import annotations

import random

import pytest
from sglang_cache import RealSGLangCache

from kda_core.cache.radix import RadixStateCache

SEEDS = range(100)
STEPS = 500
KV_BUDGET = 1500  # tokens held by the tree before a step makes room (pool holds 4096)


class Pair:
    """The two caches plus the lock handles each took for the same request."""

    def __init__(self, cap: int | None = None) -> None:
        real_cap = -1 if cap is None else cap
        self.real = RealSGLangCache(kv_size=4096, mamba_slots=1024, max_states_per_path=real_cap)
        self.ours = RadixStateCache(page_size=1, max_states_per_path=cap)
        self.locks: list[tuple[object, object]] = []

    def compare_sizes(self, where: str) -> None:
        real = self.real.sizes()
        st = self.ours.stats()
        ours = {
            "kv_evictable": st.kv_evictable,
            "kv_protected": st.kv_protected,
            "states_evictable": st.states_evictable,
            "states_protected": st.states_protected,
        }
        assert ours == real, f"{where}: sizes differ"


def _tokens(rng: random.Random, bases: list[list[int]]) -> list[int]:
    base = rng.choice(bases)
    head = base[: rng.randint(1, len(base))]
    tail = [rng.randint(100, 104) for _ in range(rng.randint(0, 6))]
    return head + tail


def _step(pair: Pair, rng: random.Random, bases: list[list[int]], where: str) -> None:
    op = rng.choices(
        ["insert", "match", "lock", "unlock", "evict_states", "evict_kv"],
        weights=[30, 20, 10, 10, 15, 15],
    )[0]
    if op == "insert" or pair.ours.kv_tokens > KV_BUDGET:
        if pair.ours.kv_tokens > KV_BUDGET:
            got_real = pair.real.evict(num_tokens=200)
            got_ours = pair.ours.evict(200)
            assert (got_ours.kv_tokens, got_ours.states) == (
                got_real.num_tokens_evicted,
                got_real.mamba_num_evicted,
            ), f"{where}: make-room KV eviction freed different amounts"
        tokens = _tokens(rng, bases)
        real = pair.real.insert(tokens)
        ours = pair.ours.insert_prefix(tokens, states=[(len(tokens), None, 1)])
        assert ours.cached_len == real.prefix_len, f"{where}: insert prefix {tokens}"
        assert bool(ours.existed) == bool(real.mamba_exist), f"{where}: state existed {tokens}"
    elif op in ("match", "lock"):
        tokens = _tokens(rng, bases)
        real = pair.real.match(tokens)
        ours = pair.ours.match_prefix(tokens, split=True)
        got = (ours.token_match, ours.restore_at, ours.branch)
        want = (real.full_kv_hit_length, real.device_prefix_len, real.mamba_branching_seqlen)
        assert got == want, f"{where}: match {tokens}"
        if op == "lock":
            real_lock = pair.real.lock(real.last_device_node)
            pair.ours.lock_handle(ours.restore)
            pair.locks.append((real_lock, ours.restore))
    elif op == "unlock":
        if pair.locks:
            real_lock, handle = pair.locks.pop(rng.randrange(len(pair.locks)))
            pair.real.unlock(real_lock)
            pair.ours.lock_handle(handle, unlock=True)
    elif op == "evict_states":
        n = rng.randint(1, 3)
        real = pair.real.evict(mamba_num=n)
        ours = pair.ours.evict(states=n)
        assert (ours.states, ours.kv_tokens) == (
            real.mamba_num_evicted,
            real.num_tokens_evicted,
        ), f"{where}: evict {n} states"
    else:
        n = rng.randint(1, 12)
        real = pair.real.evict(num_tokens=n)
        ours = pair.ours.evict(n)
        assert (ours.kv_tokens, ours.states) == (
            real.num_tokens_evicted,
            real.mamba_num_evicted,
        ), f"{where}: evict {n} KV tokens"
    pair.compare_sizes(where)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_operations_agree_with_sglang(seed: int) -> None:
    rng = random.Random(seed)
    bases = [[rng.randint(1, 6) for _ in range(rng.randint(4, 24))] for _ in range(4)]
    pair = Pair(cap=None if seed % 4 else 1 + seed % 3)  # a quarter run with a per-path cap
    for step in range(STEPS):
        _step(pair, rng, bases, f"seed {seed} step {step}")
    pair.ours.check_integrity()


def test_rule_examples_on_the_real_sglang_and_ours() -> None:
    """The two examples tests/test_radix_rules.py pins, run on SGLang itself."""
    # A childless tombstone stays a KV leaf (unified_tree_core.py, leaf deletion re-files the
    # parent with _update_evictable_leaf_sets; no cascade): 7 tokens freed, 5 still match.
    pair = Pair()
    for tokens in (list(range(1, 11)), [1, 2, 3, 4, 5, 99, 98]):
        pair.real.insert(tokens)
        pair.ours.insert_prefix(tokens, states=[(len(tokens), None, 1)])
    real = pair.real.evict(mamba_num=2)
    ours = pair.ours.evict(states=2)
    assert (real.num_tokens_evicted, ours.kv_tokens) == (7, 7)
    assert pair.real.match(list(range(1, 11))).full_kv_hit_length == 5
    assert pair.ours.match_prefix(list(range(1, 11))).token_match == 5
    # A split stamps the lower half as just used (_split_node: child.last_access_time =
    # get_and_increase_time_counter()): one KV eviction takes [50..55], not the tail [6..10].
    pair = Pair()
    for tokens in (list(range(1, 11)), list(range(50, 56)), [1, 2, 3, 4, 5, 99]):
        pair.real.insert(tokens)
        pair.ours.insert_prefix(tokens, states=[(len(tokens), None, 1)])
    real = pair.real.evict(num_tokens=1)
    ours = pair.ours.evict(1)
    assert (real.num_tokens_evicted, ours.kv_tokens) == (6, 6)
    assert pair.real.match(list(range(50, 56))).full_kv_hit_length == 0
    assert pair.real.match(list(range(1, 11))).full_kv_hit_length == 10


def test_path_cap_runs_only_when_an_insert_stores_a_state() -> None:
    """SGLang's MambaComponent.commit_insert_component_data emits _evict_excess_path_states for
    a new or revived state only: a state kept by its lock through a capping insert survives,
    once unlocked, an insert whose state existed, and goes with the next insert that stores
    one."""
    pair = Pair(cap=1)
    pair.real.insert(list(range(4)))
    pair.ours.insert_prefix(list(range(4)), states=[(4, None, 1)])
    real_lock = pair.real.lock(pair.real.match(list(range(4))).last_device_node)
    handle = pair.ours.match_prefix(list(range(4)), split=True).restore
    pair.ours.lock_handle(handle)
    steps = ((8, (False, 2)), (8, (True, 2)), (12, (False, 1)))  # -> (existed, states after)
    for n, want in steps:
        real = pair.real.insert(list(range(n)))
        ours = pair.ours.insert_prefix(list(range(n)), states=[(n, None, 1)])
        sizes = pair.real.sizes()
        assert (real.mamba_exist, sizes["states_evictable"] + sizes["states_protected"]) == want
        assert (bool(ours.existed), pair.ours.n_states) == want
        pair.compare_sizes(f"insert {n}")
        if real_lock is not None:  # unlocked after the first capping insert
            pair.real.unlock(real_lock)
            pair.ours.lock_handle(handle, unlock=True)
            real_lock = None
    pair.ours.check_integrity()
