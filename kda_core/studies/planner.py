"""Data for the memory_planner app: what a hybrid model costs per GPU and what SGLang does.

One pure function, ``plan``, takes a preset name or a ``ModelSpec`` (e.g. from
``sizing.from_hf_config``) plus the serving knobs (TP, dtypes, budget,
``--mamba-full-memory-ratio`` or an explicit ``--max-mamba-cache-size``, radix strategy,
ReplaySSM, page size, speculative draft tokens) and returns a ``Plan``: per-slot sizes, slots per
request (reserved and held) by strategy, max running requests, SGLang's capping message and
allocation log lines, expected checkpoints per request for a workload, the balancing ratio,
running requests vs ratio (state- vs KV-limited), and per-request memory vs context length
(attention KV growing, the recurrent state flat). ``planner_engines`` puts vLLM next to it.

The split is SGLang 0.5.23's (``sizing.split_memory``, the default of ``sizing.split_formula``;
the K3 write-up's earlier "legacy" formula is not offered). All arithmetic is
``kda_core.sizing``'s; this module only packages it. Left out: DCP, the draft model's own KV.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.sizing import GIB, MemorySplit, ModelSpec

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


@dataclass(frozen=True, slots=True)
class _Knobs:
    """The serving knobs every sizing call of one plan repeats."""

    spec: ModelSpec
    tp: int
    budget: int  # bytes
    ssm_dtype: str
    conv_dtype: str
    kv_dtype: str
    strategy: str
    overlap: bool
    skip: bool
    draft_tokens: int
    replayssm: bool
    ring_len: int
    page_size: int
    requested: int | None

    def split(self, ratio: float, max_mamba_cache_size: int | None = None) -> MemorySplit:
        """``sizing.split_memory`` (SGLang 0.5.23) of the budget at ``ratio`` or given slots."""
        k = self
        return sizing.split_memory(
            k.spec,
            k.budget,
            ratio,
            k.tp,
            k.ssm_dtype,
            k.conv_dtype,
            k.kv_dtype,
            k.strategy,
            k.overlap,
            k.skip,
            k.draft_tokens,
            replayssm=k.replayssm,
            ring_len=k.ring_len,
            page_size=k.page_size,
            requested_running=k.requested,
            max_mamba_cache_size=max_mamba_cache_size,
        )


def _check_model(model: str | ModelSpec, overlap: bool, skip: bool, dtypes: dict) -> ModelSpec:
    """The planner's model (with attention layers: the KV side it plans) after ``check_knobs``."""
    sizing.check_knobs(model, overlap, skip, **dtypes)
    spec = sizing.as_spec(model)
    if spec.n_mla_layers == 0:
        raise ValueError("model must have at least one attention layer for the planner")
    return spec


