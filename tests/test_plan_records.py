"""Public records the planner reproduces where the published numbers allow.

* sgl-project/sglang#38846: a Qwen3.5-architecture 27B hybrid with ``--max-running-requests 32``
  ran 9 requests: ``max_mamba_cache_size=47`` at 5 state slots per request (extra_buffer with
  the overlap scheduler), and SGLang said so in one log line, quoted in the issue.
* sgl-project/sglang#39436: HiCache's host mamba pool with too few slots for the checkpoints it
  backs up. 200 prompts of 8,448 tokens, chunked prefill 4096, three checkpoints each (600
  states), then 8 of the first prompts again: 565 host slots gave 0/8 host hits, 734 slots 8/8
  with ``cached_tokens`` 8,192 each.
* sgl-project/sglang#36935: branch reuse collapses (the KV of the branch point is cached but no
  state is, so the hit is 0 tokens) when ``kv_pool_tokens / chunked_prefill_size >
  max_mamba_cache_size``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import plan, sizing
from kda_core.sim import fast
from kda_core.sim.tiers import TierConfig, simulate_tiers
from kda_core.workloads.traces import make_trace

ISSUE_38846_LINE = (
    "max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47, 5 "
    "state slots per request). To raise it: increase --mamba-full-memory-ratio or "
    "--max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16."
)


def _trace(rows: list[list[int]], page: int, name: str):
    n = len(rows)
    offs = np.concatenate(([0], np.cumsum([len(r) for r in rows])))
    blocks = np.array([h for r in rows for h in r], dtype=np.int64)
    lens = [len(r) * page for r in rows]
    ar = np.arange(n, dtype=np.float64)
    return make_trace(name, page, ar, lens, [64] * n, offs, blocks, [-1] * n, [0] * n, ("r",))


def test_38846_the_state_pool_caps_32_requested_at_9():
    spec = sizing.shipped_spec("qwen3.8-27b-fp8")  # a Qwen3.5-architecture 27B hybrid (GDN)
    rows = [list(range(i * 8, i * 8 + 8)) for i in range(40)]
    trace = _trace(rows, 64, "distinct")
    s = plan.sweep(
        spec,
        trace,
        tp=1,
        rest_bytes=40 << 30,
        grid={"max_mamba_cache_size": [47, 160]},
        flags={"max_running_requests": 32},
    )
    at47, at160 = s.points
    assert (at47["max_running"], at160["max_running"]) == (9, 32)
    cmd = plan.sweep(
        spec,
        trace,
        tp=1,
        rest_bytes=40 << 30,
        flags={"max_running_requests": 32, "max_mamba_cache_size": 47},
    )  # the recommended (only) point prints the issue's line at start-up
    assert ISSUE_38846_LINE in cmd.log_lines
    assert "--max-running-requests 32" in cmd.launch_command
    assert "--max-mamba-cache-size 47" in cmd.launch_command


def _fill_then_replay(page: int = 64) -> object:
    """200 distinct prompts of 8,448 tokens (132 blocks of 64), then the first 8 again."""
    per = 8448 // page
    rows = [list(range(i * per, (i + 1) * per)) for i in range(200)]
    return _trace(rows + rows[:8], page, "fill-200-replay-8")


@pytest.mark.parametrize(("host_slots", "hits"), [(565, 0), (734, 8)])
def test_39436_host_slots_decide_the_replays(host_slots, hits):
    trace = _fill_then_replay()
    ck = sizing.slot_bytes("kimi-k3", 8, "float32", "bfloat16")
    cfg = TierConfig(
        device_bytes=64 * ck, host_bytes=host_slots * ck, checkpoint_bytes=ck, host_writes="all"
    )
    pol = ("sglang", {"chunked_prefill_size": 4096})
    r = simulate_tiers(trace, "device+host", cfg, pol, cap_lookup=True)
    # every checkpoint is backed up: 3 per prompt; a replay that missed writes its 3 again
    # (they had left the host), one that hit finds its 8,448 state still there
    assert r.bytes_written["host"] == (600 if hits else 624) * ck
    replay = slice(200, 208)
    assert int((r.source[replay] == 2).sum()) == hits  # restored from the host
    assert r.restore_at[replay].tolist() == [8192 * (hits > 0)] * 8  # cached_tokens 8,192
    assert int((r.source[replay] == 1).sum()) == 0  # the device had evicted them all


def test_39436_through_the_sweep_hicache_ratio():
    # 100 slots, 4 running: the host pool is int(100 * r) + 1 slots (MambaPoolHost)
    trace = _fill_then_replay()
    s = plan.sweep(
        "kimi-k3",
        trace,
        rest_bytes=40 << 30,
        grid={"hicache_ratio": [5.645, 7.335]},
        flags={
            "max_mamba_cache_size": 100,
            "max_running_requests": 4,
            "page_size": 64,
            "chunked_prefill_size": 4096,
        },
    )
    small, big = s.points
    assert (small["host_slots"], big["host_slots"]) == (565, 734)
    assert (small["cached_tokens"], big["cached_tokens"]) == (0, 8 * 8192)
    assert "--enable-hierarchical-cache --hicache-ratio 7.335" in s.launch_command


def _branch_workload(chains: int = 6, length: int = 32768, fork: int = 8192, tail: int = 2048):
    """``chains`` distinct chains, then each forked at ``fork`` tokens with a tail of its own
    (the workload of sgl-project/sglang#36935 and of the reproduction in #38000)."""
    page, nxt, rows = 512, 0, []
    for _ in range(chains):
        rows.append(list(range(nxt, nxt + length // page)))
        nxt += length // page
    for c in range(chains):
        rows.append(rows[c][: fork // page] + list(range(nxt, nxt + tail // page)))
        nxt += tail // page
    return _trace(rows, page, "branch")


def test_36935_branch_reuse_collapses_when_kv_chunks_exceed_state_slots():
    prep = fast.prepare_trace(_branch_workload())
    chunk, fork, total_kv = 2048, 8192, 6 * 32768
    seen = []
    for slots in (20, 40, 60, 96):
        for kv_chunks in (10, 20, 30, 60, 96, 120):
            if abs(kv_chunks - slots) < 0.1 * slots:
                continue  # at the boundary the forks' own new states tip it either way
            r = fast.replay(
                prep,
                ("sglang", {"chunked_prefill_size": chunk}),
                checkpoint_bytes=1,
                kv_bytes_per_token=1,
                state_budget_bytes=slots,
                kv_budget_bytes=kv_chunks * chunk,
                cap_lookup=True,
            )
            tm, ra = r.token_match[6:], r.restore_at[6:]
            collapsed = int(((tm >= fork) & (ra == 0)).sum())
            # the KV the pool can hold, in chunk boundaries (the workload has 96 of them)
            condition = min(kv_chunks * chunk, total_kv) // chunk > slots
            assert (collapsed > 0) == condition, (slots, kv_chunks, collapsed)
            seen.append(condition)
    assert any(seen) and not all(seen)
