"""The balancing ratio and one request's memory vs context (SGLang 0.5.23's arithmetic).

``balanced_ratio`` is the ``--mamba-full-memory-ratio`` at which the state cache and the KV pool
run out at the same concurrency; ``memory_vs_context`` / ``crossover_context`` compare one
request's KV with its one slot. Derivations: docs/sizing.md. Left out: DCP sizing (except
``balanced_ratio``'s ``dcp`` factor).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sizes import kv_bytes_per_token, slot_bytes
from kda_core.sizing.slots import slots_per_request


def balanced_ratio(
    spec: ModelSpec | str,
    tokens_per_request: float,
    tp: int = 1,
    ssm_dtype: str | None = None,
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
    ssm_dtype: str | None = None,
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
    ssm_dtype: str | None = None,
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> int:
    """Smallest context length at which one request's MLA KV exceeds its one KDA slot."""
    per = kv_bytes_per_token(spec, tp, kv_dtype, name="kv_dtype")
    if per == 0:
        raise ValueError("spec has no attention layers")
    return slot_bytes(spec, tp, ssm_dtype, conv_dtype) // per + 1
