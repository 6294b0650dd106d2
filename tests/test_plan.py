"""kda_core.plan.sweep: points sized as the engines size them, the replay equal to the twin,
the recommendation equal to a brute-force search, the launch flags as the engines spell them,
and every bad input refused with the argument named."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kda_core import plan, sim, sizing
from kda_core.sizing.slots import resolve_max_num_reqs
from kda_core.workloads import bundled_trace

K3 = "kimi-k3"
REST = 29_497 << 20  # 28.8 GiB per GPU, the K3 write-up's profiled rest


@pytest.fixture(scope="module")
def head():
    return bundled_trace("conversation").head(2000)


@pytest.fixture(scope="module")
def small(head):
    grid = {"mamba_full_memory_ratio": [0.05, 0.2, 0.9], "chunked_prefill_size": [2048, 8192]}
    return plan.sweep(K3, head, tp=8, rest_bytes=REST, grid=grid, min_running=8)


def _expected_pools(ratio: float, trace, requested=None) -> tuple[int, int, int]:
    """(slots, KV tokens, max running) from the sizing functions directly."""
    split = sizing.split_memory(K3, REST, ratio, 8, "float32", "bfloat16", "bfloat16")
    ctx = int((trace.input_len + trace.output_len).max())
    run = resolve_max_num_reqs(
        split.max_mamba_cache_size, split.kv_tokens, ctx, requested=requested
    )
    return split.max_mamba_cache_size, split.kv_tokens, run


def test_points_are_sized_as_sglang_sizes_them(small, head):
    assert len(small.points) == 6 and small.failed == ()
    for p in small.points:
        slots, tokens, run = _expected_pools(p["mamba_full_memory_ratio"], head)
        assert (p["state_slots"], p["kv_tokens"], p["max_running"]) == (slots, tokens, run)
    # a larger ratio buys state slots with KV tokens (the trade the sweep explores)
    by_ratio = sorted(small.points, key=lambda p: p["mamba_full_memory_ratio"])
    assert by_ratio[0]["max_running"] < by_ratio[-1]["max_running"]
    assert by_ratio[0]["kv_tokens"] > by_ratio[-1]["kv_tokens"]


def _twin_cached(p: dict, trace) -> int:
    """A point's cached tokens by the radix-tree twin, budgets from the sizing directly."""
    slots, tokens, run = _expected_pools(p["mamba_full_memory_ratio"], trace)
    per_slot = sizing.slot_bytes(K3, 8, "float32", "bfloat16")
    kvb = sizing.kv_bytes_per_token(K3, 8, "bfloat16")
    mean_ctx = float((trace.input_len + trace.output_len).mean())
    states = max(slots - run * sizing.slots_held_per_request(), 0)
    kv = max(tokens - math.ceil(run * mean_ctx), 0)
    pol = ("sglang", {"chunked_prefill_size": p["chunked_prefill_size"], "track_interval": 256})
    r = sim.simulate(
        trace,
        pol,
        method="twin",
        state_budget_bytes=states * per_slot,
        kv_budget_bytes=kv * kvb,
        cap_lookup=True,
        outputs=False,
        state_dtype="float32",  # SGLang's default state dtype: its slot is the checkpoint
    )
    assert r.state_bytes_per_checkpoint == per_slot
    return int(r.series.restore_at.sum())


def test_the_recommendation_equals_a_brute_force_search(small, head):
    # brute force: every point's cached tokens by the twin with budgets sized independently,
    # then the most cached tokens among the points that reach 8 running requests
    cached = [_twin_cached(p, head) for p in small.points]
    runs = [_expected_pools(p["mamba_full_memory_ratio"], head)[2] for p in small.points]
    ok = [i for i in range(len(cached)) if runs[i] >= 8]
    top = max(cached[i] for i in ok)
    want = min(
        i
        for i in ok
        if cached[i] == top and runs[i] == max(runs[j] for j in ok if cached[j] == top)
    )
    assert small.best is not None and small.best["point"] == want
    assert small.best["cached_tokens"] == top > 0
    # the front over (cached tokens, max running), by brute force
    front = [
        i
        for i in range(len(cached))
        if not any(
            cached[j] >= cached[i]
            and runs[j] >= runs[i]
            and (cached[j], runs[j]) != (cached[i], runs[i])
            for j in range(len(cached))
        )
    ]
    assert list(small.pareto) == front


def test_the_replay_with_a_twin_sized_budget_uses_the_points_pools(small, head):
    # the sweep's replay prices a checkpoint at SGLang's slot (fp32 state + bf16 conv)
    p = small.points[0]
    per_slot = sizing.slot_bytes(K3, 8, "float32", "bfloat16")
    pol = ("sglang", {"chunked_prefill_size": p["chunked_prefill_size"], "track_interval": 256})
    r = sim.fast.replay(
        sim.fast.prepare_trace(head, outputs=False),
        pol,
        checkpoint_bytes=per_slot,
        kv_bytes_per_token=sizing.kv_bytes_per_token(K3, 8, "bfloat16"),
        state_budget_bytes=p["cache_states"] * per_slot,
        kv_budget_bytes=p["cache_kv_tokens"] * sizing.kv_bytes_per_token(K3, 8, "bfloat16"),
        cap_lookup=True,
    )
    assert int(r.restore_at.sum()) == p["cached_tokens"]
    assert int(r.restore_at.sum()) == _twin_cached(p, head)


