from __future__ import annotations

import numpy as np
import pytest
from trace_checks import trace_stats

from kda_core import sim, sizing
from kda_core import workloads as W
from kda_core.cache import policy as policy_mod
from kda_core.sim import costmodel, simulator
from kda_core.workloads import _synthetic as S

GIB = 1 << 30


@pytest.fixture(scope="module")
def conv() -> W.Trace:
    return W.bundled_trace("conversation")


@pytest.fixture(scope="module")
def agent() -> W.Trace:
    return S.agentic(40, steps=10, keep_observations=3, branch_prob=0.3, block_size=64, seed=11)


def _full_block_ideal(trace: W.Trace) -> float:
    """Independent ideal: longest prefix of FULL blocks seen (as full blocks) before, with a set
    of block-prefix tuples (a checkpoint at every full-block boundary, no budget)."""
    seen: set[tuple[int, ...]] = set()
    hit = 0
    b = trace.block_size
    for i in range(len(trace)):
        n_full = int(trace.input_len[i]) // b
        ids = tuple(trace.block_ids(i)[:n_full].tolist())
        m = 0
        while m < n_full and ids[: m + 1] in seen:
            m += 1
        hit += m * b
        seen.update(ids[: j + 1] for j in range(n_full))
    return hit / int(trace.input_len.sum())


def test_every_block_unlimited_equals_the_ideal_prefix_hit_rate(conv: W.Trace) -> None:
    r = sim.simulate(conv, ("interval", {"every": 512}), None)
    ideal = _full_block_ideal(conv)
    assert r.state_hit_rate == pytest.approx(ideal, abs=1e-12)
    assert r.token_hit_rate == pytest.approx(ideal, abs=1e-12)
    assert r.replayed_tokens == 0
    # the trace's KV-only ceiling, 37.4 % (min(m * 512, L) over all blocks), differs only by
    # partial tails
    assert r.state_hit_rate == pytest.approx(0.374, abs=1e-3)
    assert abs(trace_stats(conv).ideal_token_hit_rate - r.state_hit_rate) < 5e-4
    assert r.checkpoints_stored == 170_899
    assert r.evictions == 0
    assert r.peak_state_bytes == 170_899 * r.state_bytes_per_checkpoint


