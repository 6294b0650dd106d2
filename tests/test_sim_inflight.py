"""The simulator's in-flight schedule (what Engine.serve does): checkpoints enter the tree as
prefill reaches them, running requests hold locks, and without overlap it is the sequential
schedule."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from kda_core import sim
from kda_core import workloads as W
from kda_core.sim import costmodel
from kda_core.sim._inflight import Timing

CKPT = sim.checkpoint_bytes("kimi-k3", 8)


def _trace(rows: list[tuple[float, int, int, list[int]]], block: int = 4) -> W.Trace:
    """A Mooncake-format trace from (arrival ms, input_length, output_length, hash_ids)."""
    lines = [
        json.dumps({"timestamp": t, "input_length": n, "output_length": o, "hash_ids": h})
        for t, n, o, h in rows
    ]
    return W.parse_mooncake_lines(lines, block_size=block)


def test_flops_fn_agrees_with_costmodel() -> None:
    for model in ("kimi-k3", "kimi-linear-48b", "marconi-7b"):
        spec = costmodel.cost_spec(model)
        f = Timing(spec, costmodel.TimeModel(), None).flops_fn()
        for s, e in ((0, 1), (0, 4096), (512, 70_000), (1024, 1024)):
            assert f(s, e) == pytest.approx(costmodel.prefill_flops(spec, s, e), rel=1e-13)


def test_second_request_matches_what_the_first_has_inserted_so_far() -> None:
    # Request A (4 blocks of 4 tokens) arrives at 0 and checkpoints every 4 tokens: position p
    # is done at F(0, p) / rate (no overhead). B shares A's 4 blocks and adds a fifth; it
    # arrives half-way between A's checkpoints at 8 and 12, so the tree then holds A's prefix
    # up to 8 with states at 4 and 8: B matches 8 tokens and restores at 8. Sequentially, A is
    # complete before B is matched: 16 and 16.
    rate = 1e12
    tm = costmodel.TimeModel(flops_per_s=rate, decode_s_per_token=0.0)
    t8 = costmodel.prefill_flops("kimi-k3", 0, 8) / rate
    t12 = costmodel.prefill_flops("kimi-k3", 0, 12) / rate
    arrival_ms = 1000.0 * (t8 + t12) / 2
    tr = _trace([(0.0, 16, 0, [1, 2, 3, 4]), (arrival_ms, 20, 0, [1, 2, 3, 4, 5])])
    pol = ("interval", {"every": 4})
    fly = sim.simulate(tr, pol, None, time_model=tm, schedule="inflight", check_integrity=True)
    seq = sim.simulate(tr, pol, None, time_model=tm, schedule="sequential")
    assert fly.series.token_match.tolist() == [0, 8]
    assert fly.series.restore_at.tolist() == [0, 8]
    assert seq.series.token_match.tolist() == [0, 16]
    assert seq.series.restore_at.tolist() == [0, 16]
    # both end with states at 4, 8, 12, 16, 20 (A's 12 and 16 and B's are the same nodes)
    assert fly.checkpoints_stored == seq.checkpoints_stored == 5
    assert fly.schedule == "inflight" and seq.schedule == "sequential"


def _lock_trace(a_output: int) -> W.Trace:
    # A: 2 blocks, then a long decode; B: 2 other blocks while A decodes; C: A's prefix + 1
    # block long after both ended
    return _trace(
        [
            (0.0, 8, a_output, [1, 2]),
            (1000.0, 8, 0, [10, 11]),
            (1e7, 12, 0, [1, 2, 3]),
        ]
    )


def test_a_running_requests_state_is_not_evicted() -> None:
    # Budget 2 checkpoints, a state every 4 tokens. A stores 4 and 8 and its lock moves to 8.
    # B (arriving while A decodes for 1000 s) needs room for 4: the only unlocked state is A's
    # 4 (evicted); B's 4 is inserted and locked; for B's 8 nothing is evictable (A's 8 and B's
    # 4 are locked): dropped. C (A's prefix + 1 block) then restores at A's 8 (and locks it),
    # evicting B's 4 for its own 12. Sequentially (no running locks) B evicts both of A's
    # states (A's 8 is a leaf: its KV goes with it, SGLang's leaf rule; A's 4 stays as a
    # KV-only tombstone); C matches 4 tokens of KV, restores at 0, and of its 4, 8, 12 keeps 4
    # and 8 after evicting B's two states (the deepest is dropped).
    tm = costmodel.TimeModel(decode_s_per_token=1.0)
    pol = ("interval", {"every": 4})
    tr = _lock_trace(1000)
    fly = sim.simulate(tr, pol, 2 * CKPT, time_model=tm, schedule="inflight", check_integrity=True)
    seq = sim.simulate(tr, pol, 2 * CKPT, time_model=tm, schedule="sequential")
    assert fly.series.restore_at.tolist() == [0, 0, 8]
    assert fly.series.checkpoints_new.tolist() == [2, 1, 1]
    assert fly.checkpoints_dropped == 1 and fly.evictions == 2
    assert seq.series.token_match.tolist() == [0, 0, 4]
    assert seq.series.restore_at.tolist() == [0, 0, 0]
    assert seq.series.checkpoints_new.tolist() == [2, 2, 2]
    assert seq.evictions == 4 and seq.checkpoints_dropped == 1
    # the control: A ends (no decode) before B arrives, so nothing of A is locked: B evicts
    # both of A's states as sequentially and C restores at 0. C itself differs, by the other
    # in-flight rule (one chunk at a time): its 4 and 8 each evict one of B's states, then its
    # 12 evicts its own 4 (the lock moved to 8): 3 stored, none dropped, 5 evictions.
    ctl = sim.simulate(_lock_trace(0), pol, 2 * CKPT, time_model=tm, schedule="inflight")
    assert ctl.series.restore_at.tolist() == [0, 0, 0]
    assert ctl.series.checkpoints_new.tolist() == [2, 2, 3]
    assert ctl.evictions == 5 and ctl.checkpoints_dropped == 0


@pytest.fixture(scope="module")
def spaced() -> W.Trace:
    """A chat trace with outputs (decode-time checkpoints) and 1000 s between arrivals: every
    request (prefill < 10 s at 3.2 PFLOP/s, no decode time) ends before the next arrives."""
    chat = W.workload("chat", n_sessions=30, turns=5, block_size=64, seed=4)
    return dataclasses.replace(chat, arrival_s=np.arange(len(chat), dtype=np.float64) * 1000.0)


@pytest.mark.parametrize(
    "pol", ["sglang", "marconi", ("interval", {"every": 128}), ("vllm", {"mode": "all"})]
)
def test_without_overlap_inflight_is_sequential(spaced: W.Trace, pol: object) -> None:
    tm = costmodel.TimeModel(decode_s_per_token=0.0)
    assert np.all(costmodel.prefill_flops("kimi-k3", 0, spaced.input_len) / 3.2e15 < 10.0)
    a = sim.simulate(spaced, pol, None, time_model=tm, schedule="sequential")
    b = sim.simulate(spaced, pol, None, time_model=tm, schedule="inflight", check_integrity=True)
    for f in ("token_match", "restore_at", "checkpoints_new", "state_bytes", "kv_bytes"):
        assert np.array_equal(getattr(a.series, f), getattr(b.series, f)), f
    assert a.state_hit_rate == b.state_hit_rate > 0.3
    assert a.checkpoints_stored == b.checkpoints_stored


def test_overlap_on_the_real_trace_head_only_lowers_hits() -> None:
    # Every block, no budget: a request can only see less in flight than sequentially (the
    # tree is a subset of the sequential one at its start), never more
    tr = W.bundled_trace("conversation").head(2000)
    pol = ("interval", {"every": 512})
    a = sim.simulate(tr, pol, None, schedule="sequential")
    b = sim.simulate(tr, pol, None, schedule="inflight", check_integrity=False)
    assert np.all(b.series.token_match <= a.series.token_match)
    assert np.all(b.series.restore_at <= a.series.restore_at)


def test_bad_schedule() -> None:
    with pytest.raises(ValueError, match="schedule"):
        sim.simulate(_lock_trace(0), "sglang", None, schedule="batched")
    with pytest.raises(ValueError, match="decode_s_per_token"):
        costmodel.TimeModel(decode_s_per_token=-1.0)