def test_launch_command_and_startup_lines(small):
    b = small.best
    cmd = small.launch_command
    assert cmd.startswith(
        "python -m sglang.launch_server --model-path moonshotai/Kimi-K3 --tp-size 8"
    )
    # flag spellings of SGLang 0.5.23 (arg_groups/fields/schedule.py, exec_.py)
    assert f"--mamba-full-memory-ratio {b['mamba_full_memory_ratio']:g}" in cmd
    assert f"--chunked-prefill-size {b['chunked_prefill_size']}" in cmd
    assert "--mamba-track-interval 256" in cmd and "--mamba-radix-cache-strategy auto" in cmd
    slots = b["state_slots"]
    assert small.log_lines[0].startswith(
        f"Mamba Cache is allocated. max_mamba_cache_size: {slots},"
    )
    assert f"#tokens: {b['kv_tokens']}," in small.log_lines[1]


def test_csv_has_a_row_per_point(small):
    lines = small.to_csv().strip().splitlines()
    assert len(lines) == 1 + len(small.points)
    head = lines[0].split(",")
    assert {"mamba_full_memory_ratio", "max_running", "cached_tokens", "status"} <= set(head)
    assert "log_lines" not in head


def test_no_point_reaches_min_running(head):
    s = plan.sweep(
        K3, head, rest_bytes=REST, grid={"mamba_full_memory_ratio": [0.05, 0.1]}, min_running=500
    )
    assert s.best is None and s.launch_command is None
    assert "no point reaches 500 running requests" in s.note


def test_vllm_sweep_reports_the_max_num_seqs_error(head):
    grid = {"block_size": [16], "max_num_seqs": [8, 5000]}
    s = plan.sweep(K3, head, engine="vllm", rest_bytes=REST, grid=grid)
    ok, bad = s.points
    assert ok["status"] == "ok" and ok["max_running"] <= 8
    assert bad["status"] == "failed" and bad["reason"].startswith("max_num_seqs (5000) exceeds")
    assert s.failed == (1,)
    # vLLM's own spellings (vllm/engine/arg_utils.py)
    assert s.launch_command.startswith("vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8")
    assert "--block-size 16" in s.launch_command and "--max-num-seqs 8" in s.launch_command
    assert any(line.startswith("GPU KV cache size:") for line in s.log_lines)
    want = sizing.vllm_plan(
        K3, REST, 8, max_model_len=int((head.input_len + head.output_len).max())
    )
    assert ok["state_slots"] == want.num_blocks


def test_a_point_the_engine_refuses_is_reported(head):
    grid = {"page_size": [1, 64], "mamba_track_interval": [100]}
    s = plan.sweep(K3, head, rest_bytes=REST, grid=grid)
    assert s.points[0]["status"] == "ok"
    assert "not a multiple of page_size 64" in s.points[1]["reason"]


def test_bad_input_names_the_argument(head, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"timestamp": 0, "input_length": 10\n')
    ok = dict(rest_bytes=REST)
    cases = [
        (dict(trace=empty), "trace"),
        (dict(trace=broken), "trace"),
        (
            dict(grid={"mamba_full_memory_ratio": [0.1] * 20, "page_size": list(range(1, 21))}),
            "grid has 400 points",
        ),
        (dict(grid={"block_size": [16]}), "grid: unknown sglang flag"),
        (dict(grid={"mamba_full_memory_ratio": [-1]}), "grid: mamba_full_memory_ratio"),
        (
            dict(rest_bytes=1 << 20),
            "no point of the grid can be sized at rest_bytes=1048576: state pool",
        ),
        (dict(objective="speed"), "objective"),
        (dict(min_running=0), "min_running"),
        (dict(engine="trtllm"), "engine"),
        (dict(model="gpt-2"), "model"),
        (dict(workers=2, client=object()), "at most one of client, scheduler, workers"),
        (dict(scheduler="localhost:8786"), "scheduler must be"),
        (dict(tp=0), "tp"),
    ]
    for kw, msg in cases:
        args = {"model": K3, "trace": head, **ok, **kw}
        with pytest.raises(ValueError, match=msg):
            plan.sweep(args.pop("model"), args.pop("trace"), **args)


def test_an_unreachable_scheduler_is_an_error_unless_fallback(head):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    addr = f"tcp://127.0.0.1:{port}"
    grid = {"mamba_full_memory_ratio": [0.2]}
    with pytest.raises(ValueError, match=f"scheduler: cannot reach {addr}"):
        plan.sweep(K3, head.head(200), rest_bytes=REST, grid=grid, scheduler=addr, timeout_s=2)
    s = plan.sweep(
        K3,
        head.head(200),
        rest_bytes=REST,
        grid=grid,
        scheduler=addr,
        timeout_s=2,
        fallback="serial",
    )
    assert s.runner == f"serial (scheduler {addr} unreachable)" and s.points[0]["status"] == "ok"


def test_progress_is_reported_per_point(head):
    seen = []
    grid = {"mamba_full_memory_ratio": [0.1, 0.2, 0.3]}
    plan.sweep(
        K3, head.head(300), rest_bytes=REST, grid=grid, progress=lambda d, n: seen.append((d, n))
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert np.all(np.diff([d for d, _ in seen]) == 1)
