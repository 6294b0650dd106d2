"""Every replica of a fleet is the lab's single server: the restore points and token matches a
replica gives equal ``kda_core.sim.simulate`` (sequential schedule, lookups of at most
``input - 1`` tokens, the same budgets) run on the sub-trace of the requests routed to it.
Checked for vLLM's rules (the Mooncake trace refined to 256-token pages, block 768) and
SGLang's, unlimited and under state / KV budgets, with evictions."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.fleet import simulate_fleet
from kda_core.fleet._simulate import _flops_fn
from kda_core.sim import checkpoint_bytes, costmodel, simulate
from kda_core.workloads import Trace, bundled_trace
from kda_core.workloads.traces import make_trace

CKPT = checkpoint_bytes("kimi-k3", 8)


def subtrace(t: Trace, idx: np.ndarray) -> Trace:
    """The requests ``idx`` of ``t``, in order."""
    rows = [t.blocks[t.offsets[i] : t.offsets[i + 1]] for i in idx]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    cols = (t.arrival_s[idx], t.input_len[idx], t.output_len[idx], offsets, np.concatenate(rows))
    return make_trace("sub", t.block_size, *cols, t.session[idx], t.kind[idx], t.kind_names)


CASES = [
    ("vllm", {}, "kv_events"),
    ("vllm", {"state_budget_bytes": 40 * CKPT}, "state_aware"),
    ("vllm", {"kv_budget_bytes": 3 * 10**9}, "sglang_cache_aware"),
    ("sglang", {"state_budget_bytes": 30 * CKPT}, "kv_events"),
    ("sglang", {"unified_budget_bytes": 8 * 10**9}, "round_robin"),
]


@pytest.mark.parametrize(("engine", "budgets", "router"), CASES)
def test_each_replica_is_the_single_server(engine, budgets, router):
    trace = bundled_trace("conversation").head(1500)
    res = simulate_fleet(trace, replicas=3, router=router, engine=engine, **budgets)
    fine = trace.refined(256) if engine == "vllm" else trace
    pol = ("vllm", {"block_size": 768}) if engine == "vllm" else "sglang"
    seen = 0
    for r in range(3):
        idx = np.flatnonzero(res.replica == r)
        sub = subtrace(fine, idx)
        one = simulate(sub, pol, cap_lookup=True, outputs=False, **budgets)
        assert np.array_equal(one.series.restore_at, res.cached[idx])
        assert np.array_equal(
            np.minimum(one.series.token_match, sub.input_len), res.token_match[idx]
        )
        seen += len(idx)
    assert seen == len(trace)
    assert res.cached.sum() > 0  # the comparison has hits to compare


def test_inlined_flops_equal_the_cost_model():
    spec = costmodel.cost_spec("kimi-k3")
    f = _flops_fn(spec)
    for a, b in [(0, 1), (0, 8191), (768, 5000), (4096, 4097)]:
        assert f(a, b) == pytest.approx(float(costmodel.prefill_flops(spec, a, b)), rel=1e-12)


def test_refine_keeps_the_prefix_structure():
    t = bundled_trace("conversation").head(200)
    fine = t.refined(256)
    assert fine.block_size == 256 and np.array_equal(fine.input_len, t.input_len)
    assert np.array_equal(np.diff(fine.offsets), -(-t.input_len // 256))
    # two requests share k whole 512-token blocks iff they share 2k 256-token pages
    for i, j in [(0, 1), (3, 40), (10, 11)]:
        a, b = t.block_ids(i), t.block_ids(j)
        k = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        fa, fb = fine.block_ids(i), fine.block_ids(j)
        m = next((n for n, (x, y) in enumerate(zip(fa, fb)) if x != y), min(len(fa), len(fb)))
        assert m == min(2 * k, len(fa), len(fb))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_replica_hashes_reach_the_tree_through_insert_prefix(engine):
    """No method of a replica's cache is replaced at run time (hooks are constructor
    arguments): the tree's KV payloads are the engine's block hashes of the key, recomputed
    here from the pages, because ``place`` hands them to ``insert_prefix``."""
    from kda_core.fleet._replica import block_hashes
    from kda_core.fleet._setup import check_args
    from kda_core.fleet._simulate import run

    opts = dict(replicas=2, router="kv_events", model="kimi-k3", tp=8, engine=engine)
    opts.update(weight=1.0, seed=0, engine_params=None, router_params=None, time_model=None)
    opts.update(
        oracle=False, budgets={f"{k}_budget_bytes": None for k in ("state", "kv", "unified")}
    )
    s = check_args(bundled_trace("conversation").head(60), opts)
    ppb = s.block_tokens // s.page
    checked = [0]

    def observe(i, reps, key):
        for rep in reps:
            patched = [k for k in getattr(rep.cache, "__dict__", {}) if hasattr(type(rep.cache), k)]
            assert patched == []
            m = rep.cache.match_prefix(key, touch=False)
            n = m.token_match // s.page
            if n == 0:
                continue
            got = [h for kv in rep.cache.read_kv(key, n * s.page) for h in kv.hashes]
            want = block_hashes(key[:n].tolist(), ppb, engine == "sglang")
            assert [h for h in got if h] == want[: n // ppb]
            assert all(h == 0 for j, h in enumerate(got) if (j + 1) % ppb)
            checked[0] += 1

    run(s, observe)
    assert checked[0] > 10
