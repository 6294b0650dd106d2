"""Data for the memory_planner app: what a hybrid model costs per GPU and what SGLang does.

One pure function, ``plan``, takes a preset name or a ``ModelSpec`` (e.g. from
``sizing.from_hf_config``) and a ``sizing.Deployment`` (TP, dtypes, budget,
``--mamba-full-memory-ratio`` or an explicit ``--max-mamba-cache-size``, radix strategy,
ReplaySSM, page size, speculative draft tokens, an MTP drafter; left-out dtypes are SGLang's
defaults) and returns a ``Plan``: per-slot sizes, slots per
request (reserved and held) by strategy, max running requests, SGLang's capping message and
allocation log lines, expected checkpoints per request for a workload, the balancing ratio,
running requests vs ratio (state- vs KV-limited), and per-request memory vs context length
(attention KV growing, the recurrent state flat). ``planner_engines`` puts vLLM next to it.

The split is SGLang 0.5.23's (``sizing.size_sglang``). All arithmetic is
``kda_core.sizing``'s; this module only packages it. With ``mtp=True`` (SGLang's
``--speculative-algorithm NEXTN``, no draft path) the drafter's own KV is SGLang's: the share
priced into the KV cell, the KV tokens without it, and the one-layer pool it allocates beyond the
budget (docs/sizing.md, "Speculative decoding"); an EAGLE drafter with its own config
(``Deployment.eagle``) likewise, priced at the target's per-layer size and allocated at its own.
Left out: DCP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.sizing import GIB, Deployment, MemorySplit, ModelSpec
from kda_core.sizing.deployment import gib_bytes
from kda_core.sizing.split import crossover_context, memory_vs_context

_STRATEGY_ROWS: tuple[str, ...] = ("radix_off", "no_buffer", "extra_buffer", "extra_buffer_lazy")
_RING_NAMES = ("d", "k", "g", "rawv", "rawk", "beta")


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything the planner shows (bytes are per GPU; arrays are numpy).

    Strategy table ``strategy_names [4]``, ``strategy_reserved [4]``, ``strategy_held [4]``,
    ``strategy_max_running [4]`` (for this plan's slot count; -1 where a strategy is invalid,
    e.g. lazy without overlap). Context series ``context_lens [C]``, ``kv_bytes [C]`` (one
    request's attention KV), ``state_bytes [C]`` (one slot, flat). Ratio series ``ratios [R]``,
    ``running_by_state [R]``, ``running_by_kv [R]`` (for ``tokens_per_request``),
    ``max_running_by_ratio [R]`` = elementwise min of the two (the concurrency SGLang reaches at
    each ratio; its argmax is near ``balanced_ratio``).
    """

    model: str
    spec: ModelSpec
    deployment: Deployment
    tp: int
    ssm_dtype: str
    conv_dtype: str
    kv_dtype: str
    strategy: str
    overlap: bool
    skip_decode_lock: bool
    ssm_bytes: int
    conv_bytes: int
    slot_bytes: int
    kv_bytes_per_token: int
    tokens_per_slot: float
    slots_per_request: int
    slots_held: int
    budget_bytes: int
    ratio: float
    split: MemorySplit
    state_slots: int
    kv_tokens: int
    max_running: int
    limited_by: str  # "state" or "kv"
    capping_message: str | None
    log_lines: tuple[str, ...]
    draft_tokens: int
    replayssm: bool
    ring_len: int
    ring_bytes: dict[str, int]
    intermediate_conv_bytes: int
    naive_draft_state_bytes: int
    input_len: int
    output_len: int
    tokens_per_request: int
    checkpoints_per_request: int
    balanced_ratio: float
    strategy_names: tuple[str, ...]
    strategy_reserved: np.ndarray
    strategy_held: np.ndarray
    strategy_max_running: np.ndarray
    context_lens: np.ndarray
    kv_bytes: np.ndarray
    state_bytes: np.ndarray
    crossover_context: int
    ratios: np.ndarray
    running_by_state: np.ndarray
    running_by_kv: np.ndarray
    max_running_by_ratio: np.ndarray
    page_size: int
    requested_running: int | None
    mtp: bool
    draft_kv_bytes_per_token: int  # the MTP drafter's share of the KV cell (0 without MTP)
    draft_unpriced_bytes: int  # the drafter's KV pool allocated beyond the budget
    kv_tokens_without_draft: int  # the KV tokens the same budget gives without the drafter


_DEFAULT_GIB = 28.0  # the planner's default cache budget per GPU
_DEFAULT_TP = 8


def _check_model(model: str | ModelSpec) -> ModelSpec:
    """The planner's model (with attention layers: the KV side it plans)."""
    spec = sizing.as_spec(model, "model")
    if spec.n_attn_layers == 0:
        raise ValueError("model must have at least one attention layer for the planner")
    return spec


