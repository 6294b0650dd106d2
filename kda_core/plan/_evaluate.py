"""One grid point on a prepared trace: sized, replayed, queued -> one row of the sweep.

The replay is ``sim.fast.replay`` (the fast sequential pass, equal to the radix tree request by
request) under the policy and budgets ``_size`` gives the point, lookups of ``input - 1``
tokens as both engines do; with a HiCache host tier (``hicache_ratio > 0``) it is the tier
model ``sim.tiers.simulate_tiers`` (the radix tree; the host keeps every state written through,
KV resident). A vLLM block that the trace's block does not divide runs on the trace split into
blocks of their gcd (the trace says nothing finer). A vLLM point with a drafter
(``speculative_config`` in its policy) runs on the radix tree (``replay(method="auto")``: the
fast pass does not cover vLLM's lookup with drafts), a multiple of the fast pass's time. TTFT
and queueing: ``_queue``. A point the engine refuses, or any error while it runs, is a row with
``status`` "failed" and the reason.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kda_core import sizing
from kda_core.plan._queue import fcfs
from kda_core.plan._size import PointFailed, Sized, size_sglang, size_vllm
from kda_core.sim import costmodel
from kda_core.sim.fast import PreparedTrace, prepare_trace, replay
from kda_core.sim.tiers import TierConfig, simulate_tiers
from kda_core.workloads import Trace, ideal_prefix_tokens

_REFINED: dict[tuple[int, int], PreparedTrace] = {}  # per process: (id of trace, g) -> prepared


class Job(NamedTuple):
    """What a worker needs for one point (the prepared trace travels once, apart)."""

    index: int
    engine: str
    spec: sizing.ModelSpec
    tp: int
    rest_bytes: int
    flags: dict
    cost: costmodel.CostSpec | None
    time_model: costmodel.TimeModel
    ctx: dict  # context_len, mean_context


def size(job: Job, trace_block: int) -> Sized:
    fn = size_sglang if job.engine == "sglang" else size_vllm
    return fn(job.spec, job.flags, job.tp, job.rest_bytes, trace_block, job.ctx)


def _prepared_for(prep: PreparedTrace, block: int) -> PreparedTrace:
    page = prep.trace.block_size
    if block % page == 0:
        return prep
    g = math.gcd(page, block)
    key = (id(prep), g)
    if key not in _REFINED:
        _REFINED.clear()
        _REFINED[key] = prepare_trace(prep.trace.refined(g), prep.outputs)
    return _REFINED[key]


def _run(prep: PreparedTrace, sz: Sized, engine: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(token match, restore point, evictions) per request."""
    trace = prep.trace
    if sz.host_slots:
        ck = sz.ckpt_bytes
        cfg = TierConfig(
            device_bytes=sz.cache_states * ck,
            host_bytes=sz.host_slots * ck,
            checkpoint_bytes=ck,
            host_writes="all",
        )
        r = simulate_tiers(trace, "device+host", cfg, sz.policy, cap_lookup=True)
        tm = np.minimum(ideal_prefix_tokens(trace), trace.input_len - 1)
        return np.maximum(tm, r.restore_at), r.restore_at, r.device_evictions
    if engine == "vllm":
        prep = _prepared_for(prep, sz.policy[1]["block_size"])
    sb, kb, ub = sz.budgets
    rep = replay(
        prep,
        sz.policy,
        checkpoint_bytes=sz.ckpt_bytes,
        kv_bytes_per_token=sz.kv_bytes_per_token,
        state_budget_bytes=sb,
        kv_budget_bytes=kb,
        unified_budget_bytes=ub,
        cap_lookup=True,
        method="auto",
    )
    return rep.token_match, rep.restore_at, int(rep.evicted_cum[-1]) if len(rep.new) else 0


def _queue_row(trace: Trace, ra: np.ndarray, job: Job, sz: Sized) -> dict[str, Any]:
    nan = float("nan")
    if job.cost is None:
        keys = ("ttft_p50_s", "ttft_p99_s", "wait_p99_s", "queued_share")
        return {**dict.fromkeys(keys, nan), "queued": -1, "retractions": -1}
    L = trace.input_len
    pre = np.asarray(job.time_model.seconds(costmodel.prefill_flops(job.cost, ra, L)), dtype=float)
    dec = trace.output_len * job.time_model.decode_s_per_token
    q = fcfs(trace.arrival_s, pre, dec, L, L + trace.output_len, sz.max_running, sz.kv_tokens)
    return {
        "ttft_p50_s": float(np.percentile(q.ttft_s, 50)),
        "ttft_p99_s": float(np.percentile(q.ttft_s, 99)),
        "wait_p99_s": float(np.percentile(q.wait_s, 99)),
        "queued": q.queued,
        "queued_share": q.queued / len(L),
        "retractions": q.retractions,
    }


def evaluate(prep: PreparedTrace, job: Job) -> dict[str, Any]:
    """The sweep's row for ``job`` on ``prep`` (module docstring); never raises."""
    row: dict[str, Any] = {"point": job.index, **job.flags}
    try:
        sz = size(job, prep.trace.block_size)
        tm, ra, evictions = _run(prep, sz, job.engine)
    except PointFailed as e:
        row.update(status="failed", reason=str(e))
        return row
    except Exception as e:  # a failed point is reported, not lost
        row.update(status="failed", reason=f"{type(e).__name__}: {e}")
        return row
    L = prep.trace.input_len
    total = int(L.sum())
    cached = int(ra.sum())
    row.update(
        status="ok",
        reason="",
        max_running=sz.max_running,
        state_slots=sz.state_slots,
        kv_tokens=sz.kv_tokens,
        cache_states=sz.cache_states,
        cache_kv_tokens=sz.cache_kv_tokens,
        host_slots=sz.host_slots,
        token_hit_rate=float(tm.sum() / total),
        state_hit_rate=cached / total,
        cached_tokens=cached,
        prefill_tokens_saved=cached,
        evictions=evictions,
        **sz.drafter,
    )
    row.update(_queue_row(prep.trace, ra, job, sz))
    row["log_lines"] = sz.log_lines
    return row
