"""Data for the memory_planner app: what a real config costs per GPU and what SGLang would do.

One pure function, ``plan``, takes a preset name or a custom ``ModelSpec`` plus the serving
knobs (TP, dtypes, budget, ``--mamba-full-memory-ratio`` or an explicit
``--max-mamba-cache-size``, radix strategy, speculative draft tokens) and returns a ``Plan``:
per-slot sizes, slots per request (reserved and held) by strategy, max running requests, the
SGLang-like capping message and allocation log lines, ReplaySSM ring sizes, expected
checkpoints per request for a workload, the balancing ratio, running requests vs ratio (state-
vs KV-limited), and per-request memory vs context length (MLA growing, KDA flat).

All arithmetic is ``kda_core.sizing``'s; this module only packages it. Left out: DCP, the
draft model's own KV, page rounding of the KV pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.sizing import GIB, MemorySplit, ModelSpec
from kda_core.sizing.presets import MAX_DIM

_STRATEGY_ROWS: tuple[str, ...] = ("radix_off", "no_buffer", "extra_buffer", "extra_buffer_lazy")


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything the planner shows (bytes are per GPU; arrays are numpy).

    Strategy table ``strategy_names [4]``, ``strategy_reserved [4]``, ``strategy_held [4]``,
    ``strategy_max_running [4]`` (for this plan's slot count; -1 where a strategy is invalid,
    e.g. lazy without overlap). Context series ``context_lens [C]``, ``mla_bytes [C]`` (one
    request's MLA KV), ``kda_bytes [C]`` (one slot, flat). Ratio series ``ratios [R]``,
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
    ring_len: int | None
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
    mla_bytes: np.ndarray
    kda_bytes: np.ndarray
    crossover_context: int
    ratios: np.ndarray
    running_by_state: np.ndarray
    running_by_kv: np.ndarray
    max_running_by_ratio: np.ndarray
    formula: str = "legacy"  # sizing.SIZING_FORMULAS: the K3 write-up's, or SGLang 0.5.23's


def custom_spec(
    name: str = "custom",
    n_kda_layers: int = 69,
    n_mla_layers: int = 24,
    kda_heads: int = 96,
    head_dim: int = 128,
    conv_kernel: int = 4,
    kv_lora_rank: int = 512,
    qk_rope_head_dim: int = 64,
) -> ModelSpec:
    """A ModelSpec from the few numbers a planner user types (K = V = ``head_dim``)."""
    head_dim = check_int("head_dim", head_dim, 1, MAX_DIM)  # ModelSpec would say head_k_dim
    return ModelSpec(
        name=name,
        n_kda_layers=n_kda_layers,
        n_mla_layers=n_mla_layers,
        kda_heads=kda_heads,
        head_k_dim=head_dim,
        head_v_dim=head_dim,
        conv_kernel=conv_kernel,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=qk_rope_head_dim,
    )


def _strategy_row(name: str, overlap: bool, skip: bool, slots: int) -> tuple[int, int, int]:
    try:
        reserved = sizing.slots_per_request(name, overlap, skip)
        held = sizing.slots_held_per_request(name, overlap)
    except ValueError:
        return -1, -1, -1
    return reserved, held, slots // reserved


def _check_model(
    model: str | ModelSpec, overlap: bool, skip: bool, dtypes: dict[str, str]
) -> ModelSpec:
    """The planner's model (with MLA layers: the KV side it plans) after ``check_knobs``."""
    sizing.check_knobs(model, overlap, skip, **dtypes)
    spec = sizing.preset(model) if isinstance(model, str) else model
    if spec.n_mla_layers * spec.mla_latent_dim == 0:
        raise ValueError("model must have at least one MLA layer for the planner")
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
    ring_len: int | None = 16,
    input_len: int = 16_000,
    output_len: int = 3_000,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
    requested_running: int | None = None,
    max_context: int = 1_000_000,
    n_context: int = 64,
    n_ratios: int = 41,
    formula: str = "legacy",
) -> Plan:
    """Plan one GPU's caches for ``model`` (a preset name or a ModelSpec).

    The state slots come from ``max_mamba_cache_size`` when given (KV gets the rest of the
    budget), else from ``ratio`` (``sizing.split_memory``, jointly with ``draft_tokens``;
    ``formula="sglang-0.5.23"``: ``sizing.split_memory_0523``, which also pays slot 0 and,
    with ``ring_len``, the ReplaySSM ring per slot).
    ``max_running`` is the minimum of the state cap (slots // reserved per request) and the KV
    cap (KV tokens // tokens per request); ``limited_by`` names the binding one.
    """
    dtypes = {"ssm_dtype": ssm_dtype, "conv_dtype": conv_dtype, "kv_dtype": kv_dtype}
    spec = _check_model(model, overlap, skip_decode_lock, dtypes)
    if max_mamba_cache_size is not None:
        max_mamba_cache_size = check_int("max_mamba_cache_size", max_mamba_cache_size, 0, 1 << 32)
    if not 0.001 <= float(budget_gib) <= 16384:
        raise ValueError(f"budget_gib must be in [0.001, 16384], got {budget_gib}")
    n_context = check_int("n_context", n_context, 2, 4096)
    n_ratios = check_int("n_ratios", n_ratios, 2, 4096)
    max_context = check_int("max_context", max_context, 2, 1 << 32)
    i_len = check_int("input_len", input_len, 1, 1 << 32)
    o_len = check_int("output_len", output_len, 0, 1 << 32)
    knobs = _Knobs(
        spec, tp, int(float(budget_gib) * GIB), ssm_dtype, conv_dtype, kv_dtype, strategy,
        overlap, skip_decode_lock, draft_tokens, _parse_formula(formula, ring_len),
    )  # fmt: skip
    sizes = _sizes(knobs, ratio, max_mamba_cache_size)
    tokens_per_req = i_len + o_len
    caps = _caps(knobs, sizes, tokens_per_req, requested_running, ring_len)
    series = _series(knobs, sizes["state_slots"], tokens_per_req, max_context, n_context, n_ratios)
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
        budget_bytes=knobs.budget,
        ratio=float(ratio),
        draft_tokens=draft_tokens,
        ring_len=ring_len,
        input_len=i_len,
        output_len=o_len,
        tokens_per_request=tokens_per_req,
        checkpoints_per_request=sizing.checkpoints_per_request(
            i_len, o_len, chunked_prefill_size, track_interval
        ),
        formula=formula,
        **sizes,
        **caps,
        **series,
    )


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
    split_fn: Callable[..., MemorySplit]

    def split(self, ratio: float) -> MemorySplit:
        k = self
        return k.split_fn(
            k.spec, k.budget, ratio, k.tp, k.ssm_dtype, k.conv_dtype, k.kv_dtype, k.strategy,
            k.overlap, k.skip, k.draft_tokens,
        )  # fmt: skip


