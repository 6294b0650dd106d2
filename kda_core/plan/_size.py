"""One grid point sized as the engine sizes it, and the budgets its cache gets in the replay.

SGLang 0.5.23: ``sizing.split_memory`` (``KVCacheConfigurator._handle_max_mamba_cache`` and the
pool configurator: slots and KV tokens), ``sizing.resolve_max_num_reqs`` (the concurrency cap,
with its capping message), ``sizing.mamba_allocation_log`` / ``kv_allocation_log`` (the startup
lines). The state dtype is ``--mamba-ssm-dtype``, else the config's ``mamba_ssm_dtype``, else
float32 (``configs/mamba_utils.py`` ``mamba2_state_dtype``); conv states bfloat16. The checks
a point must pass are SGLang's (``arg_groups/mamba_hook.py``: the track interval a multiple of
the page and at least the draft tokens; no_buffer pages of one token) and the lab's (a block
trace cannot place no_buffer's per-token states).

vLLM 0.33: ``sizing.vllm_plan`` (the hybrid block pool at ``--kv-cache-memory-bytes`` =
``rest_bytes``, align mode) and its startup lines; the ``max_num_seqs`` error is a failed point.

What the replay's cache gets (the lab's rule, docs/plan.md): the server at its cap holds
``max_running`` requests, each with the slots SGLang gives a running request
(``slots_held_per_request``) and the KV of a mean request of the trace (input + output); the
radix cache keeps the rest of each pool. vLLM: the blocks left after ``max_running`` mean
requests, one unified budget (states and KV share the block pool).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from kda_core import sizing


class PointFailed(Exception):
    """A point the engine would refuse (or the replay cannot model): the reason, reported."""


class Sized(NamedTuple):
    """A point's pools, cap, the budgets its replay gets, the policy and the startup lines."""

    max_running: int
    state_slots: int  # SGLang: max_mamba_cache_size; vLLM: blocks in the pool
    kv_tokens: int
    cache_states: int
    cache_kv_tokens: int
    ckpt_bytes: int
    kv_bytes_per_token: int
    budgets: tuple  # (state, kv, unified) bytes for sim.fast.replay
    policy: tuple  # (name, params)
    host_slots: int
    log_lines: tuple


def _kv_dtype(flag: str) -> str:
    return "bfloat16" if flag == "auto" else flag


def _check_sglang(f: dict[str, Any], trace_block: int) -> tuple[str, bool]:
    """SGLang's start-up checks for the point -> (strategy, overlap)."""
    strategy = f["mamba_radix_cache_strategy"]
    overlap = strategy != "no_buffer"  # no_buffer needs --disable-overlap-schedule
    page, track = f["page_size"], f["mamba_track_interval"]
    if strategy == "auto":
        strategy = sizing.resolve_auto(overlap, page)
    if track % page:
        raise PointFailed(f"mamba_track_interval {track} is not a multiple of page_size {page}")
    if f["speculative_num_draft_tokens"] > track:
        raise PointFailed("mamba_track_interval must be >= speculative_num_draft_tokens")
    if strategy == "no_buffer":
        raise PointFailed(
            "no_buffer saves a state at every prefill step end (pages of one token); a trace of "
            f"{trace_block}-token blocks cannot place them"
        )
    return strategy, overlap