def _naive_interval(trace: W.Trace, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force twin of an unlimited-budget interval simulation with sets of prefixes:
    a request stores checkpoints at multiples of ``every`` and KV up to the deepest one."""
    b = trace.block_size
    kv: set[tuple[int, ...]] = set()
    ck: set[tuple[int, ...]] = set()
    tms, ras = [], []
    for i in range(len(trace)):
        L = int(trace.input_len[i])
        ids = tuple(trace.block_ids(i).tolist())
        m = 0
        while m < len(ids) and ids[: m + 1] in kv:
            m += 1
        r = max((j for j in range(1, m + 1) if ids[:j] in ck), default=0)
        tms.append(min(m * b, L))
        ras.append(min(r * b, L))
        deepest = L // every * every // b
        kv.update(ids[:j] for j in range(1, deepest + 1))
        ck.update(ids[:j] for j in range(1, deepest + 1) if (j * b) % every == 0)
    return np.array(tms), np.array(ras)


@pytest.mark.parametrize("every", [64, 256, 1024])
def test_interval_agrees_with_brute_force(agent: W.Trace, every: int) -> None:
    r = sim.simulate(agent, ("interval", {"every": every}), None, outputs=False)
    tm, ra = _naive_interval(agent, every)
    assert np.array_equal(r.series.token_match, tm)
    assert np.array_equal(r.series.restore_at, ra)


def test_interval_on_real_trace_head_agrees_with_brute_force(conv: W.Trace) -> None:
    head = conv.head(1500)
    r = sim.simulate(head, ("interval", {"every": 2048}), None)
    tm, ra = _naive_interval(head, 2048)
    assert np.array_equal(r.series.token_match, tm)
    assert np.array_equal(r.series.restore_at, ra)


@pytest.mark.parametrize("K", [512, 1024, 2048])
def test_uniform_match_points_replay_half_interval(K: int) -> None:
    t = S.uniform_prefix(400, doc_tokens=65_536, block_size=16, seed=3)
    r = sim.simulate(t, ("interval", {"every": K}), None)
    assert abs(r.mean_replay_per_hit - K / 2) <= 0.10 * K / 2
    # discrete expectation (K - block) / 2 is closer still
    assert abs(r.mean_replay_per_hit - (K - 16) / 2) <= 0.08 * K / 2


def test_state_hit_never_exceeds_token_hit(conv: W.Trace, agent: W.Trace) -> None:
    head = conv.head(3000)
    runs = [
        (head, "sglang", 8 * GIB),
        (head, "marconi", 4 * GIB),
        (head, ("vllm", {"mode": "align"}), 16 * GIB),
        (agent, ("interval", {"every": 256}), None),
        (agent, "marconi", 2 * GIB),
        (agent, ("vllm", {"mode": "all"}), 1 * GIB),
    ]
    for tr, pol, b in runs:
        r = sim.simulate(tr, pol, b)
        assert np.all(r.series.restore_at <= r.series.token_match)
        assert np.all(r.series.token_match <= r.series.input_len)
        assert r.state_hit_rate <= r.token_hit_rate
        if b is not None:
            assert r.peak_state_bytes <= b


BUDGETS = (2 * GIB, 8 * GIB, 32 * GIB, 128 * GIB, None)


@pytest.mark.slow
@pytest.mark.parametrize(
    "pol", ["sglang", ("interval", {"every": 4096}), ("vllm", {"mode": "align"})]
)
def test_more_budget_never_lowers_lru_hit_rate(conv: W.Trace, pol: object) -> None:
    rates = [sim.simulate(conv, pol, b).state_hit_rate for b in BUDGETS]
    assert all(a <= b + 1e-12 for a, b in zip(rates, rates[1:])), rates
    assert rates[-1] > rates[0]


@pytest.mark.slow
def test_marconi_vs_every_block(conv: W.Trace) -> None:
    dense = sim.simulate(conv, ("interval", {"every": 512}), None)
    marc = sim.simulate(conv, "marconi", None)
    # many fewer checkpoints (10,237 vs 170,899, docs/performance.md) at nearly the same hit rate
    assert marc.checkpoints_stored == 10_237
    assert marc.checkpoints_stored * 10 < dense.checkpoints_stored
    assert marc.state_hit_rate == pytest.approx(0.359, abs=1e-3)
    assert dense.state_hit_rate - marc.state_hit_rate < 0.02
    # and it beats dense placement at a small budget
    small = 8 * GIB
    dense_s = sim.simulate(conv, ("interval", {"every": 512}), small)
    marc_s = sim.simulate(conv, "marconi", small)
    assert marc_s.state_hit_rate > 2 * dense_s.state_hit_rate


def test_deterministic(agent: W.Trace) -> None:
    a = sim.simulate(agent, "marconi", 1 * GIB).summary()
    b = sim.simulate(agent, "marconi", 1 * GIB).summary()
    a.pop("elapsed_s")
    b.pop("elapsed_s")
    assert a == b
    t1 = S.mix(chat_sessions=20, agent_sessions=5, documents=5, seed=9)
    t2 = S.mix(chat_sessions=20, agent_sessions=5, documents=5, seed=9)
    r1 = sim.simulate(t1, "sglang", 2 * GIB)
    r2 = sim.simulate(t2, "sglang", 2 * GIB)
    assert np.array_equal(r1.series.restore_at, r2.series.restore_at)
    assert r1.flops_saved == r2.flops_saved


@pytest.mark.parametrize("pol", ["sglang", "marconi", "vllm", ("interval", {"every": 512})])
def test_budget_zero_no_hits_no_crash(conv: W.Trace, pol: object) -> None:
    r = sim.simulate(conv.head(500), pol, 0)
    assert r.state_hit_rate == 0.0 and r.token_hit_rate == 0.0
    assert r.checkpoints_stored == 0 and r.peak_state_bytes == 0
    assert r.checkpoints_dropped > 0
    assert r.flops_saved == 0.0
    for kw in ({"kv_budget_bytes": 0}, {"unified_budget_bytes": 0}):
        r = sim.simulate(conv.head(300), pol, None, **kw)
        assert r.state_hit_rate == 0.0 and r.token_hit_rate == 0.0
        assert r.final_kv_bytes == 0


def test_integrity_under_all_budgets(agent: W.Trace) -> None:
    small = agent.head(150)
    for pol in ("sglang", "marconi", "vllm", ("interval", {"every": 128})):
        sim.simulate(small, pol, 1 * GIB, check_integrity=True)
        sim.simulate(small, pol, None, kv_budget_bytes=40_000 * 27_648, check_integrity=True)
        sim.simulate(small, pol, None, unified_budget_bytes=2 * GIB, check_integrity=True)


def test_kv_and_unified_budgets_hold(agent: W.Trace) -> None:
    kvb = 20_000 * 27_648
    unl = sim.simulate(agent, "sglang", None)
    assert unl.peak_kv_bytes > 10 * kvb  # the budget binds (by a wide margin)
    r = sim.simulate(agent, "sglang", None, kv_budget_bytes=kvb)
    # the peak is sampled right after each insert (before any clean-up eviction): it stays
    # under the budget because leaves are evicted to make room BEFORE the insert
    assert np.all(r.series.kv_peak_bytes <= kvb) and r.peak_kv_bytes <= kvb
    assert r.peak_kv_bytes == int(r.series.kv_peak_bytes.max())
    assert np.all(r.series.kv_peak_bytes >= r.series.kv_bytes)
    assert r.evicted_kv_tokens > 0 and r.state_hit_rate > 0
    # a budget below one request's own KV: the request must still hold its KV while inserting
    # (the peak exceeds the budget), and the tree is cut back to the budget afterwards
    small = int(agent.input_len.max()) // 2 * 27_648
    r2 = sim.simulate(agent, "sglang", None, kv_budget_bytes=small)
    assert r2.peak_kv_bytes > small
    assert np.all(r2.series.kv_bytes <= small)
    ub = 3 * GIB
    r = sim.simulate(agent, "marconi", None, unified_budget_bytes=ub)
    assert np.all(r.series.state_bytes + r.series.kv_bytes <= ub)
    assert r.state_hit_rate > 0


def test_sizes_flops_and_ttft(agent: W.Trace) -> None:
    r = sim.simulate(agent, "sglang", None)
    spec = sizing.preset("kimi-k3")
    assert r.state_bytes_per_checkpoint == sizing.kda_state_bytes(
        spec, 8
    ) + sizing.conv_state_bytes(spec, 8)
    assert r.state_bytes_per_checkpoint == 29_039_616
    assert r.kv_bytes_per_token == 27_648
    s = r.series
    L = s.input_len
    full = costmodel.prefill_flops("kimi-k3", np.zeros_like(L), L)
    assert r.flops_total == pytest.approx(float(np.sum(full)), rel=1e-12)
    assert r.flops_saved == pytest.approx(
        float(np.sum(costmodel.prefill_flops("kimi-k3", np.zeros_like(L), s.restore_at))),
        rel=1e-9,
    )
    assert r.flops_spent + r.flops_saved == pytest.approx(r.flops_total, rel=1e-12)
    assert r.prefill_tokens_saved == int(s.restore_at.sum())
    assert r.replayed_tokens == int((s.token_match - s.restore_at).sum())
    tm = costmodel.TimeModel()
    assert r.ttft_nocache_p50_s == pytest.approx(float(np.percentile(tm.seconds(full), 50)))
    assert r.ttft_p50_s <= r.ttft_nocache_p50_s
    q = sim.simulate(agent, "sglang", None, servers=1, time_model=costmodel.TimeModel(1e15))
    assert np.all(q.series.ttft_s >= q.series.flops / 1e15 - 1e-12)
    # numpy integers are integers (e.g. from a sweep array)
    q2 = sim.simulate(agent, "sglang", None, servers=np.int64(2), time_model=tm)
    q3 = sim.simulate(agent, "sglang", None, servers=2, time_model=tm)
    np.testing.assert_array_equal(q2.series.ttft_s, q3.series.ttft_s)


def test_marconi_efficiency_agrees_with_costmodel() -> None:
    fn = sim.simulator._marconi_efficiency_fn("kimi-k3", 27_648)
    L = np.array([512.0, 4096.0, 70_000.0])
    P = np.array([0.0, 1024.0, 69_632.0])
    nb = np.full(3, 29_039_616.0)
    want = costmodel.prefill_flops("kimi-k3", P, L) / (nb + 27_648 * L)
    assert np.allclose(fn(L, P, nb), want, rtol=1e-13)


def test_policy_objects_are_copied(agent: W.Trace) -> None:
    p = policy_mod.make("marconi", alpha=0.5)
    a = sim.simulate(agent, p, 1 * GIB)
    b = sim.simulate(agent, p, 1 * GIB)
    assert a.state_hit_rate == b.state_hit_rate
    assert a.policy == "marconi" and a.policy_params["alpha"] == 0.5


def test_marconi_auto_alpha_tunes(agent: W.Trace) -> None:
    r = sim.simulate(agent, ("marconi", {"alpha": "auto", "bootstrap": 2}), 1 * GIB)
    assert 0 <= r.state_hit_rate <= r.token_hit_rate
    assert r.evictions > 0 and r.policy_params["alpha"] == "auto"
    assert r.policy_params["alpha_value"] in policy_mod.MarconiPolicy().alpha_grid


def test_marconi_n0_counts_the_request_that_first_evicts(agent: W.Trace) -> None:
    # Marconi's tuning (docs/policies.md): N0 = requests served when the first eviction
    # happens, the evicting request included (the simulator counts a request on arrival, as the
    # engine does)
    pol = policy_mod.make("marconi", alpha=1.0)
    ckpt = sim.checkpoint_bytes("kimi-k3", 8, "bfloat16", "bfloat16")
    spec, tm = costmodel.cost_spec("kimi-k3"), costmodel.TimeModel()
    setup = simulator._Setup(
        agent, pol, 3 * ckpt, None, None, ckpt, 27_648, spec, tm, None, "sequential", True
    )
    out = simulator._run(setup, pol, simulator.Timing(spec, tm, None), None, False)
    first = int(np.flatnonzero(out["evicted_cum"] > 0)[0])
    assert first > 0 and pol._first_eviction == first + 1
    assert pol._requests == len(agent)


def test_progress_callback(agent: W.Trace) -> None:
    calls: list[tuple[int, int]] = []
    sim.simulate(agent, "sglang", None, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (len(agent), len(agent))
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))


def test_bad_input(agent: W.Trace) -> None:
    with pytest.raises(ValueError, match="policy"):
        sim.simulate(agent, "lru-ish")
    with pytest.raises(ValueError, match="policy"):
        sim.simulate(agent, 42)
    with pytest.raises(ValueError, match="state_budget_bytes"):
        sim.simulate(agent, "sglang", -1)
    with pytest.raises(ValueError, match="kv_budget_bytes"):
        sim.simulate(agent, "sglang", None, kv_budget_bytes=float("nan"))
    with pytest.raises(ValueError, match="trace"):
        sim.simulate([1, 2, 3])
    with pytest.raises(ValueError, match="model"):
        sim.simulate(agent, "sglang", None, model="gpt-4")
    with pytest.raises(ValueError, match="policy: every"):
        sim.simulate(agent, ("interval", {"every": 0}))
    for bad in (0, 5000, True, np.bool_(True), 2.0, "2"):
        with pytest.raises(ValueError, match="servers"):
            sim.simulate(agent, "sglang", None, servers=bad)  # type: ignore[arg-type]


def test_output_blocks_make_the_last_decoded_state_hit() -> None:
    chat = W.workload("chat", n_sessions=60, turns=6, block_size=64, seed=4)
    with_out = sim.simulate(chat, "marconi", None)
    no_out = sim.simulate(chat, "marconi", None, outputs=False)
    # Marconi's input-and-output reuse: the next turn restores after the previous answer
    assert with_out.state_hit_rate > no_out.state_hit_rate + 0.05
    assert with_out.state_hit_rate <= with_out.token_hit_rate
    # the decode-time checkpoints lie beyond the input
    assert with_out.peak_kv_bytes > no_out.peak_kv_bytes