def _sizes(k: _Knobs, ratio: float, max_mamba_cache_size: int | None) -> dict:
    """Per-slot bytes, slots per request, the split and the resulting slot / KV-token counts."""
    ssm = sizing.kda_state_bytes(k.spec, k.tp, k.ssm_dtype)
    conv = sizing.conv_state_bytes(k.spec, k.tp, k.conv_dtype)
    slot = ssm + conv
    kv_tok = sizing.mla_kv_bytes_per_token(k.spec, k.kv_dtype)
    assert kv_tok > 0, "plan checked that the model has MLA layers"
    spr = sizing.slots_per_request(k.strategy, k.overlap, k.skip)
    held = sizing.slots_held_per_request(k.strategy, k.overlap)
    split = k.split(ratio)
    if max_mamba_cache_size is None:
        slots, kv_tokens = split.max_mamba_cache_size, split.kv_tokens
    else:
        slots = max_mamba_cache_size  # checked by plan
        kv_tokens = max(k.budget - slots * slot, 0) // kv_tok
    return {
        "ssm_bytes": ssm,
        "conv_bytes": conv,
        "slot_bytes": slot,
        "kv_bytes_per_token": kv_tok,
        "tokens_per_slot": slot / kv_tok,
        "slots_per_request": spr,
        "slots_held": held,
        "split": split,
        "state_slots": slots,
        "kv_tokens": kv_tokens,
    }


