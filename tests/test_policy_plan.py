"""``Policy.plan`` (the simulator's per-request path: values validated once, by the caller)
against the public ``checkpoint_positions`` (validates every call), and the checks that moved
to ``check_page`` / the per-call step bounds still reaching public callers."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from kda_core import sim
from kda_core.cache import policy as pol
from kda_core.workloads import bundled_trace

POLICIES = [
    ("interval", {"every": 512}),
    ("interval", {"every": 1024, "request_end": True}),
    ("sglang", {}),
    ("sglang", {"chunked_prefill_size": 1536, "request_end": True}),
    ("marconi", {}),
    ("vllm", {"mode": "align"}),
    ("vllm", {"mode": "all", "retention": 2048}),
    ("vllm", {"mode": "align", "partial_hits": True, "block_size": 1024}),
]


@pytest.mark.parametrize("name,params", POLICIES)
def test_plan_equals_checkpoint_positions(name: str, params: dict):
    p = pol.make(name, **params)
    rng = random.Random(7)
    page = 512
    p.check_page(page)
    for _ in range(400):
        L = rng.randint(1, 40_000)
        tm = rng.choice([0, rng.randint(0, L + page)])  # a block match may pass the prompt
        ra = rng.choice([0, rng.randint(0, tm)]) // page * page
        total = rng.choice([None, L + rng.randint(0, 3) * page])
        m = SimpleNamespace(token_match=tm, restore_at=ra)
        want = p.checkpoint_positions(L, m, total_len=total, page_size=page)
        assert p.plan(L, tm, ra, total, page) == want


def test_moved_checks_still_reach_public_callers():
    m = SimpleNamespace(token_match=0, restore_at=0)
    with pytest.raises(ValueError, match="every must be a multiple of page_size=64"):
        pol.make("interval", every=100).checkpoint_positions(1000, m, page_size=64)
    with pytest.raises(ValueError, match="needs page_size=1"):
        pol.make("sglang", buffer="no_buffer").checkpoint_positions(1000, m, page_size=64)
    with pytest.raises(ValueError, match="gives more than"):
        pol.make("sglang").checkpoint_positions(1 << 20, m, chunk_size=1)
    with pytest.raises(ValueError, match="gives more than"):
        pol.make("vllm", mode="align").checkpoint_positions(1 << 20, m, chunk_size=1)
    with pytest.raises(ValueError, match="block_size must be a multiple of page_size=512"):
        pol.make("vllm", block_size=100).checkpoint_positions(1000, m, page_size=512)
    # the simulator checks the page once per run (the trace's blocks are 512 tokens)
    trace = bundled_trace("conversation")
    with pytest.raises(ValueError, match="every must be a multiple of page_size=512"):
        sim.simulate(trace, ("interval", {"every": 100}))