def plan(
    model: str | ModelSpec = "kimi-k3",
    tp: int = 8,
    budget_gib: float = 28.0,
    ratio: float = 0.9,
    max_mamba_cache_size: int | None = None,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    draft_tokens: int = 0,
    replayssm: bool = False,
    ring_len: int = 16,
    input_len: int = 16_000,
    output_len: int = 3_000,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
    requested_running: int | None = None,
    max_context: int = 1_000_000,
    n_context: int = 64,
    n_ratios: int = 41,
    page_size: int = 1,
) -> Plan:
    """Plan one GPU's caches for ``model`` (a preset name or a ModelSpec) with SGLang 0.5.23's
    split (``sizing.split_memory``: slot 0, the ReplaySSM ring and whole pages paid for).

    The state slots come from ``max_mamba_cache_size`` when given (KV gets the rest of the
    budget), else from ``ratio``; ``replayssm`` is ``--enable-linear-replayssm-spec`` (ring of
    ``ring_len``), ``page_size`` SGLang's ``--page-size`` (KV tokens in whole pages),
    ``requested_running`` its ``--max-running-requests``. ``max_running`` is the least of the
    state cap (slots // reserved), the KV cap (KV tokens // tokens per request) and
    ``requested_running``; ``limited_by`` names the binding one of the first two.
    """
    dtypes = {"ssm_dtype": ssm_dtype, "conv_dtype": conv_dtype, "kv_dtype": kv_dtype}
    spec = _check_model(model, overlap, skip_decode_lock, dtypes)
    if max_mamba_cache_size is not None:
        max_mamba_cache_size = check_int("max_mamba_cache_size", max_mamba_cache_size, 0, 1 << 32)
    if not 0.001 <= float(budget_gib) <= 16384:
        raise ValueError(f"budget_gib must be in [0.001, 16384], got {budget_gib}")
    if replayssm and spec.linear_kind == "mamba2":
        raise ValueError("replayssm applies to KDA and Gated DeltaNet models, not Mamba2")
    page = check_int("page_size", page_size, 1, 1 << 20)
    req = requested_running and check_int("requested_running", requested_running, 1, 1 << 32)
    i_len = check_int("input_len", input_len, 1, 1 << 32)
    o_len = check_int("output_len", output_len, 0, 1 << 32)
    budget = int(float(budget_gib) * GIB)
    dtype_args = (ssm_dtype, conv_dtype, kv_dtype, strategy, overlap, skip_decode_lock)
    knobs = _Knobs(spec, tp, budget, *dtype_args, draft_tokens, replayssm, ring_len, page, req)
    sizes = _sizes(knobs, ratio, max_mamba_cache_size)
    caps = _caps(knobs, sizes, i_len + o_len)
    series = _series(knobs, sizes["state_slots"], i_len + o_len, max_context, n_context, n_ratios)
    ckpts = sizing.checkpoints_per_request(i_len, o_len, chunked_prefill_size, track_interval)
    return Plan(
        model=spec.name,
        spec=spec,
        tp=tp,
        ssm_dtype=ssm_dtype,
        conv_dtype=conv_dtype,
        kv_dtype=kv_dtype,
        strategy=strategy,
        overlap=overlap,
        skip_decode_lock=skip_decode_lock,
        budget_bytes=budget,
        ratio=float(ratio),
        draft_tokens=draft_tokens,
        replayssm=replayssm,
        ring_len=ring_len,
        input_len=i_len,
        output_len=o_len,
        tokens_per_request=i_len + o_len,
        page_size=page,
        requested_running=req,
        checkpoints_per_request=ckpts,
        **sizes,
        **caps,
        **series,
    )


def _sizes(k: _Knobs, ratio: float, max_mamba_cache_size: int | None) -> dict:
    """Per-slot bytes, slots per request, the split and the resulting slot / KV-token counts."""
    ssm = sizing.kda_state_bytes(k.spec, k.tp, k.ssm_dtype)
    conv = sizing.conv_state_bytes(k.spec, k.tp, k.conv_dtype)
    kv_tok = sizing.kv_bytes_per_token(k.spec, k.tp, k.kv_dtype)
    split = k.split(ratio, max_mamba_cache_size)
    return {
        "ssm_bytes": ssm,
        "conv_bytes": conv,
        "slot_bytes": ssm + conv,
        "kv_bytes_per_token": kv_tok,
        "tokens_per_slot": (ssm + conv) / kv_tok,
        "slots_per_request": sizing.slots_per_request(k.strategy, k.overlap, k.skip),
        "slots_held": sizing.slots_held_per_request(k.strategy, k.overlap),
        "split": split,
        "state_slots": split.max_mamba_cache_size,
        "kv_tokens": split.kv_tokens,
    }


