"""Overlap scheduling in Engine.serve: ping-pong track slots, the planner's cap, the hazard.

SGLang sizes the ping-pong ring by the scheduler mode (``python/sglang/srt/mem_cache/
memory_pool.py`` ``HybridReqToTokenPool.__init__``: ``mamba_ping_pong_track_buffer_size = 2 if
enable_overlap_schedule else 1``) and reserves 3 + 2 slots per extra_buffer request with overlap,
3 + 1 without (``model_runner_kv_cache_mixin.py`` ``_calculate_mamba_ratio``; here
``sizing.slots_per_request``). With overlap (``python/sglang/srt/managers/scheduler.py``
``Scheduler.event_loop_overlap``) step N's result is processed after step N+1 is launched, so a
state tracked at N is read while N+1 may write the next track slot: it must be the other one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda_core import sizing
from kda_core.model import TinyHybrid, encode
from kda_core.serve._pools import PingPong
from kda_core.serve._slots import STRATEGIES, PoolError
from kda_core.serve.engine import Engine, Request

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "
# SGLang refuses no_buffer with overlap and extra_buffer_lazy without (test_serve_strategy.py)
MODES = [
    (s, o)
    for s in STRATEGIES
    for o in (True, False)
    if (s, o) not in (("extra_buffer_lazy", False), ("no_buffer", True))
]


def assert_exact(rep, reqs) -> None:
    for i, (r, rq) in enumerate(zip(rep.reports, reqs)):
        toks, logits = MODEL.generate(encode(rq.prompt), rq.max_new_tokens)
        assert r.tokens == toks, f"request {i}"
        np.testing.assert_allclose(r.logits, logits, atol=1e-9, rtol=0, err_msg=f"request {i}")


@pytest.mark.parametrize("strategy, overlap", MODES)
def test_live_concurrency_equals_planner_with_and_without_overlap(strategy, overlap):
    N = 23
    cap = sizing.max_running_requests(N, strategy, overlap)
    assert cap == N // {"no_buffer": 3, "extra_buffer": 5 if overlap else 4}.get(strategy, 4)
    reqs = [Request(f"q{i}", 12) for i in range(cap + 4)]
    e = Engine(model=MODEL, strategy=strategy, state_slots=N, chunk_size=16, overlap=overlap)
    rep = e.serve(reqs, max_batch_tokens=512)
    assert rep.max_running == cap == rep.peak_running
    assert cap == max(len(row.running) for row in rep.steps)
    assert rep.capping_message == sizing.capping_message(N, strategy, overlap)
    assert_exact(rep, reqs)
    e.check_integrity()


@pytest.mark.parametrize("overlap, tracks", [(True, 2), (False, 1)])
def test_extra_buffer_opens_one_active_and_ring_track_slots(overlap, tracks):
    e = Engine(model=MODEL, state_slots=20, overlap=overlap)
    req = e.pools.pingpong.open("r")
    assert len(req.track) == tracks and e.pools.active.n_used == 1 + tracks
    e.pools.pingpong.close(req)
    held = 1 + tracks  # the reservation is the base 3 + the ring (sizing)
    assert sizing.slots_per_request("extra_buffer", overlap) == 3 + tracks
    assert sizing.slots_held_per_request("extra_buffer", overlap) == held


def test_reservation_bounds_and_lazy_needs_overlap():
    Engine(model=MODEL, state_slots=4, overlap=False)  # 3 + 1
    with pytest.raises(ValueError, match=r"state_slots must be in \[5, 4096\]"):
        Engine(model=MODEL, state_slots=4)  # 3 + 2 with overlap
    with pytest.raises(ValueError, match="requires overlap=True"):
        Engine(model=MODEL, strategy="extra_buffer_lazy", overlap=False)
    with pytest.raises(ValueError, match="overlap must be a bool"):
        Engine(model=MODEL, overlap=1)


def test_busy_track_slot_is_never_written():
    e = Engine(model=MODEL, state_slots=20)
    pp: PingPong = e.pools.pingpong
    req = pp.open("r")
    first = pp.track(req, 16)
    pp.busy.add(first)  # its state awaits the previous step's post-processing
    assert pp.track(req, 32) != first  # the ring of 2 writes the other slot
    with pytest.raises(PoolError, match="yet to read it"):
        pp.track(req, 48)  # back at the busy one
    pp.close(req)
    assert not pp.busy


def test_overlap_with_one_track_slot_would_overwrite_an_unread_state():
    """Why the second slot: chunked prefill tracks a checkpoint every step (grid 16 = chunk);
    with overlap and a ring of 1 the next step's write hits the slot still to be read."""
    reqs = [Request(SYSTEM * 2, 3)]
    ok = Engine(model=MODEL, state_slots=20, chunk_size=16)
    assert_exact(ok.serve(reqs), reqs)
    assert ok.stats().tree_states >= 5  # one per 16-token chunk, all read after the next step
    bad = Engine(model=MODEL, state_slots=20, chunk_size=16)
    bad.pools.pingpong.ring = 1
    with pytest.raises(PoolError, match="ping-pong ring of 1"):
        bad.serve(reqs)
    assert bad.pools.active.n_used == 0  # released on the way out
    no_overlap = Engine(model=MODEL, state_slots=20, chunk_size=16, overlap=False)
    rep = no_overlap.serve(reqs)  # one slot is enough: each step is post-processed at once
    assert_exact(rep, reqs)
    assert no_overlap.stats().tree_states == ok.stats().tree_states


