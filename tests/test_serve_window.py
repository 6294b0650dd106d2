"""The runner's deferred state writes (``model._window``) inside real serves.

Long decodes (windows fill), planned checkpoints inside decode, arrivals that change the batch
mid-window, retractions under a small pool: every request equals its own uncached run (atol
1e-9), and no code outside the runner ever reads or rebinds a slot whose state has steps
pending (the guard wraps the active pool's accessors for the whole serve).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda_core.model import encode
from kda_core.model._window import DEFER_STEPS
from kda_core.serve import _loop as loop
from kda_core.serve._lifecycle import Lifecycle
from kda_core.serve._runner import Runner
from kda_core.serve._slots import STRATEGIES, ActivePool
from kda_core.serve.engine import Engine, Request
from tests.test_serve import MODEL, SYSTEM, assert_exact, assert_rows_consistent


class _Watch:
    """Runners made during a serve, and the most steps any of them had pending."""

    def __init__(self) -> None:
        self.runners: list[Runner] = []
        self.max_pending = 0
        self.pending_steps = 0
        self.retracted_pending: list[int] = []  # runner.pending at each retraction


@pytest.fixture
def watch(monkeypatch):
    w = _Watch()

    class Watched(Runner):
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            w.runners.append(self)

        def run(self, batch):
            out = super().run(batch)
            w.max_pending = max(w.max_pending, self.pending)
            w.pending_steps += self.pending > 0
            return out

    monkeypatch.setattr(loop, "Runner", Watched)
    retract = Lifecycle.retract

    def watched_retract(self, r):
        w.retracted_pending.append(w.runners[-1].pending)
        return retract(self, r)

    monkeypatch.setattr(Lifecycle, "retract", watched_retract)

    def guarded(name):
        orig = getattr(ActivePool, name)

        def check(self, slot, *a, **k):
            caller = sys._getframe(1).f_globals.get("__name__")
            if caller != "kda_core.serve._runner":
                for r in w.runners:
                    b = r._bound
                    if r.pending and b is not None and slot in b.slots and self is r.pool:
                        raise AssertionError(f"{name}({slot}) read a state with steps pending")
            return orig(self, slot, *a, **k)

        monkeypatch.setattr(ActivePool, name, check)

    for name in ("buffers", "rebind", "layer_states"):
        guarded(name)
    return w


PROMPTS = [SYSTEM + "What is KDA?", SYSTEM + "What is MLA?", "short", "x y z", SYSTEM * 2 + "long"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_long_decodes_with_staggered_arrivals_are_exact(strategy, watch):
    """Windows fill (30+ decode steps), arrivals every few steps change the batch in the
    middle of windows, chunk_size 16 plans checkpoints inside decode."""
    reqs = [Request(p, 24 + 7 * (i % 3), arrival=3 * i) for i, p in enumerate(PROMPTS * 2)]
    e = Engine(model=MODEL, strategy=strategy, state_slots=60, chunk_size=16)
    rep = e.serve(reqs, max_batch_tokens=64)
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)
    assert watch.max_pending == DEFER_STEPS - 1  # a window filled
    assert watch.pending_steps >= 10


def test_retraction_mid_window_is_exact(watch):
    """KV pressure (test_serve's retraction case): requests are retracted while their batch
    has steps pending (their states are released unread) and redone later."""
    reqs = [Request(f"request {i} " + "z" * (i % 4), 40, arrival=0) for i in range(6)]
    totals = [len(encode(r.prompt)) + 40 - 1 for r in reqs]
    e = Engine(model=MODEL, state_slots=40, chunk_size=16)
    rep = e.serve(reqs, kv_tokens=max(totals) + 30)
    assert rep.retractions > 0
    assert_exact(rep, reqs)
    assert_rows_consistent(e, rep)
    assert watch.max_pending == DEFER_STEPS - 1
    assert max(watch.retracted_pending) > 0  # a retraction while its batch had steps pending


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(
        st.tuples(st.sampled_from(PROMPTS), st.integers(1, 30), st.integers(0, 12)),
        min_size=1,
        max_size=6,
    ),
    strategy=st.sampled_from(STRATEGIES),
    chunk=st.sampled_from([8, 16, 64]),
    budget=st.sampled_from([9, 40, 512]),
)
def test_deferred_writes_hypothesis(reqs, strategy, chunk, budget):
    requests = [Request(p, n, arrival=a) for p, n, a in reqs]
    e = Engine(model=MODEL, strategy=strategy, state_slots=40, chunk_size=chunk)
    rep = e.serve(requests, max_batch_tokens=budget)
    assert_exact(rep, requests)
    assert_rows_consistent(e, rep)


def test_eager_runner_is_the_same_serve(monkeypatch):
    """defer=1 (write every step) and the default window give the same tokens and, to
    rounding, logits."""
    reqs = [Request(p, 20, arrival=i) for i, p in enumerate(PROMPTS)]
    reps = []
    for defer in (1, None):
        e = Engine(model=MODEL, state_slots=40, chunk_size=16)
        e.loop.runner = Runner(MODEL, e.pools.active, defer=defer)
        reps.append(e.serve(reqs, max_batch_tokens=64))
    for a, b in zip(*(r.reports for r in reps)):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.logits, b.logits, atol=1e-10, rtol=0)