def _check_deployment(deployment: Deployment | None, budget_gib: float | None, knobs: dict):
    """The plan's deployment: ``deployment`` with ``knobs`` changed, else one built from the
    planner's defaults (TP8, 28 GiB) and ``knobs``; ``budget_gib`` sets ``rest_bytes``."""
    if budget_gib is not None:
        knobs["rest_bytes"] = gib_bytes("budget_gib", budget_gib)
    if deployment is None:
        knobs.setdefault("rest_bytes", int(_DEFAULT_GIB * GIB))
        knobs.setdefault("tp", _DEFAULT_TP)
        return Deployment.build(**knobs)
    if not isinstance(deployment, Deployment):
        raise ValueError(f"deployment must be a sizing.Deployment, got {type(deployment).__name__}")
    return deployment.replace(**knobs) if knobs else deployment


def plan(
    model: str | ModelSpec = "kimi-k3",
    deployment: Deployment | None = None,
    *,
    budget_gib: float | None = None,
    input_len: int = 16_000,
    output_len: int = 3_000,
    track_interval: int = 256,
    max_context: int = 1_000_000,
    n_context: int = 64,
    n_ratios: int = 41,
    **knobs: object,
) -> Plan:
    """Plan one GPU's caches for ``model`` (a preset name or a ModelSpec) on ``deployment``
    (a ``sizing.Deployment``; ``knobs`` change its fields, e.g. ``tp=8``, ``ssm_dtype=...``;
    without one: TP8, 28 GiB and SGLang's defaults) with SGLang 0.5.23's split
    (``sizing.size_sglang``: slot 0, the ReplaySSM ring and whole pages paid for).

    The state slots come from ``max_mamba_cache_size`` when given (KV gets the rest), else from
    the ratio. ``max_running`` is the least of the state cap (slots // reserved), the KV cap
    (KV tokens // tokens per request) and ``max_running_requests``; ``limited_by`` names the
    binding one of the first two. The SSM dtype left None is SGLang's default for the model.
    """
    spec = _check_model(model)
    d = _check_deployment(deployment, budget_gib, dict(knobs))
    if d.replayssm and not sizing.LINEAR_KINDS[spec.linear_kind].ring:
        raise ValueError("replayssm applies to KDA and Gated DeltaNet models")
    i_len = check_int("input_len", input_len, 1, 1 << 32)
    o_len = check_int("output_len", output_len, 0, 1 << 32)
    sizes = _sizes(spec, d)
    caps = _caps(spec, d, sizes, i_len + o_len)
    series = _series(spec, d, sizes["state_slots"], i_len + o_len, max_context, n_context, n_ratios)
    ckpts = sizing.checkpoints_per_request(i_len, o_len, d.chunked_prefill_size, track_interval)
    return Plan(
        model=spec.name,
        spec=spec,
        deployment=d,
        tp=d.tp,
        ssm_dtype=sizes["split"].ssm_dtype,
        conv_dtype=d.conv_dtype,
        kv_dtype=d.kv_dtype,
        strategy=d.strategy,
        overlap=d.overlap,
        skip_decode_lock=d.skip_decode_lock,
        budget_bytes=d.rest_bytes,
        ratio=d.ratio,
        draft_tokens=d.draft_tokens,
        replayssm=d.replayssm,
        ring_len=d.ring_len,
        input_len=i_len,
        output_len=o_len,
        tokens_per_request=i_len + o_len,
        page_size=d.page_size,
        requested_running=d.max_running_requests,
        mtp=d.mtp,
        checkpoints_per_request=ckpts,
        **sizes,
        **caps,
        **series,
    )


def _sizes(spec: ModelSpec, d: Deployment) -> dict:
    """Per-slot bytes, slots per request, the split and the resulting slot / KV-token counts."""
    split = sizing.size_sglang(spec, d)
    ssm = sizing.kda_state_bytes(spec, d.tp, split.ssm_dtype)
    conv = sizing.conv_state_bytes(spec, d.tp, d.conv_dtype)
    kv_tok = sizing.kv_bytes_per_token(spec, d.tp, d.kv_dtype)
    return {
        "ssm_bytes": ssm,
        "conv_bytes": conv,
        "slot_bytes": ssm + conv,
        "kv_bytes_per_token": kv_tok,
        "tokens_per_slot": (ssm + conv) / kv_tok,
        "slots_per_request": sizing.slots_per_request(d.strategy, d.overlap, d.skip_decode_lock),
        "slots_held": sizing.slots_held_per_request(d.strategy, d.overlap),
        "split": split,
        "state_slots": split.max_mamba_cache_size,
        "kv_tokens": split.kv_tokens,
        "draft_kv_bytes_per_token": split.draft_cell_bytes,
        "draft_unpriced_bytes": split.draft_unpriced_bytes,
        "kv_tokens_without_draft": (
            sizing.size_sglang(spec, d.replace(mtp=False, eagle=None)).kv_tokens
            if d.mtp or d.eagle is not None
            else split.kv_tokens
        ),
    }