def _caps(k: _Knobs, sizes: dict, tokens_per_req: int) -> dict:
    """Max running requests (state vs KV cap), SGLang's message and log lines, ring bytes."""
    slots, kv_tokens = sizes["state_slots"], sizes["kv_tokens"]
    by_state = sizing.max_running_requests(slots, k.strategy, k.overlap, k.skip)
    by_kv = kv_tokens // tokens_per_req
    limited_by = "state" if by_state <= by_kv else "kv"
    max_running = min(by_state, by_kv, k.requested or by_state)
    msg = (
        sizing.capping_message(slots, k.strategy, k.overlap, k.skip, k.ssm_dtype, k.requested)
        if limited_by == "state"
        else None
    )
    running = min(by_state, k.requested or by_state)  # SGLang's max_running_requests
    args = (k.spec, slots, k.tp, k.ssm_dtype, k.conv_dtype, k.draft_tokens, by_state)
    ring = (k.replayssm, k.ring_len, k.conv_dtype)
    logs = sizing.mamba_allocation_log(*args, *ring, ring_requests=running)
    logs.append(
        sizing.kv_allocation_log(k.spec, kv_tokens, k.kv_dtype, tp=k.tp, page_size=k.page_size)
    )
    ring_slots = slots + 1 if k.spec.linear_kind == "kda" else running + 1
    # sizing.balanced_ratio prices a slot without the KDA ring; SGLang's split pays it per slot
    balanced = sizing.balanced_ratio(
        k.spec,
        tokens_per_req,
        k.tp,
        k.ssm_dtype,
        k.conv_dtype,
        k.kv_dtype,
        None,
        k.strategy,
        k.overlap,
        k.skip,
    )
    rings = (
        sizing.replayssm_ring_bytes(k.spec, ring_slots, k.tp, k.ring_len, k.conv_dtype)
        if k.replayssm
        else dict.fromkeys(_RING_NAMES, 0)
    )
    return {
        "max_running": max_running,
        "limited_by": limited_by,
        "capping_message": msg,
        "log_lines": tuple(logs),
        "ring_bytes": rings,
        "intermediate_conv_bytes": sizing.intermediate_conv_window_bytes(
            k.spec, by_state, k.draft_tokens, k.tp, k.conv_dtype
        ),
        "naive_draft_state_bytes": sizing.intermediate_ssm_bytes(
            k.spec, by_state, k.draft_tokens, k.tp, k.ssm_dtype, replayssm=False
        ),
        "balanced_ratio": balanced * sizes["split"].per_slot_bytes / sizes["slot_bytes"],
    }


def _strategy_row(name: str, overlap: bool, skip: bool, slots: int) -> tuple[int, int, int]:
    try:
        reserved = sizing.slots_per_request(name, overlap, skip)
        held = sizing.slots_held_per_request(name, overlap)
    except ValueError:
        return -1, -1, -1
    return reserved, held, slots // reserved


def _series(
    k: _Knobs, slots: int, tokens_per_req: int, max_context: int, n_context: int, n_ratios: int
) -> dict:
    """The strategy table, memory vs context, and running requests vs ratio."""
    n_context = check_int("n_context", n_context, 2, 4096)
    n_ratios = check_int("n_ratios", n_ratios, 2, 4096)
    max_context = check_int("max_context", max_context, 2, 1 << 32)
    names = _STRATEGY_ROWS
    rows = np.array([_strategy_row(s, k.overlap, k.skip, slots) for s in names])
    ctx = np.unique(np.geomspace(1, max_context, n_context).astype(np.int64))
    kv_b, st_b = sizing.memory_vs_context(k.spec, ctx, k.tp, k.ssm_dtype, k.conv_dtype, k.kv_dtype)
    ratios = np.geomspace(0.01, 10.0, n_ratios)
    rs_state = np.empty(n_ratios, np.int64)
    rs_kv = np.empty(n_ratios, np.int64)
    for j, r in enumerate(ratios.tolist()):
        s = k.split(r)
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
        "crossover_context": sizing.crossover_context(
            k.spec, k.tp, k.ssm_dtype, k.conv_dtype, k.kv_dtype
        ),
        "ratios": ratios,
        "running_by_state": rs_state,
        "running_by_kv": rs_kv,
        "max_running_by_ratio": np.minimum(rs_state, rs_kv),
    }


def csv_tables(p: Plan) -> dict[str, dict[str, object]]:
    """The CSV rows behind the figures: memory vs context (one request's attention KV bytes vs
    one state slot), running requests vs ``--mamba-full-memory-ratio`` (state, KV, min), and
    the strategy table (-1 where a strategy is invalid)."""
    return {
        "memory_vs_context": {
            "context_tokens": p.context_lens,
            "kv_bytes": p.kv_bytes,
            "state_slot_bytes": p.state_bytes,
        },
        "running_vs_ratio": {
            "ratio": p.ratios,
            "running_by_state": p.running_by_state,
            "running_by_kv": p.running_by_kv,
            "max_running": p.max_running_by_ratio,
        },
        "strategies": {
            "strategy": list(p.strategy_names),
            "slots_reserved": p.strategy_reserved,
            "slots_held": p.strategy_held,
            "max_running_by_state": p.strategy_max_running,
        },
    }


__all__ = [
    "Plan",
    "plan",
    "csv_tables",
]
