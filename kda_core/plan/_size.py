"""One grid point sized as the engine sizes it, and the budgets its cache gets in the replay.

Each point is a ``sizing.Deployment`` (every knob checked once, the engine's dtypes where the
point leaves them out). SGLang 0.5.23: ``sizing.size_sglang`` (``KVCacheConfigurator.
_handle_max_mamba_cache`` and the pool configurator: slots and KV tokens),
``sizing.slots.resolve_max_num_reqs`` (the concurrency cap), ``sizing.sglang_log_lines`` (the
start-up lines, the capping warning among them). The state dtype is ``--mamba-ssm-dtype``, else
SGLang's default for the model (``Deployment.state_dtype``); conv states bfloat16. The checks
a point must pass are SGLang's (``arg_groups/mamba_hook.py``: the track interval a multiple of
the page and at least the draft tokens; no_buffer pages of one token) and the lab's (a block
trace cannot place no_buffer's per-token states).

vLLM 0.33: ``sizing.size_vllm`` (the hybrid block pool at ``--kv-cache-memory-bytes`` =
``rest_bytes``, align mode) and ``sizing.vllm_log_lines``; the ``max_num_seqs`` error is a failed
point.

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
from kda_core.sizing.slots import resolve_max_num_reqs


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


def sglang_deployment(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, ctx: dict, strategy: str
) -> sizing.Deployment:
    """The point ``f`` as a ``sizing.Deployment`` (SGLang's knobs)."""
    return sizing.Deployment(
        rest_bytes=rest,
        tp=tp,
        ssm_dtype=f["mamba_ssm_dtype"],
        kv_dtype=_kv_dtype(f["kv_cache_dtype"]),
        ratio=f["mamba_full_memory_ratio"],
        max_mamba_cache_size=f["max_mamba_cache_size"],
        max_running_requests=f["max_running_requests"],
        page_size=f["page_size"],
        strategy=strategy,
        overlap=strategy != "no_buffer",
        draft_tokens=f["speculative_num_draft_tokens"],
        chunked_prefill_size=f["chunked_prefill_size"],
        max_model_len=ctx["context_len"],
    )


def size_sglang(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The SGLang point ``f`` (every flag set) on ``rest`` bytes per GPU."""
    strategy, overlap = _check_sglang(f, trace_block)
    d = sglang_deployment(spec, f, tp, rest, ctx, strategy)
    split = sizing.size_sglang(spec, d)
    slots, tokens = split.max_mamba_cache_size, split.kv_tokens
    if slots <= 0:
        raise PointFailed("state pool: no state slot fits (SGLang refuses to start)")
    if tokens <= 0:
        raise PointFailed("KV pool: no KV token fits after the state pool")
    try:
        running = resolve_max_num_reqs(
            slots, tokens, ctx["context_len"], strategy, overlap, False, f["max_running_requests"]
        )
    except ValueError as e:
        raise PointFailed(f"state pool: {e}") from None
    held = sizing.slots_held_per_request(strategy, overlap)
    per_slot, kvb = split.per_slot_bytes, sizing.kv_bytes_per_token(spec, tp, d.kv_dtype)
    states = max(slots - running * held, 0)
    kv_cache = max(tokens - math.ceil(running * ctx["mean_context"]), 0)
    host = sizing_host_slots(slots, f["hicache_ratio"]) if f["hicache_ratio"] > 0 else 0
    params = {
        "chunked_prefill_size": f["chunked_prefill_size"],
        "track_interval": f["mamba_track_interval"],
        "grid": max(64, f["page_size"]),
    }
    lines = tuple(sizing.sglang_log_lines(spec, d, split))
    budgets = (states * per_slot, kv_cache * kvb, None)
    pol = ("sglang", params)
    return Sized(running, slots, tokens, states, kv_cache, per_slot, kvb, budgets, pol, host, lines)


def sizing_host_slots(device_slots: int, ratio: float) -> int:
    """HiCache's mamba host pool at ``--hicache-ratio``: ``int(device * ratio) + 1`` slots
    (``MambaPoolHost``; ``sim.tiers.hicache_host_states``)."""
    return int(device_slots * ratio) + 1


def size_vllm(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The vLLM point ``f`` on ``rest`` bytes of KV cache memory per GPU."""
    d = sizing.Deployment(
        rest_bytes=rest,
        tp=tp,
        kv_dtype=_kv_dtype(f["kv_cache_dtype"]),
        block_size=f["block_size"],
        max_model_len=ctx["context_len"],
        max_num_seqs=f["max_num_seqs"],
    )
    p = sizing.size_vllm(spec, d)
    if p.max_num_seqs_error:
        raise PointFailed(p.max_num_seqs_error)
    if p.num_blocks <= 0:
        raise PointFailed("KV cache pool: no block fits in the memory given")
    B = p.block_size
    ret = f["prefix_cache_retention_interval"]
    if ret and ret % B:
        raise PointFailed(f"prefix_cache_retention_interval {ret} is not a multiple of block {B}")
    per_req = p.attn_groups * math.ceil(ctx["mean_context"] / B) + p.mamba_groups * 2
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
    states, kv_cache = left // max(p.mamba_groups, 1), left * B // max(p.attn_groups, 1)
    budgets = (None, None, left * p.bytes_per_block)
    lines = tuple(sizing.vllm_log_lines(p))
    pol = ("vllm", params)
    return Sized(
        running,
        p.num_blocks,
        p.kv_cache_tokens,
        states,
        kv_cache,
        ckpt,
        kvb,
        budgets,
        pol,
        0,
        lines,
    )
