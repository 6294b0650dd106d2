"""Engine.serve: every request equals its own uncached single-request run, whatever the mix.

The reference for a request is ``TinyHybrid.generate(prompt, n)`` on a fresh state (no cache,
no batching, no scheduler): tokens equal and logits within 1e-9. Workloads share prefixes so
that cache hits, in-flight checkpoints, evictions and retractions all happen.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda_core import sizing
from kda_core.model import TinyHybrid, encode
from kda_core.serve._args import DEFAULT_STATE_SLOTS
from kda_core.serve._slots import STRATEGIES
from kda_core.serve.engine import Engine, Request

MODEL = TinyHybrid()
_REF: dict[tuple, tuple[list[int], np.ndarray]] = {}


def reference(prompt, n: int) -> tuple[list[int], np.ndarray]:
    ids = tuple(encode(prompt) if isinstance(prompt, str) else prompt)
    if (ids, n) not in _REF:
        _REF[(ids, n)] = MODEL.generate(list(ids), n)
    return _REF[(ids, n)]


def assert_exact(rep, reqs) -> None:
    for i, (r, rq) in enumerate(zip(rep.reports, reqs)):
        if r is None:
            assert i in rep.rejected
            continue
        toks, logits = reference(rq.prompt, rq.max_new_tokens)
        assert r.tokens == toks, f"request {i}"
        assert r.logits.shape == logits.shape
        np.testing.assert_allclose(r.logits, logits, atol=1e-9, rtol=0, err_msg=f"request {i}")


def assert_rows_consistent(e: Engine, rep) -> None:
    for row in rep.steps:
        assert len(row.running) <= rep.max_running
        assert len(set(row.running)) == len(row.running)
        if e.state_slots is not None and not e.int8:  # one pool: the kinds add up
            assert row.slots_running + row.slots_cached + row.slots_free == e.state_slots
    e.check_integrity()
    assert e.cache.stats().kv_protected == 0  # every lock released


SYSTEM = "You are a helpful assistant. Answer briefly. "
PROMPTS = [
    SYSTEM + "What is KDA?",
    SYSTEM + "What is a radix tree?",
    SYSTEM + "What is KDA? And MLA?",
    "short",
    "x",
    SYSTEM * 3 + "long shared context",
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("budget", [7, 64, 1000])
def test_serve_equals_uncached_runs(strategy, budget):
    reqs = [Request(p, 3 + i % 5, arrival=i % 3) for i, p in enumerate(PROMPTS * 2)]
    e = Engine(model=MODEL, strategy=strategy, state_slots=30, chunk_size=16)
    rep = e.serve(reqs, max_batch_tokens=budget)
    assert not rep.rejected and all(r is not None for r in rep.reports)
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)
    assert sum(r.restore_at > 0 for r in rep.reports) >= 3  # the shared system prompt hits
    assert rep.peak_running > 1


def test_serve_one_equals_generate_and_generate_still_works():
    e1 = Engine(model=MODEL, state_slots=20)
    e2 = Engine(model=MODEL, state_slots=20)
    for p, n in [(SYSTEM + "one", 6), (SYSTEM + "two", 4)]:
        a = e1.serve([Request(p, n)]).reports[0]
        b = e2.generate(p, n)
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.logits, b.logits, atol=1e-9, rtol=0)
        assert (a.token_match, a.restore_at, a.prefilled) == (b.token_match, b.restore_at,
                                                              b.prefilled)  # fmt: skip
    e1.check_integrity()
    e2.check_integrity()


@pytest.mark.parametrize("overlap", [False, True])
def test_inflight_checkpoint_serves_a_later_request(overlap):
    """B arrives while A (a long prompt, 16-token chunks one per step) is still prefilling and
    restores from A's in-flight checkpoint: A's prefix is in the tree before A finishes.
    Without overlap A's checkpoints at 16 and 32 (steps 0 and 1) are in the tree when B is
    admitted at step 2; with overlap (SGLang ``scheduler.py`` ``event_loop_overlap``: step N is
    post-processed after step N+1 is launched) the one at 32 is inserted only after step 2's
    forward, so B restores at 16."""
    long = SYSTEM * 4
    reqs = [Request(long + "A", 4, arrival=0), Request(long[:64] + "B", 4, arrival=2)]
    e = Engine(model=MODEL, state_slots=20, chunk_size=16, overlap=overlap)
    rep = e.serve(reqs, max_batch_tokens=24)  # A's 16-token chunk leaves B 8 tokens a step
    a, b = rep.reports
    admitted_b = next(row.step for row in rep.steps if 1 in row.admitted)
    finished_a = next(row.step for row in rep.steps if 0 in row.finished)
    assert admitted_b < finished_a
    assert rep.steps[admitted_b].phases[0] == "prefill"  # A was still in its prompt
    if overlap:
        assert b.restore_at == 16
    else:
        assert b.restore_at >= 32 and b.restore_at % 16 == 0
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)


def test_retraction_under_kv_pressure_is_exact():
    reqs = [Request(f"request {i} " + "z" * (i % 4), 40, arrival=0) for i in range(6)]
    totals = [len(encode(r.prompt)) + 40 - 1 for r in reqs]
    e = Engine(model=MODEL, state_slots=40, chunk_size=16)
    rep = e.serve(reqs, kv_tokens=max(totals) + 30)
    assert rep.retractions > 0
    assert any(row.retracted for row in rep.steps)
    retracted = {i for row in rep.steps for i in row.retracted}
    # SGLang's victim: fewest outputs, then the longest prompt
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)
    assert all(rep.reports[i] is not None for i in retracted)


def test_never_fitting_request_is_rejected_others_served():
    reqs = [Request("a" * 50, 20), Request("ok", 5), Request("fine too", 3)]
    e = Engine(model=MODEL, state_slots=20)
    rep = e.serve(reqs, kv_tokens=40)
    assert rep.reports[0] is None and set(rep.rejected) == {0}
    msg = rep.rejected[0]
    assert "exceeds the KV cache capacity of 40 tokens" in msg
    assert "50 tokens from the input messages and 20 tokens for the completion" in msg
    assert "(its KV needs 69 of them: every token but the last)" in msg and "cached" not in msg
    assert_exact(rep, reqs)
    assert all(row.phases[0] == "rejected" for row in rep.steps)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_live_concurrency_equals_planner(strategy):
    """Many long-decoding requests at once: the scheduler runs exactly as many as
    sizing.max_running_requests allows for the shared pool, and says why (SGLang's message)."""
    N = 23
    cap = sizing.max_running_requests(N, strategy)
    reqs = [Request(f"q{i}", 12) for i in range(cap + 4)]
    e = Engine(model=MODEL, strategy=strategy, state_slots=N, chunk_size=16)
    rep = e.serve(reqs, max_batch_tokens=512)
    assert rep.max_running == cap == max(len(row.running) for row in rep.steps)
    assert rep.peak_running == cap
    assert rep.capping_message == sizing.capping_message(N, strategy)
    assert f"capped to {cap}" in rep.capping_message
    assert_exact(rep, reqs)
    low = e.serve(reqs, max_running_requests=2, max_batch_tokens=512)
    assert low.capping_message is None and low.peak_running == 2


def test_int8_checkpoint_pool_is_separate_and_twice_the_active_pool():
    e = Engine(model=MODEL, state_slots=10, int8_checkpoints=True)
    assert e.pools.active.capacity == 10 and e.pools.checkpoints.capacity == 20
    reqs = [Request(SYSTEM + "q1", 3), Request(SYSTEM + "q2", 3, arrival=3)]
    rep = e.serve(reqs)
    assert rep.steps[-1].checkpoint_free is not None
    assert rep.reports[1].restore_at > 0 and rep.reports[1].restore_error[0] > 0
    toks, logits = reference(reqs[0].prompt, 3)  # no restore: exact
    np.testing.assert_allclose(rep.reports[0].logits, logits, atol=1e-9, rtol=0)
    e.check_integrity()
    e2 = Engine(model=MODEL, state_slots=10, int8_checkpoints=True, checkpoint_slots=7)
    assert e2.pools.checkpoints.capacity == 7


def test_bad_input():
    with pytest.raises(ValueError, match="strategy must be one of"):
        Engine(model=MODEL, strategy="lazy")
    with pytest.raises(ValueError, match=r"state_slots must be in \[5, 4096\]"):
        Engine(model=MODEL, state_slots=4)  # extra_buffer reserves 5 per request
    with pytest.raises(ValueError, match=r"state_slots must be in \[3, 4096\]"):
        Engine(model=MODEL, state_slots=2, strategy="no_buffer")
    with pytest.raises(ValueError, match=r"checkpoint_slots must be in \[1, 4096\]"):
        Engine(model=MODEL, state_slots=10, checkpoint_slots=0)
    e = Engine(model=MODEL, state_slots=10)
    with pytest.raises(ValueError, match=r"requests\[1\].arrival must be in \[0, "):
        e.serve([Request("a", 2), Request("b", 2, arrival=-1)])
    with pytest.raises(ValueError, match=r"requests\[0\].max_new_tokens must be"):
        e.serve([Request("a", 0)])
    with pytest.raises(ValueError, match="requests must be a sequence"):
        e.serve(Request("a", 2))
    with pytest.raises(ValueError, match=r"max_batch_tokens must be in \[1, 65536\]"):
        e.serve([Request("a", 2)], max_batch_tokens=0)
    with pytest.raises(ValueError, match=r"kv_tokens must be in \[1, "):
        e.serve([Request("a", 2)], kv_tokens=0)
    with pytest.raises(ValueError, match=r"requests\[0\] must be a Request"):
        e.serve([("a", 2)])
    e.check_integrity()


ALPHABET = "abc"


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 6))
    base = draw(st.text(ALPHABET, min_size=0, max_size=40))
    reqs = []
    for _ in range(n):
        cut = draw(st.integers(0, len(base)))
        tail = draw(st.text(ALPHABET, min_size=1, max_size=12))
        reqs.append(Request(base[:cut] + tail, draw(st.integers(1, 12)), draw(st.integers(0, 6))))
    return reqs


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workloads(),
    st.sampled_from(STRATEGIES),
    st.sampled_from([16, 32]),
    st.integers(1, 48),
    st.integers(0, 20),
    st.one_of(st.none(), st.integers(-8, 24)),
)
def test_serve_hypothesis(reqs, strategy, chunk, budget, extra_slots, kv_slack):
    """kv_slack: the KV pool is the longest request's need plus this (negative: it is
    rejected; small: running requests compete and get retracted)."""
    need = max(len(encode(r.prompt)) + r.max_new_tokens - 1 for r in reqs)
    kv = None if kv_slack is None else max(need + kv_slack, 1)
    spr = sizing.slots_per_request(strategy)
    e = Engine(model=MODEL, strategy=strategy, state_slots=spr + extra_slots, chunk_size=chunk)
    rep = e.serve(reqs, max_batch_tokens=budget, kv_tokens=kv)
    for i, rq in enumerate(reqs):
        total = len(encode(rq.prompt)) + rq.max_new_tokens - 1
        assert (i in rep.rejected) == (kv is not None and total > kv)
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)
    # a second serve on the warm engine is exact too (hits on what the first one cached)
    rep2 = e.serve(reqs, max_batch_tokens=budget, kv_tokens=kv)
    assert_exact(rep2, reqs)
    assert_rows_consistent(e, rep2)


