"""How a GPU's byte budget splits between the state cache and the MLA KV pool.

``split_memory`` is the K3 write-up's (legacy) formula, ``split_memory_0523`` SGLang 0.5.23's
``KVCacheConfigurator._handle_max_mamba_cache``; ``balanced_ratio`` is the
``--mamba-full-memory-ratio`` at which both pools run out at the same concurrency;
``memory_vs_context`` / ``crossover_context`` compare one request's KV with its one slot.
Derivations: docs/sizing.md. Left out: DCP sizing (except ``balanced_ratio``'s ``dcp`` factor)
and page-size rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import GIB, MAX_COUNT, ModelSpec
from kda_core.sizing.sizes import (
    intermediate_conv_window_bytes,
    mla_kv_bytes_per_token,
    replayssm_ring_bytes,
    slot_bytes,
)
from kda_core.sizing.slots import slots_per_request

SIZING_FORMULAS: tuple[str, ...] = ("legacy", "sglang-0.5.23")
"""``split_memory`` is the K3 write-up's (legacy) formula; ``split_memory_0523`` SGLang 0.5.23's."""


class MemorySplit(NamedTuple):
    """How ``--mamba-full-memory-ratio`` splits a byte budget (all sizes in bytes)."""

    rest_bytes: int
    ratio: float
    state_budget_bytes: int  # rest * r / (1 + r)
    max_mamba_cache_size: int  # state slots
    state_bytes: int  # slots * per-slot bytes (+ speculative conv windows)
    kv_bytes: int  # rest - state_bytes
    kv_tokens: int
    max_running: int


def _check_ratio(ratio: object) -> None:
    if (
        isinstance(ratio, (bool, np.bool_))
        or not isinstance(ratio, (int, float, np.integer, np.floating))
        or not 0.0 < float(ratio) <= 1e6
    ):
        raise ValueError(f"ratio must be a number in (0, 1e6], got {ratio!r}")


def split_memory(
    spec: ModelSpec | str,
    rest_bytes: int,
    ratio: float = 0.9,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    draft_tokens: int = 0,
) -> MemorySplit:
    """SGLang's auto sizing (``_handle_max_mamba_cache``) of ``rest_bytes`` on one GPU.

    ``state budget = rest * r / (1 + r)``; ``slots = floor(budget / per_slot)`` or, with
    ``draft_tokens = D > 0`` (speculative decoding, per-draft buffers sized jointly),
    ``floor(budget / (per_slot * (1 + D / spr)))`` where spr = slots per request. The KV pool
    gets the rest. ReplaySSM rings are not part of this formula (left out).
    """
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, MAX_COUNT)
    _check_ratio(ratio)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    r = float(ratio)
    per_slot = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    budget = int(rest_bytes * r / (1.0 + r))
    slots = int(budget // (per_slot * (1.0 + d / spr))) if d else budget // per_slot
    running = slots // spr
    state = slots * per_slot
    if d:
        state += intermediate_conv_window_bytes(spec, running, d, tp, conv_dtype)
    kv = max(rest_bytes - state, 0)
    per_tok = mla_kv_bytes_per_token(spec, kv_dtype, name="kv_dtype")
    tokens = kv // per_tok if per_tok else 0
    return MemorySplit(rest_bytes, r, budget, slots, state, kv, tokens, running)


def split_memory_0523(
    spec: ModelSpec | str,
    rest_bytes: int,
    ratio: float = 0.9,
    tp: int = 1,
    ssm_dtype: str = "float32",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    draft_tokens: int = 0,
    replayssm: bool = True,
    ring_len: int = 16,
) -> MemorySplit:
    """SGLang 0.5.23's auto sizing (``KVCacheConfigurator._handle_max_mamba_cache``), beside
    the K3 write-up's ``split_memory`` (labelled "legacy"; see ``SIZING_FORMULAS``).

    Differences from the legacy formula: the padding slot 0 is paid out of the budget
    (``slots = (budget - per_slot) // per_slot``, and ``slots + 1`` are allocated); with
    ReplaySSM (``replayssm``, ``--enable-linear-replayssm-spec``, on by default here as in
    the K3 write-up's deployments) the KDA ring of ``ring_len`` (``--linear-replayssm-cache-len``,
    16) is part of every slot's cost (``per_slot = state + conv + ring``) and no per-draft
    state is reserved; the SSM dtype defaults to float32 (what that flag sets when
    ``--mamba-ssm-dtype`` is not given). Without ReplaySSM and with D draft tokens:
    ``slots = (budget - per_slot * (1 + D)) // (per_slot * (1 + D / spr))`` and the
    intermediate states ``per_slot * (running + 1) * D`` are taken from the KV share.
    The budget is ``rest * r / (1 + r)`` in float bytes, as SGLang computes it in GiB.
    """
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, MAX_COUNT)
    _check_ratio(ratio)
    if not isinstance(replayssm, bool):
        raise ValueError(f"replayssm must be a bool, got {replayssm!r}")
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    r = float(ratio)
    per_req = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    budget = rest_bytes / GIB * r / (1.0 + r) * GIB
    ring = sum(replayssm_ring_bytes(spec, 1, tp, ring_len, conv_dtype).values())
    if d and not replayssm:
        slots = int((budget - per_req * (1 + d)) // (per_req * (1.0 + d / spr)))
        slots = max(slots, 0)
        running = slots // spr
        intermediate = per_req * (running + 1) * d
        per_slot = per_req
    else:
        per_slot = per_req + (ring if replayssm else 0)
        slots = max(int((budget - per_slot) // per_slot), 0)
        running = slots // spr
        intermediate = 0
    state = (slots + 1) * per_slot
    kv = max(rest_bytes - state - intermediate, 0)
    per_tok = mla_kv_bytes_per_token(spec, kv_dtype, name="kv_dtype")
    tokens = kv // per_tok if per_tok else 0
    return MemorySplit(rest_bytes, r, int(budget), slots, state, kv, tokens, running)


def balanced_ratio(
    spec: ModelSpec | str,
    tokens_per_request: float,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    slots_per_req: float | None = None,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    dcp: bool = False,
) -> float:
    """The ``--mamba-full-memory-ratio`` r at which the state cache and the KV pool run out at
    the same concurrency for a workload holding ``tokens_per_request`` KV tokens per request.

    With a state fraction f = r / (1 + r) of the budget B: requests by state
    ``f B / (spr * slot)`` equal requests by KV ``(1 - f) B / (T * kv_tok)`` when
    ``r = spr * slot / (T * kv_tok)`` (continuous, before flooring). ``slots_per_req`` defaults
    to the strategy's reservation (pass e.g. the expected checkpoints + held slots instead).
    Short prompts need a large r, long ones a small r. With ``dcp=True`` (decode context
    parallelism over the ``tp`` ranks) each GPU holds only 1/tp of a request's MLA KV, so the
    ratio is ``tp`` times larger (the K3 write-up: "开启DCP时 ... 这个mem ratio要乘以TP数").
    """
    if not isinstance(tokens_per_request, (int, float, np.integer, np.floating)) or not (
        0 < float(tokens_per_request) <= 1e9
    ):
        raise ValueError(f"tokens_per_request must be in (0, 1e9], got {tokens_per_request!r}")
    if not isinstance(dcp, bool):
        raise ValueError(f"dcp must be a bool, got {dcp!r}")
    if slots_per_req is None:
        spr = float(slots_per_request(strategy, overlap, skip_decode_lock))
    else:
        spr = float(slots_per_req)
        if not 0 < spr <= 1e6:
            raise ValueError(f"slots_per_req must be in (0, 1e6], got {slots_per_req!r}")
    per_slot = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    kv_tok = mla_kv_bytes_per_token(spec, kv_dtype, name="kv_dtype")
    if kv_tok == 0:
        raise ValueError("spec has no MLA layers: there is no KV pool to balance against")
    r = spr * per_slot / (float(tokens_per_request) * kv_tok)
    return r * tp if dcp else r


def memory_vs_context(
    spec: ModelSpec | str,
    context_lens: Sequence[int] | np.ndarray,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-request bytes on one GPU vs context length: (MLA KV, KDA state + conv).

    MLA grows linearly (``L * kv_tok``); the KDA part is flat (one slot). int64 arrays.
    """
    ctx = np.asarray(context_lens)
    if ctx.ndim != 1 or ctx.size > 1_000_000 or not np.issubdtype(ctx.dtype, np.integer):
        raise ValueError("context_lens must be a 1-D integer array of at most 1e6 entries")
    if ctx.size and (ctx.min() < 0 or ctx.max() > 1 << 32):
        raise ValueError("context_lens must be in [0, 2**32]")
    kv = ctx.astype(np.int64) * mla_kv_bytes_per_token(spec, kv_dtype, name="kv_dtype")
    st = np.full(ctx.shape, slot_bytes(spec, tp, ssm_dtype, conv_dtype), dtype=np.int64)
    return kv, st


def crossover_context(
    spec: ModelSpec | str,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> int:
    """Smallest context length at which one request's MLA KV exceeds its one KDA slot."""
    per = mla_kv_bytes_per_token(spec, kv_dtype, name="kv_dtype")
    if per == 0:
        raise ValueError("spec has no MLA layers")
    return slot_bytes(spec, tp, ssm_dtype, conv_dtype) // per + 1