@st.composite
def shared_prefix_workloads(draw):
    base = draw(st.text("ab", min_size=0, max_size=48))
    reqs = []
    for _ in range(draw(st.integers(1, 5))):
        cut = draw(st.integers(0, len(base)))
        tail = draw(st.text("ab", min_size=1, max_size=8))
        reqs.append(Request(base[:cut] + tail, draw(st.integers(1, 8)), draw(st.integers(0, 4))))
    return reqs


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shared_prefix_workloads(),
    st.sampled_from(MODES),
    st.integers(1, 40),
    st.integers(0, 12),
)
def test_serve_exact_in_every_mode(reqs, mode, budget, extra_slots):
    """Exactness holds with overlap on and off (in-flight checkpoints one step late or not)."""
    strategy, overlap = mode
    spr = sizing.slots_per_request(strategy, overlap)
    e = Engine(
        model=MODEL, strategy=strategy, state_slots=spr + extra_slots, chunk_size=16,
        overlap=overlap,
    )  # fmt: skip
    rep = e.serve(reqs, max_batch_tokens=budget)
    assert_exact(rep, reqs)
    assert rep.peak_running <= sizing.max_running_requests(spr + extra_slots, strategy, overlap)
    e.check_integrity()
    assert not e.pools.pingpong.busy


def test_retraction_drops_the_pending_post_processing(monkeypatch):
    """With overlap, a request retracted before its last step's result is processed inserts
    nothing: SGLang retracts in ``get_next_batch_to_run`` before ``pop_and_process`` of the
    last batch, whose result skips the retracted request (``batch_result_processor.py``
    ``process_batch_result_prefill``: ``req.is_retracted``: no ``checkpoint_kv_cache``)."""
    from kda_core.serve._lifecycle import Lifecycle

    seen = []
    retract = Lifecycle.retract

    def watched(self, r):
        pending = [pos for q, _, pos in self.deferred + self.queue if q is r]
        before = self.cache.n_states
        retract(self, r)
        seen.append((pending, before, self.cache.n_states))

    monkeypatch.setattr(Lifecycle, "retract", watched)
    reqs = [Request("ab" * 22, 19, 1), Request("ab" * 30, 13, 3)]
    e = Engine(model=MODEL, state_slots=40, chunk_size=16, strategy="extra_buffer", overlap=True)
    rep = e.serve(reqs, kv_tokens=73, max_batch_tokens=22)
    assert any(pending for pending, _, _ in seen)  # a tracked state awaited post-processing
    for _, before, after in seen:
        assert after == before  # the retraction put nothing into the tree
    assert_exact(rep, reqs)
    e.check_integrity()