def size_sglang(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The SGLang point ``f`` (every flag set) on ``rest`` bytes per GPU."""
    strategy, overlap = _check_sglang(f, trace_block)
    ssm = f["mamba_ssm_dtype"] or spec.ssm_dtype or "float32"
    kvd = _kv_dtype(f["kv_cache_dtype"])
    d = f["speculative_num_draft_tokens"]
    split = sizing.split_memory(
        spec,
        rest,
        f["mamba_full_memory_ratio"],
        tp,
        ssm,
        "bfloat16",
        kvd,
        strategy,
        overlap,
        False,
        d,
        page_size=f["page_size"],
        max_mamba_cache_size=f["max_mamba_cache_size"],
    )
    slots, tokens = split.max_mamba_cache_size, split.kv_tokens
    if slots <= 0:
        raise PointFailed("state pool: no state slot fits (SGLang refuses to start)")
    if tokens <= 0:
        raise PointFailed("KV pool: no KV token fits after the state pool")
    try:
        running = sizing.resolve_max_num_reqs(
            slots,
            tokens,
            ctx["context_len"],
            strategy,
            overlap,
            False,
            f["max_running_requests"],
        )
    except ValueError as e:
        raise PointFailed(f"state pool: {e}") from None
    held = sizing.slots_held_per_request(strategy, overlap)
    per_slot, kvb = split.per_slot_bytes, sizing.kv_bytes_per_token(spec, tp, kvd)
    states = max(slots - running * held, 0)
    kv_cache = max(tokens - math.ceil(running * ctx["mean_context"]), 0)
    host = 0
    if f["hicache_ratio"] > 0:
        host = sizing_host_slots(slots, f["hicache_ratio"])
    params = {
        "chunked_prefill_size": f["chunked_prefill_size"],
        "track_interval": f["mamba_track_interval"],
        "grid": max(64, f["page_size"]),
    }
    lines = sizing.mamba_allocation_log(
        spec, slots, tp, ssm, "bfloat16", d, running, replayssm=False, ring_len=None
    )
    lines = [*lines, sizing.kv_allocation_log(spec, tokens, kvd, tp=tp, page_size=f["page_size"])]
    # KVCacheConfigurator.resolve_max_num_reqs warns when the state cache lowers the requested
    # (or estimated) count; its text always carries the bfloat16 hint (ssm_dtype=None here)
    want = f["max_running_requests"] or sizing.request_pool_estimate(tokens, ctx["context_len"])
    cap = sizing.capping_message(slots, strategy, overlap, False, None, min(want, tokens // 2))
    if cap:
        lines.append(cap)
    budgets = (states * per_slot, kv_cache * kvb, None)
    return Sized(
        running,
        slots,
        tokens,
        states,
        kv_cache,
        per_slot,
        kvb,
        budgets,
        ("sglang", params),
        host,
        tuple(lines),
    )


def sizing_host_slots(device_slots: int, ratio: float) -> int:
    """HiCache's mamba host pool at ``--hicache-ratio``: ``int(device * ratio) + 1`` slots
    (``MambaPoolHost``; ``sim.tiers.hicache_host_states``)."""
    return int(device_slots * ratio) + 1


def size_vllm(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The vLLM point ``f`` on ``rest`` bytes of KV cache memory per GPU."""
    kvd = _kv_dtype(f["kv_cache_dtype"])
    p = sizing.vllm_plan(
        spec,
        rest,
        tp,
        kvd,
        "bfloat16",
        None,
        max_model_len=ctx["context_len"],
        block_size=f["block_size"],
        max_num_seqs=f["max_num_seqs"],
    )
    if p.max_num_seqs_error:
        raise PointFailed(p.max_num_seqs_error)
    if p.num_blocks <= 0:
        raise PointFailed("KV cache pool: no block fits in the memory given")
    B = p.block_size
    ret = f["prefix_cache_retention_interval"]
    if ret and ret % B:
        raise PointFailed(f"prefix_cache_retention_interval {ret} is not a multiple of block {B}")
    mean_ctx = ctx["mean_context"]
    per_req = p.attn_groups * math.ceil(mean_ctx / B) + p.mamba_groups * 2
    running = min(f["max_num_seqs"], p.num_blocks // max(per_req, 1))
    if running < 1:
        raise PointFailed("KV cache pool: a mean request of the trace does not fit")
    ckpt = p.mamba_groups * p.bytes_per_block
    kvb = p.attn_groups * p.group_size * p.attn_page_per_token
    left = p.num_blocks - running * per_req
    params = {
        "block_size": B,
        "max_num_batched_tokens": f["max_num_batched_tokens"],
        "retention": ret or None,
    }
    return Sized(
        running,
        p.num_blocks,
        p.kv_cache_tokens,
        left // max(p.mamba_groups, 1),
        left * B // max(p.attn_groups, 1),
        ckpt,
        kvb,
        (None, None, left * p.bytes_per_block),
        ("vllm", params),
        0,
        tuple(sizing.vllm_log_lines(p)),
    )
