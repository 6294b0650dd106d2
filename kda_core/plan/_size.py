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

Drafters: the ``Deployment`` fields ``python -m kda_core.sizing`` sets (``mtp``, ``eagle``,
``num_speculative_tokens``, ``use_replayssm``), so the pools hold the drafter's memory; the row
names its share (docs/plan.md, "With a drafter"); what the sizing refuses fails the point.

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
    drafter: dict  # the drafter's share, the row's draft_* keys ({} without one)


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
    algo = f["speculative_algorithm"]
    if algo is not None and f["speculative_num_draft_tokens"] < 2:
        raise PointFailed(
            f"speculative_num_draft_tokens: give 2 or more with speculative_algorithm {algo} "
            "(a chain of num_steps = draft tokens - 1, topk 1)"
        )
    if strategy == "no_buffer":
        raise PointFailed(
            "no_buffer saves a state at every prefill step end (pages of one token); a trace of "
            f"{trace_block}-token blocks cannot place them"
        )
    return strategy, overlap


def sglang_deployment(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, ctx: dict, strategy: str
) -> sizing.Deployment:
    """The point ``f`` as a ``sizing.Deployment`` (SGLang's knobs); no algorithm, no drafter
    (a draft path is then left out, as the launch command leaves it out)."""
    algo = f["speculative_algorithm"]
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
        mtp=algo is not None and f["speculative_draft_model_path"] is None,
        eagle=f["speculative_draft_model_path"] if algo is not None else None,
    )


def _sized(fn: Any, spec: sizing.ModelSpec, d: sizing.Deployment, *more: Any) -> Any:
    """``fn(spec, d, *more)``; the sizing's refusal (a drafter it does not model, a draft config it
    cannot read) as a failed point."""
    try:
        return fn(spec, d, *more)
    except (ValueError, OSError) as e:
        raise PointFailed(str(e)) from None


def size_sglang(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The SGLang point ``f`` (every flag set) on ``rest`` bytes per GPU."""
    strategy, overlap = _check_sglang(f, trace_block)
    try:
        d = sglang_deployment(spec, f, tp, rest, ctx, strategy)
    except (ValueError, OSError) as e:
        raise PointFailed(f"speculative_draft_model_path: {e}") from None
    split = _sized(sizing.size_sglang, spec, d)
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
        "speculative_num_draft_tokens": f["speculative_num_draft_tokens"] or None,
    }
    lines = tuple(sizing.sglang_log_lines(spec, d, split))
    budgets = (states * per_slot, kv_cache * kvb, None)
    pol = ("sglang", params)
    draft = _sized(sizing.drafter_rows, spec, d, split)
    return Sized(
        running, slots, tokens, states, kv_cache, per_slot, kvb, budgets, pol, host, lines, draft
    )


def sizing_host_slots(device_slots: int, ratio: float) -> int:
    """HiCache's mamba host pool at ``--hicache-ratio``: ``int(device * ratio) + 1`` slots
    (``MambaPoolHost``; ``sim.tiers.hicache_host_states``)."""
    return int(device_slots * ratio) + 1


def vllm_deployment(f: dict[str, Any], tp: int, rest: int, length: int) -> sizing.Deployment:
    """The vLLM point ``f`` as a ``sizing.Deployment`` at ``max_model_len=length``; no method,
    no drafter (the other ``speculative_config`` keys are then left out, as in the launch
    command)."""
    method, model = f["speculative_config.method"], f["speculative_config.model"]
    if model is not None and method == "mtp":  # vLLM reads "model" as the MTP draft's own
        raise PointFailed('speculative_config.model: give it with method "eagle" / "eagle3"')
    if method in ("eagle", "eagle3") and model is None:
        raise PointFailed(f"speculative_config.model: method {method!r} needs the draft's config")
    try:
        return sizing.Deployment(
            rest_bytes=rest,
            tp=tp,
            kv_dtype=_kv_dtype(f["kv_cache_dtype"]),
            block_size=f["block_size"],
            max_model_len=length,
            max_num_seqs=f["max_num_seqs"],
            num_speculative_tokens=f["speculative_config.num_speculative_tokens"] if method else 0,
            mtp=method == "mtp",
            eagle=model if method in ("eagle", "eagle3") else None,
            use_replayssm=f["use_replayssm"],
        )
    except (ValueError, OSError) as e:
        raise PointFailed(f"speculative_config.model: {e}") from None


def _vllm_policy(f: dict[str, Any], p: sizing.VllmPlan, ret: int) -> tuple:
    """vLLM's cache rules for the point; with a drafter its ``speculative_config`` as vLLM
    resolves it (the tokens an MTP draft defaults to; ``n_predict`` the MTP module count,
    ``SpeculativeConfig`` reads the draft's ``num_nextn_predict_layers``)."""
    params: dict[str, Any] = {
        "block_size": p.block_size,
        "max_num_batched_tokens": f["max_num_batched_tokens"],
        "retention": ret or None,
    }
    method = f["speculative_config.method"]
    if method is not None:
        params["speculative_config"] = {
            "method": method,
            "num_speculative_tokens": p.num_speculative_tokens,
            # use_multi_module_mtp reads the draft config's num_nextn_predict_layers (default
            # 1; Qwen3.5's MTP override never sets it): not the draft's attention layers
            "n_predict": (p.spec.nextn_predict_layers or 1) if method == "mtp" else 1,
        }
    return ("vllm", params)


def size_vllm(
    spec: sizing.ModelSpec, f: dict[str, Any], tp: int, rest: int, trace_block: int, ctx: dict
) -> Sized:
    """The vLLM point ``f`` on ``rest`` bytes of KV cache memory per GPU. A running request
    holds the blocks vLLM gives one of the trace's mean length (``VllmPlan.blocks_per_request``
    at that length: attention, drafter and state blocks, the speculative ones among them)."""
    d = vllm_deployment(f, tp, rest, ctx["context_len"])
    p = _sized(sizing.size_vllm, spec, d)
    if p.max_num_seqs_error:
        raise PointFailed(p.max_num_seqs_error)
    if p.num_blocks <= 0:
        raise PointFailed("KV cache pool: no block fits in the memory given")
    B = p.block_size
    ret = f["prefix_cache_retention_interval"]
    if ret and ret % B:
        raise PointFailed(f"prefix_cache_retention_interval {ret} is not a multiple of block {B}")
    mean = d.replace(max_model_len=math.ceil(ctx["mean_context"]))
    per_req = _sized(sizing.size_vllm, spec, mean).blocks_per_request
    running = min(f["max_num_seqs"], p.num_blocks // max(per_req, 1))
    if running < 1:
        raise PointFailed("KV cache pool: a mean request of the trace does not fit")
    ckpt = p.mamba_groups * p.bytes_per_block
    # a cached token's KV: the attention groups' (an MTP drafter's layers among them) and an
    # EAGLE drafter's own groups (blocks of draft_block_size tokens)
    kvb = p.attn_groups * p.group_size * p.attn_page_per_token
    if p.draft_groups:
        kvb += -(-p.draft_groups * p.bytes_per_block // p.draft_block_size)
    left = p.num_blocks - running * per_req
    states, kv_cache = left // max(p.mamba_groups, 1), left * B // max(p.attn_groups, 1)
    budgets = (None, None, left * p.bytes_per_block)
    lines = tuple(sizing.vllm_log_lines(p))
    pol = _vllm_policy(f, p, ret)
    extra = _sized(sizing.drafter_rows, spec, d, p)
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
        extra,
    )
