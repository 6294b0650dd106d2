"""How SGLang 0.5.23 splits a GPU's byte budget between the state cache and the KV pool.

``size_sglang(spec, deployment)`` is ``KVCacheConfigurator._handle_max_mamba_cache`` followed by
``DefaultPoolConfigurator.calculate_pool_sizes``: the padding slot 0 and (with
``--enable-linear-replayssm-spec`` on a KDA model) the ReplaySSM ring are part of every slot's
cost, the budget is computed in float GiB as SGLang does, and the KV tokens are rounded down to
whole pages; with ``d.mtp`` the draft's KV joins the cell as SGLang prices it (``_drafts``).
``split_memory`` is its flat spelling (DESIGN.md). It reproduces the K3 write-up's
two deployments from one budget (docs/sizing.md; tests/test_sizing_engines.py).
Left out: PP stage scaling, DP attention, fused drafts.
"""

from __future__ import annotations

from typing import NamedTuple

from kda_core.sizing._drafts import sglang_mtp_layers, sglang_unpriced_draft_layers
from kda_core.sizing._eagle import sglang_eagle_cells
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing._logs import capping_message, kv_allocation_log, mamba_allocation_log
from kda_core.sizing.deployment import Deployment
from kda_core.sizing.families import engine_refusal
from kda_core.sizing.presets import GIB, ModelSpec, as_spec
from kda_core.sizing.sizes import kv_bytes_per_token, replayssm_ring_bytes, slot_bytes
from kda_core.sizing.slots import request_pool_estimate, resolve_auto, slots_per_request


class MemorySplit(NamedTuple):
    """How ``--mamba-full-memory-ratio`` splits a byte budget (all sizes in bytes)."""

    rest_bytes: int
    ratio: float
    state_budget_bytes: int  # rest * r / (1 + r)
    max_mamba_cache_size: int  # state slots
    state_bytes: int  # (slots + 1) * per-slot bytes (+ a GDN model's fixed rings)
    kv_bytes: int  # what the KV pool gets
    kv_tokens: int  # whole pages
    max_running: int  # slots // slots per request
    page_size: int = 1
    per_slot_bytes: int = 0  # state + conv (+ KDA ReplaySSM ring)
    intermediate_bytes: int = 0  # per-draft states taken from the KV share
    ssm_dtype: str = "float32"  # the state dtype this split priced
    draft_cell_bytes: int = 0  # the MTP draft's KV per token priced into the cell (``_drafts``)
    draft_unpriced_bytes: int = 0  # the draft's KV pool allocated beyond this budget
    draft_pool_bytes: int = 0  # an EAGLE draft worker's own KV pool (``_eagle``)


def _ring(spec: ModelSpec, d: Deployment) -> int:
    """ReplaySSM ring bytes per slot when the flag is on (the kinds that keep a ring)."""
    if not d.replayssm or not LINEAR_KINDS[spec.linear_kind].ring:
        return 0
    return sum(replayssm_ring_bytes(spec, 1, d.tp, d.ring_len, d.conv_dtype).values())


def _capped(slots: int, spr: int, d: Deployment) -> int:
    """Requests whose per-draft states SGLang reserves: min(requested, slots // spr), or every
    slot when the radix cache is off and the slots came from the requested count."""
    req = d.max_running_requests
    if d.strategy == "radix_off" and d.max_mamba_cache_size is None and req is not None:
        return slots
    return slots // spr if req is None else min(req, slots // spr)


def _check_gdn_ring(ring: int, spec: ModelSpec, d: Deployment) -> tuple[int, int]:
    """(per-slot ring, fixed ring): a GDN-shaped ring is request-lifetime scratch for
    ``max_running_requests + 1`` requests (``MambaPool.__init__``), which must be given."""
    if not ring or LINEAR_KINDS[spec.linear_kind].ring == "kda":
        return ring, 0
    if d.max_running_requests is None:
        raise ValueError("max_running_requests is required with replayssm on a GDN model")
    return 0, ring * (d.max_running_requests + 1)


