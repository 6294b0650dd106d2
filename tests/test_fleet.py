"""``kda_core.fleet.simulate_fleet`` on a hand-worked fleet (3 replicas, 10 requests) and bad
input. The other fleet tests import the trace helpers from here.

The hand-worked fleet: Kimi K3 under vLLM's rules (block 768 tokens); every page is one block
(``block_size=768``) and ``max_num_batched_tokens=768`` makes every prefill step one block, so
a request of ``k`` pages plus a 100-token tail holds KV and a state at every block up to
``k * 768`` (``last_cache = floor((L - 1) / 768) * 768``). Requests arrive 1000 s apart with one
output token, so nothing is in flight at a decision: the load terms are only what the routers
carry between picks. The decisions below are worked out in the comments of each test.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.fleet import GAP_REASONS, ROUTERS, simulate_fleet
from kda_core.workloads import Trace
from kda_core.workloads.traces import make_trace

B = 768


def page_trace(
    prompts: list[list[int]],
    block: int = B,
    tail: int = 100,
    gap_s: float = 1000.0,
    out: int = 1,
) -> Trace:
    """Requests of whole pages (ids as given) plus a ``tail``-token last page of a fresh id."""
    fresh = 1 + max(max(p) for p in prompts)
    rows = [list(p) + ([fresh + i] if tail else []) for i, p in enumerate(prompts)]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    n = len(rows)
    return make_trace(
        "hand",
        block,
        np.arange(n) * gap_s,
        np.array([len(p) * block + tail for p in prompts]),
        np.full(n, out),
        offsets,
        np.concatenate([np.array(r, dtype=np.int64) for r in rows]),
        np.full(n, -1),
        np.zeros(n, dtype=np.int64),
        ("hand",),
    )


A, Bp, C, D, E, F, Q, U, V, W, X, Y, Z = range(1, 14)
HAND = [
    [A, Bp, C],
    [X, Y],
    [A, Bp, C, D],
    [A, Bp, Z],
    [X, Y, W],
    [A, Bp, C, D, E],
    [Q],
    [X, Y, W, V],
    [A, Bp, Z, U],
    [A, Bp, C, D, E, F],
]
ONE_BLOCK_STEPS = {"max_num_batched_tokens": B}


def run(router: str, prompts=HAND, **kw):
    kw.setdefault("engine_params", ONE_BLOCK_STEPS)
    return simulate_fleet(page_trace(prompts), replicas=3, router=router, **kw)


def test_kv_events_hand_worked():
    # cost = (n - hits) + recent, recent halved at every pick, the winner charged its misses:
    # r0 ties at 3 -> 0 (rec 3,0,0); r1 ties 2+3/2/2 -> 1 (1.5,2,0); r2 hits 3 on 0: 1+1.5 <
    # 6, 4 -> 0 (1.75,1,0); r3 hits 2: 1+1.75 < 4, 3 -> 0 (1.875,.5,0); r4 hits 2 on 1:
    # 1+.5 -> 1 (.9375,1.25,0); r5 hits 4: 1+.9375 -> 0; r6 no hits: 1+1.47, 1+.63, 1+0 -> 2;
    # r7 hits 3 on 1: 1+.31 -> 1; r8 hits 3 on 0 (Z from r3): 1+.37 -> 0; r9 hits 5: 1+1.18
    r = run("kv_events", router_params={"recent_decay": 0.5})
    assert r.replica.tolist() == [0, 1, 0, 0, 1, 0, 2, 1, 0, 0]
    assert (r.expected // B).tolist() == [0, 0, 3, 2, 2, 4, 0, 3, 3, 5]
    assert np.array_equal(r.cached, r.expected)  # a state at every block: nothing over-promised
    assert r.reason.tolist() == [0] * 10


@pytest.mark.parametrize("router", ["state_aware", "kv_events_all_groups", "sglang_cache_aware"])
def test_same_decisions_when_every_block_has_a_state(router):
    # a state at every block: the state-aware count is the KV count; the all-groups view loses
    # nothing (no eviction); the SGLang router's tree matches the same pages (r2: 3 of 5 pages
    # > 0.3 -> tenant 0; r6 no match -> the smallest tree, replica 2 with 0 pages) and counts
    # the same expected tokens (pages matched on the chosen tenant x 768)
    params = {"recent_decay": 0.5} if router != "sglang_cache_aware" else None
    r = run(router, router_params=params)
    assert r.replica.tolist() == [0, 1, 0, 0, 1, 0, 2, 1, 0, 0]
    assert (r.expected // B).tolist() == [0, 0, 3, 2, 2, 4, 0, 3, 3, 5]


def test_round_robin_and_least_loaded():
    assert run("round_robin").replica.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    # nothing is ever in flight at a decision: the first replica wins every tie
    assert run("least_loaded").replica.tolist() == [0] * 10
    first = run("least_loaded", seed=1).replica
    assert first.tolist() == [first[0]] * 10


def test_kv_only_router_over_promises_where_no_state_is():
    # default chunk 2048 -> steps of 2 blocks: r0 [A, B, C] keeps states at 1536 (a chunk end)
    # and 2304 (its last cacheable block), none at 768. r1 [A, Y] shares block A: the KV-only
    # router counts 768 tokens on replica 0, the replica can restore nothing (no state at 768)
    # and the state-aware router counts 0 there
    prompts = [[A, Bp, C], [A, Y]]
    kv = simulate_fleet(page_trace(prompts), replicas=3, router="kv_events", weight=10.0)
    st = simulate_fleet(page_trace(prompts), replicas=3, router="state_aware", weight=10.0)
    assert kv.replica.tolist() == [0, 0] and kv.expected.tolist() == [0, B]
    assert kv.cached.tolist() == [0, 0] and kv.token_match.tolist() == [0, B]
    assert GAP_REASONS[kv.reason[1]] == "kv_without_state"
    assert st.expected.tolist() == [0, 0] and st.summary()["over_promised_tokens"] == 0


def test_summary_fields():
    r = run("round_robin")
    s = r.summary()
    L = page_trace(HAND).input_len
    assert s["state_hit_rate"] == pytest.approx(r.cached.sum() / L.sum())
    assert s["requests_per_replica"] == [4, 3, 3] and s["load_skew"] == pytest.approx(4 / (10 / 3))
    assert s["regret_tokens"] == int((r.best - r.cached).sum()) and (r.best >= r.cached).all()


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        ({"replicas": 0}, "replicas"),
        ({"replicas": 2.5}, "replicas"),
        ({"router": "random"}, "router"),
        ({"weight": -1.0}, "weight"),
        ({"weight": float("nan")}, "weight"),
        ({"engine": "trtllm"}, "engine"),
        ({"model": "llama"}, "model"),
        ({"seed": -1}, "seed"),
        ({"tp": 0}, "tp"),
        ({"state_budget_bytes": -5}, "state_budget_bytes"),
        ({"router_params": {"nope": 1}}, "router_params"),
        ({"engine_params": {"mode": "none"}}, "engine_params"),
        ({"engine_params": {"partial_hits": True}}, "partial_hits"),
        ({"oracle": 1}, "oracle"),
    ],
)
def test_bad_input_names_the_argument(kw, word):
    args = {"replicas": 2, "router": "kv_events"} | kw
    with pytest.raises(ValueError, match=word):
        simulate_fleet(page_trace(HAND[:2]), **args)


def test_trace_without_prefix_information_is_refused():
    t = page_trace(HAND[:2])
    cols = (t.arrival_s, t.input_len, t.output_len, t.offsets, t.blocks, t.session, t.kind)
    info = {"has_prefix_info": False, "source_format": "azure"}
    lengths_only = make_trace("lengths", B, *cols, t.kind_names, provenance=info)
    with pytest.raises(ValueError, match="trace 'lengths'"):
        simulate_fleet(lengths_only, replicas=2, router="round_robin")
    with pytest.raises(ValueError, match="trace must be"):
        simulate_fleet("trace.jsonl", replicas=2, router="round_robin")


def test_every_router_runs_and_is_deterministic():
    t = page_trace(HAND)
    for router in ROUTERS:
        a = simulate_fleet(t, replicas=3, router=router)
        b = simulate_fleet(t, replicas=3, router=router)
        assert np.array_equal(a.replica, b.replica) and np.array_equal(a.cached, b.cached)
