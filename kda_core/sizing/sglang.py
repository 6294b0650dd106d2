"""How SGLang 0.5.23 splits a GPU's byte budget between the state cache and the KV pool.

``split_memory`` is ``KVCacheConfigurator._handle_max_mamba_cache`` followed by
``DefaultPoolConfigurator.calculate_pool_sizes``: the padding slot 0 and (with
``--enable-linear-replayssm-spec`` on a KDA model) the ReplaySSM ring are part of every slot's
cost, the budget is computed in float GiB as SGLang does, and the KV tokens are rounded down to
whole pages. It is the formula that reproduces the K3 write-up's two deployments from one budget
(``K3_DEPLOYMENTS``; docs/sizing.md). Left out: PP stage scaling, DP attention, fused drafts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import GIB, MAX_COUNT, ModelSpec, as_spec
from kda_core.sizing.sizes import kv_bytes_per_token, replayssm_ring_bytes, slot_bytes
from kda_core.sizing.slots import slots_per_request


class MemorySplit(NamedTuple):
    """How ``--mamba-full-memory-ratio`` splits a byte budget (all sizes in bytes)."""

    rest_bytes: int
    ratio: float
    state_budget_bytes: int  # rest * r / (1 + r)
    max_mamba_cache_size: int  # state slots
    state_bytes: int  # (slots + 1) * per-slot bytes (+ fixed rings; legacy: slots * per-slot)
    kv_bytes: int  # what the KV pool gets
    kv_tokens: int  # whole pages
    max_running: int  # slots // slots per request
    page_size: int = 1
    per_slot_bytes: int = 0  # state + conv (+ KDA ReplaySSM ring)
    intermediate_bytes: int = 0  # per-draft states taken from the KV share


def check_ratio(ratio: object) -> float:
    """``--mamba-full-memory-ratio`` as a float in (0, 1e6]; ValueError naming ``ratio``."""
    if (
        isinstance(ratio, (bool, np.bool_))
        or not isinstance(ratio, (int, float, np.integer, np.floating))
        or not 0.0 < float(ratio) <= 1e6
    ):
        raise ValueError(f"ratio must be a number in (0, 1e6], got {ratio!r}")
    return float(ratio)


def _ring(spec: ModelSpec, tp: int, replayssm: bool, ring_len: int, dtype: str) -> int:
    """ReplaySSM ring bytes per slot when the flag is active (KDA and GDN models only)."""
    if not replayssm or spec.linear_kind == "mamba2":
        return 0
    return sum(replayssm_ring_bytes(spec, 1, tp, ring_len, dtype).values())


def _capped(slots: int, spr: int, req: int | None, strategy: str, size: int | None) -> int:
    """Requests whose per-draft states SGLang reserves: min(requested, slots // spr), or every
    slot when the radix cache is off and the slots came from the requested count."""
    if strategy == "radix_off" and size is None and req is not None:
        return slots
    return slots // spr if req is None else min(req, slots // spr)


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
    *,
    replayssm: bool = False,
    ring_len: int = 16,
    page_size: int = 1,
    requested_running: int | None = None,
    max_mamba_cache_size: int | None = None,
) -> MemorySplit:
    """SGLang 0.5.23's split of ``rest_bytes`` (the profiled rest of one GPU) into slots and
    KV tokens (``_handle_max_mamba_cache``, then tokens ``// cell * page`` rounding).

    Auto size: ``budget = rest * r / (1 + r)``; ``slots = (budget - fixed - per_slot) //
    per_slot`` with ``per_slot = state + conv (+ KDA ring)`` and ``fixed`` a GDN model's
    request-lifetime ring (``requested_running + 1`` of them); ``slots + 1`` are allocated.
    With ``draft_tokens = D > 0`` and no ReplaySSM: ``slots = (budget - per_req (1 + D) - extra)
    // (per_req (1 + D / spr) + extra)`` and the intermediate states ``per_req (capped + 1) D``
    come out of the KV share (capped = min(requested, slots // spr); None = no request cap).
    ``max_mamba_cache_size`` skips the auto size (``--max-mamba-cache-size``); strategy
    ``radix_off`` with ``requested_running`` sizes one slot per request. Where SGLang refuses to
    start (no slot fits, nothing left for the KV pool) the split has 0 slots or 0 KV bytes.
    """
    spec = as_spec(spec)
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, MAX_COUNT)
    r = check_ratio(ratio)
    if not isinstance(replayssm, bool):
        raise ValueError(f"replayssm must be a bool, got {replayssm!r}")
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    page = _check_int("page_size", page_size, 1, 1 << 20)
    req = (
        None
        if requested_running is None
        else _check_int("requested_running", requested_running, 1, MAX_COUNT)
    )
    per_req = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    spr = slots_per_request(strategy, overlap, skip_decode_lock, page)
    ring = _ring(spec, tp, replayssm, ring_len, conv_dtype)
    fixed = 0
    if ring and spec.linear_kind != "kda":
        if req is None:
            raise ValueError("requested_running is required with replayssm on a GDN model")
        fixed, ring = ring * (req + 1), 0
    reserves = d > 0 and not replayssm
    rest_gb = rest_bytes / GIB
    budget = rest_gb * r / (1 + r) * GIB
    explicit = max_mamba_cache_size is not None or (strategy == "radix_off" and req is not None)
    if max_mamba_cache_size is not None:
        slots = _check_int("max_mamba_cache_size", max_mamba_cache_size, 0, MAX_COUNT)
    elif explicit:
        slots = int(req or 0)  # radix off: one slot per requested request
    elif reserves:
        slots = int((budget - per_req * (1 + d) - ring) // (per_req * (1 + d / spr) + ring))
    else:
        slots = int((budget - fixed - (per_req + ring)) // (per_req + ring))
    inter = per_req * (_capped(slots, spr, req, strategy, max_mamba_cache_size) + 1) * d
    inter = inter if reserves else 0
    rest_gb -= inter / GIB
    slots = max(slots, 0)  # 0: SGLang refuses to start ("Not enough GPU memory ...")
    state = (slots + 1) * (per_req + ring) + fixed
    kv = max(int((rest_gb - state / GIB) * GIB), 0)
    cell = kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
    tokens = (kv // cell if cell else 0) // page * page
    running = slots // spr
    return MemorySplit(
        rest_bytes, r, int(budget), slots, state, kv, tokens, running, page, per_req + ring, inter
    )


K3_DEPLOYMENTS: tuple[tuple[dict[str, str], int, int], ...] = (
    ({"ssm_dtype": "float32", "kv_dtype": "bfloat16"}, 51, 974_656),
    ({"ssm_dtype": "bfloat16", "kv_dtype": "fp8_e4m3"}, 80, 1_947_648),
)
"""The K3 write-up's two Kimi K3 deployments (TP8, ReplaySSM ring 16, bf16 conv): the dtypes, the
slots and the KV tokens their logs print."""
K3_PAGE_SIZE: int = 64
K3_RATIO: float = 0.15
K3_REST_BYTES: int = 29_497 * (1 << 20)
"""One budget and ratio inside ``k3_budget_interval()`` / ``k3_ratio_interval``: the
profiled rest (28.806 GiB per GPU) that gives both deployments."""


def _k3_per_slot(ssm_dtype: str) -> int:
    ring = _ring(as_spec("kimi-k3"), 8, True, 16, "bfloat16")
    return slot_bytes("kimi-k3", 8, ssm_dtype, "bfloat16") + ring


def k3_budget_interval(page_size: int = K3_PAGE_SIZE) -> tuple[int, int]:
    """The range ``[lo, hi)`` of ``rest_bytes`` whose KV share page-rounds to both of the
    K3 write-up's token counts; empty (``lo >= hi``) if none does (e.g. ``page_size=1``).

    A deployment with S slots and T tokens of ``cell`` bytes needs
    ``(S + 1) * per_slot + T * cell <= rest < (S + 1) * per_slot + (T + page) * cell``.
    """
    page = _check_int("page_size", page_size, 1, 1 << 20)
    lo, hi = 0, MAX_COUNT
    for kw, slots, tokens in K3_DEPLOYMENTS:
        state = (slots + 1) * _k3_per_slot(kw["ssm_dtype"])
        cell = kv_bytes_per_token("kimi-k3", 8, kw["kv_dtype"])
        lo = max(lo, state + tokens * cell)
        hi = min(hi, state + (tokens + page) * cell)
    return lo, hi


def k3_ratio_interval(rest_bytes: int) -> tuple[float, float]:
    """The ``--mamba-full-memory-ratio`` range ``[lo, hi)`` that gives both deployments' slot
    counts from ``rest_bytes``: S slots need ``(S + 1) * per_slot <= rest * f < (S + 2) *
    per_slot`` with ``f = r / (1 + r)``."""
    rest = _check_int("rest_bytes", rest_bytes, 1, MAX_COUNT)
    f_lo, f_hi = 0.0, 1.0
    for kw, slots, _ in K3_DEPLOYMENTS:
        per_slot = _k3_per_slot(kw["ssm_dtype"])
        f_lo, f_hi = (
            max(f_lo, (slots + 1) * per_slot / rest),
            min(f_hi, (slots + 2) * per_slot / rest),
        )
    return f_lo / (1 - f_lo), f_hi / (1 - f_hi)


def k3_split(which: int, rest_bytes: int = K3_REST_BYTES, ratio: float = K3_RATIO) -> MemorySplit:
    """``split_memory`` for one of the K3 write-up's deployments (0: fp32 states and bf16 KV,
    1: bf16 states and fp8 KV) at one budget and ratio, pages of ``K3_PAGE_SIZE``."""
    which = _check_int("which", which, 0, len(K3_DEPLOYMENTS) - 1)
    kw = K3_DEPLOYMENTS[which][0]
    return split_memory(
        "kimi-k3",
        rest_bytes,
        ratio,
        8,
        kw["ssm_dtype"],
        "bfloat16",
        kw["kv_dtype"],
        replayssm=True,
        page_size=K3_PAGE_SIZE,
    )
