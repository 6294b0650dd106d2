"""How a GPU's byte budget splits between the state cache and the KV pool.

``split_memory`` (SGLang 0.5.23's formula, ``kda_core.sizing.sglang``) is the default;
``split_memory_legacy`` is the K3 write-up's earlier formula (no slot 0, no ring, no pages),
which cannot give both of the K3 write-up's deployments from one budget; ``split_memory_0523`` is
``split_memory`` with the K3 write-up's flags as defaults. ``balanced_ratio`` is the
``--mamba-full-memory-ratio`` at which both pools run out at the same concurrency;
``memory_vs_context`` / ``crossover_context`` compare one request's KV with its one slot.
Derivations: docs/sizing.md. Left out: DCP sizing (except ``balanced_ratio``'s ``dcp`` factor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import MAX_COUNT, ModelSpec
from kda_core.sizing.sglang import MemorySplit, check_ratio, split_memory
from kda_core.sizing.sizes import (
    intermediate_conv_window_bytes,
    kv_bytes_per_token,
    slot_bytes,
)
from kda_core.sizing.slots import slots_per_request

SIZING_FORMULAS: tuple[str, ...] = ("legacy", "sglang-0.5.23")
"""Labels of ``split_formula``: the K3 write-up's earlier formula; SGLang 0.5.23's (default)."""


def split_memory_legacy(
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
    """The K3 write-up's earlier auto sizing of ``rest_bytes`` on one GPU (kept for comparison).

    ``state budget = rest * r / (1 + r)``; ``slots = floor(budget / per_slot)`` or, with
    ``draft_tokens = D > 0`` (speculative decoding, per-draft buffers sized jointly),
    ``floor(budget / (per_slot * (1 + D / spr)))`` where spr = slots per request. The KV pool
    gets the rest. ReplaySSM rings are not part of this formula (left out).
    """
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, MAX_COUNT)
    check_ratio(ratio)
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
    per_tok = kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
    tokens = kv // per_tok if per_tok else 0
    return MemorySplit(rest_bytes, r, budget, slots, state, kv, tokens, running, 1, per_slot)


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
    page_size: int = 1,
) -> MemorySplit:
    """``split_memory`` with the K3 write-up's deployment flags as defaults: ReplaySSM on
    (``--enable-linear-replayssm-spec``, ring 16) and float32 SSM states (what that flag sets
    when ``--mamba-ssm-dtype`` is not given). The K3 write-up's KV line needs ``page_size=64``:
    ``split_memory_0523("kimi-k3", K3_REST_BYTES, K3_RATIO, 8, "bfloat16",
    kv_dtype="fp8_e4m3", page_size=64).kv_tokens == 1_947_648``."""
    return split_memory(
        spec,
        rest_bytes,
        ratio,
        tp,
        ssm_dtype,
        conv_dtype,
        kv_dtype,
        strategy,
        overlap,
        skip_decode_lock,
        draft_tokens,
        replayssm=replayssm,
        ring_len=ring_len,
        page_size=page_size,
    )


def split_formula(label: str) -> Callable[..., MemorySplit]:
    """The split function of a ``SIZING_FORMULAS`` label: ``"legacy"`` the K3 write-up's earlier
    formula, ``"sglang-0.5.23"`` ``split_memory`` (both take the same positional knobs)."""
    if label == "legacy":
        return split_memory_legacy
    if label == "sglang-0.5.23":
        return split_memory
    raise ValueError(f"formula must be one of {SIZING_FORMULAS}, got {label!r}")


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
    kv_tok = kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
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
    kv = ctx.astype(np.int64) * kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
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
    per = kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
    if per == 0:
        raise ValueError("spec has no attention layers")
    return slot_bytes(spec, tp, ssm_dtype, conv_dtype) // per + 1