def _caps(
    k: _Knobs, sizes: dict, tokens_per_req: int, requested: int | None, ring_len: int | None
) -> dict:
    """Max running requests (state vs KV cap), SGLang's message and log lines, ring bytes."""
    slots, kv_tokens = sizes["state_slots"], sizes["kv_tokens"]
    by_state = sizing.max_running_requests(slots, k.strategy, k.overlap, k.skip)
    by_kv = kv_tokens // tokens_per_req
    max_running = min(by_state, by_kv)
    limited_by = "state" if by_state <= by_kv else "kv"
    if requested is not None:
        max_running = min(max_running, requested)
    msg = (
        sizing.capping_message(slots, k.strategy, k.overlap, k.skip, k.ssm_dtype, requested)
        if limited_by == "state"
        else None
    )
    logs = sizing.mamba_allocation_log(
        k.spec, slots, k.tp, k.ssm_dtype, k.conv_dtype, k.draft_tokens, by_state, True, ring_len
    )
    logs.append(sizing.kv_allocation_log(k.spec, kv_tokens, k.kv_dtype))
    rings = (
        sizing.replayssm_ring_bytes(k.spec, slots + 1, k.tp, ring_len)
        if ring_len is not None
        else {name: 0 for name in ("d", "k", "g", "rawv", "rawk", "beta")}
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
        "balanced_ratio": sizing.balanced_ratio(
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
        ),  # fmt: skip
    }


def _series(
    k: _Knobs, slots: int, tokens_per_req: int, max_context: int, n_context: int, n_ratios: int
) -> dict:
    """The strategy table, memory vs context, and running requests vs ratio."""
    names = _STRATEGY_ROWS
    rows = np.array([_strategy_row(s, k.overlap, k.skip, slots) for s in names])
    ctx = np.unique(np.geomspace(1, max_context, n_context).astype(np.int64))
    mla_b, kda_b = sizing.memory_vs_context(
        k.spec, ctx, k.tp, k.ssm_dtype, k.conv_dtype, k.kv_dtype
    )
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
        "mla_bytes": mla_b,
        "kda_bytes": kda_b,
        "crossover_context": sizing.crossover_context(
            k.spec, k.tp, k.ssm_dtype, k.conv_dtype, k.kv_dtype
        ),
        "ratios": ratios,
        "running_by_state": rs_state,
        "running_by_kv": rs_kv,
        "max_running_by_ratio": np.minimum(rs_state, rs_kv),
    }


def _parse_formula(formula: str, ring_len: int | None) -> Callable[..., MemorySplit]:
    """The sizing formula by its label (``sizing.SIZING_FORMULAS``)."""
    if formula == "legacy":
        return sizing.split_memory_legacy
    if formula == "sglang-0.5.23":
        return partial(
            sizing.split_memory_0523, replayssm=ring_len is not None, ring_len=ring_len or 16
        )
    raise ValueError(f"formula must be one of {sizing.SIZING_FORMULAS}, got {formula!r}")


def context_table(p: Plan) -> dict[str, np.ndarray]:
    """CSV rows of memory vs context: one request's MLA KV bytes vs one KDA slot."""
    return {"context_tokens": p.context_lens, "mla_kv_bytes": p.mla_bytes,
            "kda_slot_bytes": p.kda_bytes}  # fmt: skip


def ratio_table(p: Plan) -> dict[str, np.ndarray]:
    """CSV rows of running requests vs ``--mamba-full-memory-ratio`` (state, KV, min)."""
    return {"ratio": p.ratios, "running_by_state": p.running_by_state,
            "running_by_kv": p.running_by_kv, "max_running": p.max_running_by_ratio}  # fmt: skip


def strategy_table(p: Plan) -> dict[str, object]:
    """CSV rows of the strategy table (-1 where a strategy is invalid)."""
    return {"strategy": list(p.strategy_names), "slots_reserved": p.strategy_reserved,
            "slots_held": p.strategy_held,
            "max_running_by_state": p.strategy_max_running}  # fmt: skip


__all__ = [
    "Plan",
    "plan",
    "custom_spec",
    "context_table",
    "ratio_table",
    "strategy_table",
]
