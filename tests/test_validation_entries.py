"""Public entry points reject a bad argument with a ValueError whose message names it ("validate
once at the public API", docs/architecture.md): at least one entry per subpackage, the public
API's fixed entries (Engine, kda.chunked, context_parallel, simulate) and the studies the apps
call. Every case fails in the argument check, before any model run, so the table stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from kda_core import memory, plan, sizing, workloads
from kda_core.cp import context_parallel
from kda_core.engine import Engine
from kda_core.kda import chunked
from kda_core.memory._pools import UnifiedPool
from kda_core.model import TinyHybrid, check_tokens
from kda_core.sim import fast, simulate
from kda_core.studies import (
    batch_view,
    chunk_scan,
    density,
    int8,
    planner,
    planner_engines,
    prefix_replay,
    speculative,
)
from kda_core.studies import context_parallel as context_parallel_study
from kda_core.studies import memory as memory_study
from kda_core.studies import transfer as transfer_study
from kda_core.transfer import Layout
from kda_core.transfer.store import EmbeddedStore

T, H, K, V = 8, 2, 4, 4


def _kda_inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, T, H, K))
    v = rng.standard_normal((T, H, V))
    g = -np.abs(rng.standard_normal((T, H, K)))
    beta = np.full((T, H), 0.5)
    return q, k, v, g, beta


def _pool() -> UnifiedPool:
    return UnifiedPool(1 << 12, 64, 128)


# (argument the message must name, call with that argument bad)
CASES: list[tuple[str, Callable[[], object]]] = [
    # model
    ("prompt", lambda: check_tokens([256], name="prompt")),
    ("weights", lambda: TinyHybrid(weights="no-such-weights")),
    # memory
    ("total_bytes", lambda: UnifiedPool(0, 64, 128)),
    ("verify", lambda: UnifiedPool(1 << 12, 64, 128, verify="yes")),
    ("kind", lambda: memory.make_pool("ring", 1 << 12, 64, 128)),
    ("n", lambda: _pool().alloc("state", -1)),
    ("side", lambda: _pool().alloc("slots", 1)),
    ("max_moves", lambda: _pool().flush("kv", -1)),
    ("seed", lambda: memory.shifting_mix(seed=-1)),
    # sizing
    ("state_slots", lambda: sizing.max_running_requests(-1)),
    ("strategy", lambda: sizing.slots_per_request("ping_pong")),
    ("ratio", lambda: sizing.split_memory("kimi-k3", 1 << 30, ratio=0)),
    ("kv_dtype", lambda: sizing.check_knobs(kv_dtype="fp4")),
    ("ssm_dtype", lambda: sizing.slot_bytes("kimi-k3", 8, ssm_dtype="fp4")),
    ("kv_dtype", lambda: sizing.split_memory("kimi-k3", 1 << 30, kv_dtype="fp4")),
    ("overlap", lambda: sizing.slots_per_request("extra_buffer", overlap="yes")),
    ("tp", lambda: sizing.intermediate_ssm_bytes("kimi-k3", 4, 8, tp=7)),
    ("dcp", lambda: sizing.balanced_ratio("kimi-k3", 1000.0, dcp="yes")),
    # workloads
    ("block_size", lambda: workloads.parse_mooncake_lines([], block_size=0)),
    ("max_requests", lambda: workloads.parse_mooncake_lines([], max_requests=0)),
    ("seed", lambda: workloads.workload("chat", seed=-1)),
    # transfer
    ("tp_size", lambda: Layout(tp_size=0)),
    ("key", lambda: EmbeddedStore().put("", b"x")),
    ("data", lambda: EmbeddedStore().put("0123abcd", "text")),
    # studies the apps call
    ("budget_gib", lambda: planner.plan(budget_gib=0)),
    ("ssm_dtype", lambda: planner.plan(ssm_dtype="fp4")),
    ("model", lambda: planner.plan(model="gpt")),
    ("overlap", lambda: planner.plan(overlap="yes")),
    ("max_mamba_cache_size", lambda: planner.plan(max_mamba_cache_size=-1)),
    ("head_dim", lambda: planner_engines.custom_spec(head_dim=0)),
    ("config_json", lambda: planner_engines.model_spec("config.json", "[]")),
    ("page_size", lambda: planner.plan(page_size=0)),
    ("total_gib", lambda: memory_study.k3_config(total_gib=0)),
    ("conv_dtype", lambda: memory_study.k3_config(conv_dtype="fp4")),
    ("seed", lambda: speculative.generation(seed=-1)),
    ("seed", lambda: speculative.acceptance_vs_noise(seed=-1)),
    ("deploy_draft_tokens", lambda: speculative.memory_over_d(deploy_draft_tokens=0)),
    ("n_requests", lambda: transfer_study.tier_rates(n_requests=5)),
    ("tp", lambda: transfer_study.anatomy(tp=0)),
    ("chunk_size", lambda: chunk_scan.chunk_scan_study(chunk_size=0)),
    ("measure_time", lambda: chunk_scan.chunk_scan_study(measure_time="yes")),
    ("budget_gib", lambda: density.policies_at_budget(budget_gib=-1.0)),
    ("budget_gib", lambda: density.hit_timeline(budget_gib=-1.0)),
    ("tiny_budget_bytes", lambda: int8.int8_study(tiny_budget_bytes=0)),
    ("spacing", lambda: prefix_replay.serve(spacing=0)),
    ("state_slots", lambda: batch_view.batch_view(["a"], state_slots=-1)),
    ("reference", lambda: batch_view.batch_view(["a"], reference="yes")),
    ("P", lambda: context_parallel_study.kv_allgather_bytes(1024, 0, 1152)),
    ("T", lambda: context_parallel_study.cost_model(T=0)),
    # the public API's fixed entries (docs/architecture.md)
    ("chunk_size", lambda: Engine(chunk_size=0)),
    ("strategy", lambda: Engine(strategy="ping_pong")),
    ("restore", lambda: Engine(restore="nearest")),
    ("checkpoint_slots", lambda: Engine(checkpoint_slots=-1)),
    ("chunk_size", lambda: chunked(*_kda_inputs(), chunk_size=0)),
    ("ranks", lambda: context_parallel(*_kda_inputs(), ranks=0)),
    ("scan", lambda: context_parallel(*_kda_inputs(), ranks=2, scan="ring")),
    ("servers", lambda: simulate(servers=0)),
    ("schedule", lambda: simulate(schedule="random")),
    ("method", lambda: simulate(method="quick")),
    ("outputs", lambda: fast.prepare_trace(workloads.bundled_trace("conversation"), outputs=1)),
    ("prepared", lambda: fast.replay(None, checkpoint_bytes=1, kv_bytes_per_token=1)),
    # plan (each check runs before any replay)
    ("engine", lambda: plan.sweep("kimi-k3", None, engine="x", rest_bytes=1)),
    ("rest_bytes", lambda: plan.sweep("kimi-k3", None, rest_bytes=0)),
    ("grid", lambda: plan.sweep("kimi-k3", None, rest_bytes=1, grid={"page_size": [0]})),
    ("objective", lambda: plan.sweep("kimi-k3", None, rest_bytes=1, objective="speed")),
]


@pytest.mark.parametrize(("arg", "call"), CASES, ids=[f"{i}-{a}" for i, (a, _) in enumerate(CASES)])
def test_public_entry_rejects_a_bad_argument_by_name(arg: str, call: Callable[[], object]) -> None:
    with pytest.raises(ValueError) as e:
        call()
    assert re.search(rf"(?<![\w]){re.escape(arg)}(?![\w])", str(e.value)), str(e.value)