def test_retraction_victim_is_sglangs(monkeypatch):
    """SGLang python/sglang/srt/managers/schedule_batch.py, ScheduleBatch.retract_decode, sorts
    by (len(output_ids), -len(origin_input_ids)) descending and pops the last: the victim has
    the fewest outputs, then the longest prompt."""
    from kda_core.serve import _scheduler as scheduler

    seen = []
    original = scheduler.Scheduler.retract_victim

    def spy(self):
        r = original(self)
        seen.append(((len(r.gen), r.P), [(len(x.gen), x.P) for x in self.running]))
        return r

    monkeypatch.setattr(scheduler.Scheduler, "retract_victim", spy)
    reqs = [Request("p" * (5 + 3 * i), 30, arrival=i) for i in range(6)]
    e = Engine(model=MODEL, state_slots=40, chunk_size=16)
    rep = e.serve(reqs, kv_tokens=90)
    assert seen and rep.retractions == len(seen)
    for (n_out, P), pool in seen:
        assert len(pool) >= 2  # at least one request stays
        assert (n_out, -P) == min((n, -p) for n, p in pool)
    assert_exact(rep, reqs)


@pytest.mark.parametrize("cache", [True, False])
def test_default_engine_batches_and_cache_off(cache):
    """``Engine()`` with defaults batches: its one shared pool of ``DEFAULT_STATE_SLOTS`` runs
    the requests concurrently; with cache=False nothing is cached. Both exact."""
    reqs = [Request(SYSTEM + f"q{i}", 4, arrival=i % 2) for i in range(4)]
    e = Engine(model=MODEL, cache=cache)
    rep = e.serve(reqs)
    per_request = 5 if cache else 1  # without the radix cache SGLang reserves one slot each
    assert e.state_slots == DEFAULT_STATE_SLOTS
    assert rep.max_running == DEFAULT_STATE_SLOTS // per_request
    assert rep.peak_running == 4 and f"capped to {rep.max_running}" in rep.capping_message
    assert_exact(rep, reqs)
    e.check_integrity()
    e2 = Engine(model=MODEL, cache=cache, state_slots=30)
    rep2 = e2.serve(reqs, kv_tokens=200)
    assert rep2.peak_running > 1
    assert_exact(rep2, reqs)
    if not cache:
        assert e2.cache.n_states == 0 and all(r.restore_at == 0 for r in rep2.reports)
    assert_rows_consistent(e2, rep2)


def test_serve_jumps_to_the_next_arrival():
    """Steps where nothing runs and nothing has arrived get no row: the scheduler jumps to the
    next arrival (a late request costs its own steps, not one row per idle step)."""
    reqs = [Request("first", 2), Request("late", 2, arrival=100_000)]
    e = Engine(model=MODEL, state_slots=20)
    rep = e.serve(reqs)
    assert_exact(rep, reqs)
    late = [row for row in rep.steps if 1 in row.running]
    assert late and late[0].step == 100_000 and 1 in late[0].admitted
    assert len(rep.steps) <= 8
    assert all(row.running for row in rep.steps)
    assert [row.step for row in rep.steps] == sorted({row.step for row in rep.steps})
