"""The event-fed routers against a brute-force twin that reads the replicas' trees.

Before each decision the twin asks every replica's tree what a request could use there (the
fleet's ``observe`` hook; a router never does this): the full blocks of the KV prefix it holds
(``match_prefix(touch=False).token_match``) and the deepest state within it (``restore_at``).
The ``kv_events`` router's index must count exactly the first, the ``state_aware`` router's the
second, for every replica at every decision, under budgets that evict both. Then the twin
recomputes each decision from those counts with its own load bookkeeping (distinct blocks of the
requests in flight, Infera's decayed misses) and the cost ``w * (blocks - hits) + load``, ties
to the lower load then the first replica, and must pick what the router picked.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.fleet._index import request_hashes
from kda_core.fleet._setup import check_args
from kda_core.fleet._simulate import run
from kda_core.sim import checkpoint_bytes
from kda_core.workloads import workload

CKPT = checkpoint_bytes("kimi-k3", 8)


def chat(n: int = 70):
    """Multi-turn sessions over a shared 2000-token system prompt, overlapping in time."""
    return workload(
        "chat", n_sessions=n, turns=6, system_tokens=2000, block_size=256, session_rate=0.5, seed=3
    )


def opts(**kw) -> dict:
    base = dict(
        replicas=3,
        router="kv_events",
        model="kimi-k3",
        tp=8,
        engine="vllm",
        weight=4.0,
        seed=0,
        budgets=dict(state_budget_bytes=None, kv_budget_bytes=None, unified_budget_bytes=None),
        engine_params=None,
        router_params=None,
        time_model=None,
        oracle=False,
    )
    base.update(kw)
    return base


def brute_run(trace, **kw):
    """Run with the twin watching: per decision, per replica, (KV blocks, state blocks)."""
    s = check_args(trace, opts(**kw))
    seen: list[list[tuple[int, int]]] = []
    bt, lens = s.block_tokens, s.trace.input_len
    evicted = [0]

    def observe(i, reps, key):
        evicted[0] = sum(
            r.cache.stats().evicted_states + r.cache.stats().evicted_kv_tokens for r in reps
        )
        full = int(lens[i]) // bt * bt
        row = []
        for rep in reps:
            m = rep.cache.match_prefix(key, touch=False)
            row.append((min(m.token_match, full) // bt, min(m.restore_at, full) // bt))
        seen.append(row)

    res = run(s, observe)
    res.stats["evicted"] = evicted[0]
    return s, res, np.array(seen)


def twin_decisions(s, res, hits: np.ndarray, decay: float) -> list[int]:
    """The decisions recomputed from the brute-force hit counts (module docstring)."""
    page, bt = s.page, s.block_tokens
    lens = s.trace.input_len
    hashes = []
    for i in range(len(lens)):
        pages = s.trace.block_ids(i).tolist()[: int(lens[i]) // page]
        hashes.append(request_hashes(pages, bt // page))
    rec = [0.0] * s.replicas
    out = []
    for i in range(len(lens)):
        n = len(hashes[i])
        costs = []
        for r in range(s.replicas):
            live = set()
            for j in range(i):
                if res.replica[j] == r and res.finish_s[j] > res.arrival_s[i]:
                    live.update(hashes[j])
            load = len(live) + rec[r]
            costs.append((s.weight * (n - hits[i, r]) + load, load, r))
        _, _, pick = min(costs)
        out.append(pick)
        rec = [v * decay if v * decay >= 1e-3 else 0.0 for v in rec]
        missed = n - hits[i, pick]
        if missed > 0 and decay > 0:
            rec[pick] += missed
    return out


CASES = [
    ("vllm", "kv_events", dict(state_budget_bytes=60 * CKPT)),
    ("vllm", "state_aware", dict(state_budget_bytes=60 * CKPT)),
    ("vllm", "kv_events", dict(kv_budget_bytes=2 * 10**9)),
    ("vllm", "state_aware", dict(unified_budget_bytes=4 * 10**9)),
    ("sglang", "kv_events", dict(state_budget_bytes=40 * CKPT)),
    ("sglang", "state_aware", dict(state_budget_bytes=40 * CKPT, kv_budget_bytes=2 * 10**9)),
]


@pytest.mark.parametrize(("engine", "router", "budgets"), CASES)
def test_event_index_and_decisions_equal_the_brute_force_twin(engine, router, budgets):
    trace = chat()
    b = dict(state_budget_bytes=None, kv_budget_bytes=None, unified_budget_bytes=None) | budgets
    s, res, seen = brute_run(trace, engine=engine, router=router, budgets=b)
    col = 1 if router == "state_aware" else 0
    hits = seen[:, :, col]
    chosen = hits[np.arange(len(res.replica)), res.replica]
    assert np.array_equal(res.expected, chosen * s.block_tokens)
    assert np.array_equal(twin_decisions(s, res, hits, 0.97), res.replica.tolist())
    # the twin is not vacuous: hits differ across replicas, and the budgets evicted
    assert (hits.max(axis=1) > hits.min(axis=1)).sum() > 20
    assert res.stats["evicted"] > 0
