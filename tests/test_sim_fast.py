"""The fast simulator pass against its naive twin, request by request.

The twin is the radix tree of ``kda_core.cache`` driven by ``sim._sequential.run_sequential``
(what ``simulate(method="twin")`` runs); the fast pass is ``sim.fast.replay`` on a prepared
trace. Every per-request series (token match, restore point, states new, state bytes, KV held
and its peak, states held, evictions so far) and the cache counters (nodes, tombstones, splits,
states inserted / existed, evicted states / bytes / KV tokens, tombstoned, matches and hits)
must be equal, on the bundled Mooncake trace, synthetic traces with output blocks and random
branching traces, with no budget and under state, KV and unified budgets small enough to evict
on most requests. Then ``simulate``'s choice: the fast pass where it covers the call, the twin
elsewhere, and what it refuses.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sim
from kda_core.cache.radix import RadixStateCache
from kda_core.sim import fast
from kda_core.sim._placement import RunCtx
from kda_core.sim._sequential import run_sequential
from kda_core.sim.simulator import checkpoint_bytes, resolve_policy
from kda_core.workloads import bundled_trace, workload
from kda_core.workloads.traces import make_trace

CKPT = checkpoint_bytes("kimi-k3", 8)  # 29,039,616 B
KVB = 27_648  # Kimi K3 MLA KV per token, TP8, bf16
SERIES = ("token_match", "restore_at", "new", "state_bytes", "kv_tokens", "kv_peak")
SERIES += ("n_states", "evicted_cum")


def twin_core(trace, policy, sb=None, kb=None, ub=None, cap=False, outputs=True, kvb=KVB):
    pol = resolve_policy(policy)
    page = trace.block_size
    pol.check_page(page)
    cache = RadixStateCache(page, block_keys=True, **pol.cache_options())
    ctx = RunCtx(cache, pol, sb, kb, ub, CKPT, kvb, page)
    ctx.cap_last = cap
    return run_sequential(ctx, trace, len(trace), outputs, None, False, None)


def assert_same(trace, policy, sb=None, kb=None, ub=None, cap=False, outputs=True, kvb=KVB):
    want = twin_core(trace, policy, sb, kb, ub, cap, outputs, kvb)
    prep = fast.prepare_trace(trace, outputs)
    got = fast.replay(
        prep,
        policy,
        checkpoint_bytes=CKPT,
        kv_bytes_per_token=kvb,
        state_budget_bytes=sb,
        kv_budget_bytes=kb,
        unified_budget_bytes=ub,
        cap_lookup=cap,
    )
    for f in SERIES:
        a, b = want[f], getattr(got, f)
        if not np.array_equal(a, b):
            i = int(np.flatnonzero(a != b)[0])
            raise AssertionError(f"{f} differs first at request {i}: twin {a[i]}, fast {b[i]}")
    assert (got.dropped, got.steps) == (want["dropped"], want["steps"])
    ws = want["stats"]
    assert len(got.counts) == 15
    for f, v in got.counts.items():
        assert v == getattr(ws, f), f
    return want


def random_trace(seed: int, n: int = 300, page: int = 16, outputs: bool = False):
    """Branching requests that obey the chain rule: each extends or forks an earlier request
    (or starts afresh) at a random block, with fresh ids after the fork; a partial last block
    of its own; with ``outputs``, fresh output blocks after the full input blocks."""
    rs = np.random.RandomState(seed)
    rows: list[list[int]] = []
    fulls: list[list[int]] = []  # the sequence a follow-up may extend (input full + outputs)
    nxt = 0
    lens, outs, out_ids = [], [], []
    for _ in range(n):
        base: list[int] = []
        if fulls and rs.rand() < 0.85:
            src = fulls[rs.randint(len(fulls))]
            base = src[: rs.randint(0, len(src) + 1)]
        k = int(rs.randint(1, 12))
        full = base + list(range(nxt, nxt + k))
        nxt += k
        part = int(rs.randint(0, page))  # tokens in a partial last block (0: none)
        ids = full + ([nxt] if part else [])
        nxt += 1 if part else 0
        L = len(full) * page + part
        n_out = int(rs.randint(0, 4)) if outputs else 0
        o = list(range(nxt, nxt + n_out))
        nxt += n_out
        rows.append(ids)
        fulls.append(full + o)
        lens.append(L)
        outs.append(n_out * page + int(rs.randint(0, page)))
        out_ids.append(o)
    offs = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    blocks = np.array([h for r in rows for h in r], dtype=np.int64)
    oo = np.concatenate(([0], np.cumsum([len(o) for o in out_ids])))
    ob = np.array([h for o in out_ids for h in o], dtype=np.int64)
    ar = np.cumsum(rs.exponential(1.0, n))
    z = np.zeros(n, dtype=np.int64)
    extra = (oo, ob) if outputs else (None, None)
    return make_trace(f"random{seed}", page, ar, lens, outs, offs, blocks, z - 1, z, ("r",), *extra)


@pytest.fixture(scope="module")
def conv():
    return bundled_trace("conversation")


@pytest.mark.parametrize(
    "budgets",
    [
        {},
        {"sb": 64 * CKPT},
        {"sb": 64 * CKPT, "cap": True},
        {"kb": 300_000 * KVB},
        {"sb": 200 * CKPT, "kb": 150_000 * KVB},
        {"ub": 40 * CKPT + 200_000 * KVB},
    ],
)
def test_bundled_trace_sglang(conv, budgets):
    r = assert_same(conv, "sglang", **budgets)
    if budgets:  # the budget binds: evictions on most requests, not a trivial agreement
        assert r["evicted_cum"][-1] > len(conv) // 4


def test_bundled_trace_path_touch_policies(conv):
    assert_same(conv, ("vllm", {"block_size": 1024}), sb=40 * CKPT, kb=400_000 * KVB)
    assert_same(conv, ("interval", {"every": 2048, "request_end": True}), sb=30 * CKPT)


@pytest.mark.parametrize("name", ["chat", "agentic", "mix"])
def test_synthetic_traces_with_output_blocks(name):
    t = workload(name, seed=3)
    assert t.out_blocks is not None and t.out_blocks.size
    ck = {"chat": 12, "agentic": 20, "mix": 30}[name]
    want = assert_same(t, "sglang", sb=ck * CKPT, kb=20_000 * KVB)
    assert want["new"].sum() > 0 and want["evicted_cum"][-1] > 0
    assert_same(t, ("interval", {"every": 256}), ub=ck * CKPT + 30_000 * KVB)
    assert_same(t, "sglang", outputs=False, cap=True, sb=ck * CKPT)


@pytest.mark.parametrize("seed", range(8))
def test_random_branching_traces_tight_budgets(seed):
    t = random_trace(seed, outputs=seed % 2 == 1)
    pol = [("sglang", {"grid": 16}), ("interval", {"every": 32})][seed % 2]
    for b in ({}, {"sb": 3 * CKPT}, {"kb": 40 * 16 * KVB}, {"sb": 5 * CKPT, "kb": 60 * 16 * KVB}):
        assert_same(t, pol, cap=seed % 3 == 0, **b)
    vllm = ("vllm", {"block_size": 32, "max_num_batched_tokens": 64})
    assert_same(t, vllm, ub=4 * CKPT + 500 * KVB)


def test_simulate_takes_the_fast_pass_and_equals_the_twin(conv):
    head = conv.head(3000)
    kw = dict(state_budget_bytes=50 * CKPT, kv_budget_bytes=200_000 * KVB, cap_lookup=True)
    a = sim.simulate(head, method="twin", **kw).summary()
    b = sim.simulate(head, method="fast", **kw).summary()
    prep = fast.prepare_trace(head)
    c = sim.simulate(prep, method="auto", **kw).summary()
    for k in a:
        if k != "elapsed_s":
            assert a[k] == b[k] == c[k], k


def test_what_the_fast_pass_does_not_cover(conv):
    head = conv.head(400)
    with pytest.raises(ValueError, match="method='fast' does not cover Marconi"):
        sim.simulate(head, "marconi", state_budget_bytes=20 * CKPT, method="fast")
    with pytest.raises(ValueError, match="method='fast' does not cover the inflight"):
        sim.simulate(head, schedule="inflight", method="fast")
    with pytest.raises(ValueError, match="per-path state cap"):
        sim.simulate(head, ("sglang", {"max_states_per_path": 2}), method="fast")
    # "auto" runs the twin for them: the same result as asking for the twin
    a = sim.simulate(head, "marconi", state_budget_bytes=20 * CKPT)
    b = sim.simulate(head, "marconi", state_budget_bytes=20 * CKPT, method="twin")
    assert np.array_equal(a.series.restore_at, b.series.restore_at)
    with pytest.raises(ValueError, match="method must be one of"):
        sim.simulate(head, method="quick")


def test_a_trace_breaking_the_chain_rule_runs_the_twin():
    # block 7 follows 1 in one request and 2 in another: ids do not name prefixes
    blocks = [1, 7, 8, 2, 7, 9, 1, 7]
    lens, offs = [48, 48, 32], [0, 3, 6, 8]
    z = [0] * 3
    t = make_trace("broken", 16, [0.0, 1.0, 2.0], lens, z, offs, blocks, [-1] * 3, z, ("r",))
    prep = fast.prepare_trace(t)
    assert not prep.chained
    with pytest.raises(ValueError, match="prepared: its block ids break the chain rule"):
        fast.replay(prep, checkpoint_bytes=CKPT, kv_bytes_per_token=KVB)
    with pytest.raises(ValueError, match="chain rule"):
        sim.simulate(t, ("sglang", {"grid": 16}), method="fast")
    r = sim.simulate(t, ("sglang", {"grid": 16}))  # auto: the twin
    assert r.series.token_match.tolist() == [0, 0, 32]
    pol = ("sglang", {"grid": 16})
    rep = fast.replay(prep, pol, checkpoint_bytes=CKPT, kv_bytes_per_token=KVB, method="auto")
    assert rep.token_match.tolist() == [0, 0, 32]


def test_replay_names_its_bad_arguments(conv):
    prep = fast.prepare_trace(conv.head(50))
    ok = dict(checkpoint_bytes=CKPT, kv_bytes_per_token=KVB)
    cases = [
        ({"checkpoint_bytes": 0}, "checkpoint_bytes"),
        ({"kv_bytes_per_token": -1}, "kv_bytes_per_token"),
        ({"state_budget_bytes": -5}, "state_budget_bytes"),
        ({"kv_budget_bytes": float("nan")}, "kv_budget_bytes"),
        ({"cap_lookup": 1}, "cap_lookup"),
        ({"progress": 3}, "progress"),
    ]
    for bad, name in cases:
        with pytest.raises(ValueError, match=name):
            fast.replay(prep, **{**ok, **bad})
    with pytest.raises(ValueError, match="prepared"):
        fast.replay(conv, **ok)
    with pytest.raises(ValueError, match="policy"):
        fast.replay(prep, "marconi", **ok)
    with pytest.raises(ValueError, match="trace"):
        fast.prepare_trace([1, 2])
    seen = []
    fast.replay(prep, progress=lambda d, n: seen.append((d, n)), **ok)
    assert seen == [(50, 50)]


def test_replay_method_is_checked_and_marconi_refused(conv):
    prep = fast.prepare_trace(conv.head(50))
    sizes = {"checkpoint_bytes": 1 << 20, "kv_bytes_per_token": 1 << 10}
    with pytest.raises(ValueError, match="method must be one of"):
        fast.replay(prep, "sglang", method="quick", **sizes)
    with pytest.raises(ValueError, match="Marconi needs simulate"):
        fast.replay(prep, "marconi", method="twin", **sizes)
    drafts = ("vllm", {"speculative_config": {"method": "mtp", "num_speculative_tokens": 2}})
    with pytest.raises(ValueError, match="does not cover"):
        fast.replay(prep, drafts, **sizes)