def _caps(spec: ModelSpec, d: Deployment, sizes: dict, tokens_per_req: int) -> dict:
    """Max running requests (state vs KV cap), SGLang's lines and warning, ring bytes."""
    split = sizes["split"]
    slots, kv_tokens, ssm = sizes["state_slots"], sizes["kv_tokens"], split.ssm_dtype
    by_state = sizing.max_running_requests(slots, d.strategy, d.overlap, d.skip_decode_lock)
    by_kv = kv_tokens // tokens_per_req
    limited_by = "state" if by_state <= by_kv else "kv"
    req = d.max_running_requests
    lines = sizing.sglang_log_lines(spec, d, split)
    capped = [x for x in lines if x.startswith("max_running_requests is capped")]
    running = min(by_state, req or by_state)  # SGLang's max_running_requests
    ring_kind = sizing.LINEAR_KINDS[spec.linear_kind].ring
    ring_slots = slots + 1 if ring_kind == "kda" else running + 1
    # balanced_ratio prices a slot without the KDA ring; SGLang's split pays it per slot
    balanced = sizing.balanced_ratio(
        spec,
        tokens_per_req,
        d.tp,
        ssm,
        d.conv_dtype,
        d.kv_dtype,
        None,
        d.strategy,
        d.overlap,
        d.skip_decode_lock,
    )
    rings = (
        sizing.replayssm_ring_bytes(spec, ring_slots, d.tp, d.ring_len, d.conv_dtype)
        if d.replayssm
        else dict.fromkeys(_RING_NAMES, 0)
    )
    inter_conv = sizing.intermediate_conv_window_bytes(
        spec, by_state, d.draft_tokens, d.tp, d.conv_dtype
    )
    naive = sizing.intermediate_ssm_bytes(
        spec, by_state, d.draft_tokens, d.tp, ssm, replayssm=False
    )
    return {
        "max_running": min(by_state, by_kv, req or by_state),
        "limited_by": limited_by,
        "capping_message": capped[0] if capped and limited_by == "state" else None,
        "log_lines": tuple(x for x in lines if x not in capped),
        "ring_bytes": rings,
        "intermediate_conv_bytes": inter_conv,
        "naive_draft_state_bytes": naive,
        "balanced_ratio": balanced * split.per_slot_bytes / sizes["slot_bytes"],
    }


def _strategy_row(name: str, overlap: bool, skip: bool, slots: int) -> tuple[int, int, int]:
    try:
        reserved = sizing.slots_per_request(name, overlap, skip)
        held = sizing.slots_held_per_request(name, overlap)
    except ValueError:
        return -1, -1, -1
    return reserved, held, slots // reserved


def _series(
    spec: ModelSpec,
    d: Deployment,
    slots: int,
    tokens_per_req: int,
    max_context: int,
    n_context: int,
    n_ratios: int,
) -> dict:
    """The strategy table, memory vs context, and running requests vs ratio."""
    n_context = check_int("n_context", n_context, 2, 4096)
    n_ratios = check_int("n_ratios", n_ratios, 2, 4096)
    max_context = check_int("max_context", max_context, 2, 1 << 32)
    names = _STRATEGY_ROWS
    rows = np.array([_strategy_row(s, d.overlap, d.skip_decode_lock, slots) for s in names])
    ctx = np.unique(np.geomspace(1, max_context, n_context).astype(np.int64))
    dtypes = (d.tp, d.state_dtype(spec, "sglang"), d.conv_dtype, d.kv_dtype)
    kv_b, st_b = memory_vs_context(spec, ctx, *dtypes)
    ratios = np.geomspace(0.01, 10.0, n_ratios)
    rs_state = np.empty(n_ratios, np.int64)
    rs_kv = np.empty(n_ratios, np.int64)
    for j, r in enumerate(ratios.tolist()):
        s = sizing.size_sglang(spec, d.replace(ratio=r, max_mamba_cache_size=None))
        rs_state[j] = s.max_running
        rs_kv[j] = s.kv_tokens // tokens_per_req
    return {
        "strategy_names": names,
        "strategy_reserved": rows[:, 0].astype(np.int64),
        "strategy_held": rows[:, 1].astype(np.int64),
        "strategy_max_running": rows[:, 2].astype(np.int64),
        "context_lens": ctx,
        "kv_bytes": kv_b,
        "state_bytes": st_b,
        "crossover_context": crossover_context(spec, *dtypes),
        "ratios": ratios,
        "running_by_state": rs_state,
        "running_by_kv": rs_kv,
        "max_running_by_ratio": np.minimum(rs_state, rs_kv),
    }


__all__ = [
    "Plan",
    "plan",
]
