"""``studies.host_coverage``: the share of resident KV pages whose prefix ends on a held state,
counted by hand on a three-request token trace (64-token blocks).

The trace: request 0 is A + B (1536 tokens, 24 blocks), request 1 is A + C (shares A's 1024
tokens, 16 blocks), request 2 is 640 fresh tokens (10 blocks). Resident pages: 16 (A) + 8 (B)
+ 8 (C) + 10 = 42. SGLang's placement (extra_buffer; the plans are asserted below): request 0
saves its end (block 24 of A + B), request 1 saves the branching seqlen 1024 (A's last block),
request 2 its end (640). With a device budget of 2 states, request 2's state evicts request 0's
(the LRU): the device ends with A's last block and request 2's end. The host keeps each
request's last state: with 3 slots all three (A + B's end, A's end, request 2's end), with 2
the last two (A's end, request 2's end).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kda_core.cache import policy
from kda_core.sim import checkpoint_bytes
from kda_core.sim.tiers import hicache_host_states
from kda_core.studies.host_coverage import host_coverage
from kda_core.workloads import bundled_trace, load_trace

A = list(range(1024))
B = list(range(5000, 5512))
C = list(range(9000, 9512))
FRESH = list(range(20000, 20640))


def _trace(tmp_path: Path, prompts: list[list[int]]):
    path = tmp_path / "prompts.jsonl"
    rows = [{"token_ids": p, "timestamp": 1000 * i} for i, p in enumerate(prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_trace(path, "token-ids", block_size=64)


def test_placement_the_counts_rest_on() -> None:
    pol = policy.make("sglang")
    assert pol.plan(1536, 0, 0, None, 64) == (1536,)  # a fresh prompt: its end
    assert pol.plan(1536, 1024, 0, None, 64) == (1024,)  # the branching seqlen
    assert pol.plan(640, 0, 0, None, 64) == (640,)


def test_counted_by_hand(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [A + B, A + C, FRESH])
    c = host_coverage(trace, sizes=(1, 0, 0.5), device_states=2)
    np.testing.assert_array_equal(c.sizes, [0, 0.5, 1])  # sorted
    # HiCache: int(2 * ratio) + 1 slots (0: no host)
    assert c.host_states.tolist() == [0, 2, 3]
    assert c.resident_pages == 42
    np.testing.assert_allclose(c.device_share * 42, [2, 2, 2])
    np.testing.assert_allclose(c.host_share * 42, [0, 2, 3])
    # either: the device's two, plus A + B's end once the host has 3 slots
    np.testing.assert_allclose(c.any_share * 42, [2, 2, 3])
    assert c.checkpoint_bytes == checkpoint_bytes("kimi-k3", 8)
    np.testing.assert_array_equal(c.state_hit_rate, 0)  # no request reuses a saved state


def test_a_host_hit_needs_the_slot(tmp_path: Path) -> None:
    # a fourth request A + B + 64 tokens: its lookup (1599 tokens, 24 full blocks) reaches
    # A + B's end (1536), held only by a 3-slot host; the device still holds A's end (1024)
    d = list(range(30000, 30064))
    trace = _trace(tmp_path, [A + B, A + C, FRESH, A + B + d])
    c = host_coverage(trace, sizes=(0, 0.5, 1), device_states=2)
    total = 1536 + 1536 + 640 + 1600
    np.testing.assert_allclose(c.state_hit_rate * total, [1024, 1024, 1536])
    assert c.resident_pages == 43


def test_gb_sizes_follow_hicache(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [A + B, FRESH])
    ck = checkpoint_bytes("kimi-k3", 8)
    kv = 10 * ck
    c = host_coverage(trace, sizes=(0.5,), unit="gb", device_states=2, kv_device_bytes=kv)
    assert c.host_states.tolist() == [hicache_host_states(2, ck, size_gb=0.5, kv_device_bytes=kv)]
    # the state pool's share of 0.5 GB is 2 / 12 of it: 83.3 MB, 2 slots of 29 MB, + 1
    assert c.host_states[0] == int(0.5e9 * 2 / 12 // ck) + 1 == 3


def test_refuses_what_it_cannot_compute(tmp_path: Path) -> None:
    lengths = tmp_path / "burst.csv"
    lengths.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "0,ChatGPT,100,10,110,Conversation log\n"
    )
    with pytest.raises(ValueError, match="prefix"):
        host_coverage(load_trace(lengths))
    trace = bundled_trace("conversation").head(20)
    with pytest.raises(ValueError, match="unit must be one of"):
        host_coverage(trace, unit="GiB")
    with pytest.raises(ValueError, match=r"sizes must be 1 to 12 numbers in \[0, 1024\]"):
        host_coverage(trace, sizes=(-1,))
    with pytest.raises(ValueError, match="device_states"):
        host_coverage(trace, device_states=0)