def _auto_slots(budget: float, per_req: int, ring: int, fixed: int, spr: int, d: Deployment) -> int:
    if d.max_mamba_cache_size is not None:
        return d.max_mamba_cache_size
    if d.strategy == "radix_off" and d.max_running_requests is not None:
        return d.max_running_requests  # radix off: one slot per requested request
    n = d.draft_tokens
    if n and not d.replayssm:
        return int((budget - per_req * (1 + n) - ring) // (per_req * (1 + n / spr) + ring))
    return int((budget - fixed - (per_req + ring)) // (per_req + ring))


def size_sglang(spec: ModelSpec | str, d: Deployment) -> MemorySplit:
    """SGLang 0.5.23's split of ``d.rest_bytes`` (the profiled rest of one GPU) into slots and
    KV tokens (``_handle_max_mamba_cache``, then tokens ``// cell * page`` rounding).

    Auto size: ``budget = rest * r / (1 + r)``; ``slots = (budget - fixed - per_slot) //
    per_slot`` with ``per_slot = state + conv (+ KDA ring)`` and ``fixed`` a GDN model's
    request-lifetime ring; ``slots + 1`` are allocated. With ``draft_tokens = D > 0`` and no
    ReplaySSM: ``slots = (budget - per_req (1 + D) - extra) // (per_req (1 + D / spr) +
    extra)`` and the intermediate states ``per_req (capped + 1) D`` come out of the KV share.
    Where SGLang refuses to start (no slot fits, nothing left for the KV pool) the split has 0
    slots or 0 KV bytes.
    """
    spec = as_spec(spec)
    refusal = engine_refusal(spec, "sglang")
    if refusal:
        raise ValueError(f"spec: {refusal}")
    ssm = d.state_dtype(spec, "sglang")
    per_req = slot_bytes(spec, d.tp, ssm, d.conv_dtype)
    spr = slots_per_request(d.strategy, d.overlap, d.skip_decode_lock, d.page_size)
    ring, fixed = _check_gdn_ring(_ring(spec, d), spec, d)
    rest_gb = d.rest_bytes / GIB
    budget = rest_gb * d.ratio / (1 + d.ratio) * GIB
    slots = _auto_slots(budget, per_req, ring, fixed, spr, d)
    reserves = d.draft_tokens > 0 and not d.replayssm
    inter = per_req * (_capped(slots, spr, d) + 1) * d.draft_tokens if reserves else 0
    rest_gb -= inter / GIB
    slots = max(slots, 0)  # 0: SGLang refuses to start ("Not enough GPU memory ...")
    state = (slots + 1) * (per_req + ring) + fixed
    kv = max(int((rest_gb - state / GIB) * GIB), 0)
    cell, draft_cell, unpriced = _cells(spec, d)
    tokens = (kv // cell if cell else 0) // d.page_size * d.page_size
    pool = 0
    if d.eagle is not None:  # the draft worker's MHATokenToKVPool: size + page_size rows
        pool = (unpriced + draft_cell) * (tokens + d.page_size)
        unpriced = pool - draft_cell * tokens
    return MemorySplit(
        d.rest_bytes,
        d.ratio,
        int(budget),
        slots,
        state,
        kv,
        tokens,
        slots // spr,
        d.page_size,
        per_req + ring,
        inter,
        ssm,
        draft_cell,
        unpriced if d.eagle is not None else unpriced * tokens,
        pool,
    )


def _cells(spec: ModelSpec, d: Deployment) -> tuple[int, int, int]:
    """(the KV cell per token with the MTP draft's priced share, that share, the per-token
    bytes of draft layers SGLang allocates but does not price): ``cell += int(cell *
    draft_layers / attention_layers)`` (``DefaultPoolConfigurator.__init__``)."""
    cell = kv_bytes_per_token(spec, d.tp, d.kv_dtype, name="kv_dtype")
    if d.eagle is not None:  # priced at the target's per-layer size, allocated at the draft's
        share, alloc = sglang_eagle_cells(spec, d.eagle, cell, d.tp, d.kv_dtype)
        return cell + share, share, alloc - share
    if not d.mtp:
        return cell, 0, 0
    draft = int(cell * sglang_mtp_layers(spec) / spec.n_attn_layers)
    unpriced = cell // spec.n_attn_layers * sglang_unpriced_draft_layers(spec)
    return cell + draft, draft, unpriced


def split_memory(
    spec: ModelSpec | str,
    rest_bytes: int,
    ratio: float = 0.9,
    tp: int = 1,
    ssm_dtype: str | None = None,
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    **knobs: object,
) -> MemorySplit:
    """``size_sglang(spec, Deployment(rest_bytes, ...))``: SGLang 0.5.23's split, spelled with
    the DESIGN.md contract's arguments; ``knobs`` are the other ``Deployment`` fields
    (``strategy``, ``page_size``, ``replayssm``, ``max_running_requests``, ...). ``ssm_dtype``
    None = SGLang's default for the model."""
    d = Deployment.build(
        rest_bytes=rest_bytes,
        tp=tp,
        ssm_dtype=ssm_dtype,
        conv_dtype=conv_dtype,
        kv_dtype=kv_dtype,
        ratio=ratio,
        **knobs,
    )
    return size_sglang(spec, d)


def sglang_log_lines(
    spec: ModelSpec | str, d: Deployment, split: MemorySplit | None = None
) -> list[str]:
    """The startup lines SGLang 0.5.23 prints for this deployment: the state cache, the
    ReplaySSM ring (with ``d.replayssm``), the KV pool and, when the state cache caps
    concurrency under ``d.max_running_requests``, the capping warning (``logs``). The
    ``max_total_num_tokens=`` line is left out: it prints the free GPU memory."""
    spec = as_spec(spec)
    s = size_sglang(spec, d) if split is None else split
    spr = slots_per_request(d.strategy, d.overlap, d.skip_decode_lock, d.page_size)
    cap = s.max_mamba_cache_size // spr
    running = min(cap, d.max_running_requests or cap)
    lines = mamba_allocation_log(
        spec,
        s.max_mamba_cache_size,
        d.tp,
        s.ssm_dtype,
        d.conv_dtype,
        d.draft_tokens,
        cap,
        d.replayssm,
        d.ring_len,
        d.conv_dtype,
        ring_requests=running,
    )
    lines.append(kv_allocation_log(spec, s.kv_tokens, d.kv_dtype, tp=d.tp, page_size=d.page_size))
    msg = capping_message(
        s.max_mamba_cache_size,
        d.strategy,
        d.overlap,
        d.skip_decode_lock,
        requested=_request_bound(spec, d, s.kv_tokens),
    )
    return lines + ([msg] if msg else [])


def _request_bound(spec: ModelSpec, d: Deployment, tokens: int) -> int | None:
    """What ``resolve_max_num_reqs`` caps by the state cache: the requested count, else the
    request-pool estimate (None when the config names no context length), under tokens // 2."""
    if d.max_running_requests is not None:
        return min(d.max_running_requests, tokens // 2)
    if not spec.context_len:
        return None
    return min(request_pool_estimate(tokens, spec.context_len), tokens // 2)


def sglang_min_hit(spec: ModelSpec | str, d: Deployment) -> tuple[int | None, str]:
    """(the shortest prompt that can hit SGLang's prefix cache, why). With the extra buffer a
    state is saved only at multiples of ``max(mamba chunk, page)`` tokens (``mamba_cache_chunk_
    size``: the config's ``mamba_chunk_size``, else FLA's 64; ``ScheduleBatch._mamba_radix_
    cache_v2_req_prepare_for_extend``) and a hit leaves one token to compute, so a prompt needs
    one token more than a multiple; no_buffer saves the state at the end of each prefill step,
    so a prompt one token longer than an earlier one can hit; radix_off caches nothing (None)."""
    spec = as_spec(spec)
    strategy = resolve_auto(d.overlap, d.page_size) if d.strategy == "auto" else d.strategy
    if strategy == "radix_off":
        return None, "the radix cache is off (--disable-radix-cache)"
    if strategy == "no_buffer":
        return 2, "no_buffer saves a state where each prefill step ends: any longer prompt hits"
    chunk = spec.mamba_chunk_size or 64
    grid = max(chunk, d.page_size)
    return grid + 1, f"states are saved every {grid} tokens (max(mamba chunk {chunk}, page))"
