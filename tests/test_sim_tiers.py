"""State tiers in the trace simulator: device-only agrees with kda_core.sim; only the last
tracked state reaches the host; loads and bytes add up."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kda_core.sim import costmodel, simulate
from kda_core.sim.tiers import CKPT_K3_TP8, TIER_SETUPS, TierConfig, simulate_tiers
from kda_core.workloads import bundled_trace, parse_mooncake_lines

CK = CKPT_K3_TP8


@pytest.fixture(scope="module")
def head():
    return bundled_trace("conversation").head(1500)


@pytest.fixture(scope="module")
def results(head):
    cfg = TierConfig(device_bytes=16 * CK, host_bytes=32 * CK)
    return [simulate_tiers(head, setup, cfg) for setup in TIER_SETUPS]


def test_device_only_is_the_plain_simulator(head):
    """Naive twin: with no tiers this is kda_core.sim.simulate at the same state budget."""
    cfg = TierConfig(device_bytes=16 * CK)
    mine = simulate_tiers(head, "device", cfg)
    ref = simulate(head, policy="sglang", state_budget_bytes=16 * CK)
    np.testing.assert_array_equal(mine.restore_at, ref.series.restore_at)
    assert mine.state_hit_rate == pytest.approx(ref.state_hit_rate, abs=0)
    assert mine.device_evictions == ref.evictions
    assert mine.ttft_mean_s == pytest.approx(ref.ttft_mean_s, rel=1e-12)
    assert mine.bytes_loaded == {"host": 0, "remote": 0} and mine.hits["host"] == 0


def test_more_tiers_restore_more(results):
    dev, host, remote = results
    assert dev.state_hit_rate < host.state_hit_rate < remote.state_hit_rate
    assert dev.ttft_mean_s > host.ttft_mean_s > remote.ttft_mean_s
    for r in results:  # every load moves one checkpoint
        assert r.bytes_loaded["host"] == CK * r.hits["host"]
        assert r.bytes_loaded["remote"] == CK * r.hits["remote"]
    assert remote.bytes_written["remote"] == remote.bytes_written["host"]  # write-through


def test_ttft_includes_the_load_time(results, head):
    _, host, _ = results
    spec = costmodel.cost_spec("kimi-k3")
    tm = costmodel.TimeModel()
    flops = np.asarray(costmodel.prefill_flops(spec, host.restore_at, head.input_len))
    compute = np.asarray(tm.seconds(flops))
    n_host = host.hits["host"]
    load = 10e-6 + CK / 50e9  # default host latency + one 29 MB checkpoint over 50 GB/s
    assert host.ttft_mean_s * len(head) == pytest.approx(compute.sum() + n_host * load, rel=1e-9)


def lines(reqs):
    return [
        json.dumps({"timestamp": i, "input_length": 512 * n, "output_length": 1, "hash_ids": ids})
        for i, (n, ids) in enumerate(reqs)
    ]


def test_only_the_last_tracked_state_is_offloaded():
    trace = parse_mooncake_lines(
        lines([(4, [1, 2, 3, 4]), (4, [5, 6, 7, 8]), (3, [1, 2, 10]), (5, [1, 2, 3, 4, 9])])
    )
    pol = ("interval", {"every": 512})  # a state at every block
    cfg = TierConfig(device_bytes=4 * CK, host_bytes=64 * CK)
    dev = simulate_tiers(trace, "device", cfg, pol)
    host = simulate_tiers(trace, "device+host", cfg, pol)
    # request 1 evicts request 0's four states from the device; request 2 finds no state for
    # [1, 2] anywhere: the host holds request 0's LAST state (block 4), not block 2
    assert host.restore_at.tolist()[:3] == dev.restore_at.tolist()[:3] == [0, 0, 0]
    # request 3: the device has request 2's states at blocks 1-2; the host has block 4
    assert dev.restore_at.tolist()[3] == 2 * 512
    assert host.restore_at.tolist()[3] == 4 * 512 and host.source.tolist() == [0, 0, 0, 2]
    assert host.bytes_written["host"] == 4 * CK  # one last state per request
    assert host.bytes_loaded["host"] == CK


def test_bad_arguments():
    with pytest.raises(ValueError, match="setup"):
        simulate_tiers(None, "gpu")
    with pytest.raises(ValueError, match="host_bw"):
        TierConfig(host_bw=0)
    with pytest.raises(ValueError, match="device_bytes"):
        TierConfig(device_bytes=-1)


def test_hicache_host_states() -> None:
    from kda_core.sim.tiers import hicache_host_states

    # --hicache-ratio: int(64 * 2.0) + 1 (SGLang's page_num = size // 1 + 1)
    assert hicache_host_states(64, CK) == 129
    assert hicache_host_states(10, CK, ratio=0.25) == 3
    # --hicache-size 30 GB: 100 states of 29,039,616 B on the device are 2,903,961,600 B next to
    # 27,096,038,400 B of KV (30e9 together), so the state pool gets 30 GB * 2.9039616 / 30 =
    # 2,903,961,600 B = exactly 100 states, plus one
    assert CK == 29_039_616
    assert hicache_host_states(100, CK, size_gb=30, kv_device_bytes=27_096_038_400) == 101
    for bad in ({"ratio": 0}, {"size_gb": -1}, {"kv_device_bytes": -1}):
        with pytest.raises(ValueError):
            hicache_host_states(64, CK, **bad)
    with pytest.raises(ValueError, match="device_states"):
        hicache_host_states(0, CK)
