"""Real model presets and the byte / slot / concurrency arithmetic SGLang uses for KDA hybrids.

Modules: ``presets`` (ModelSpec, preset, tiny_spec, dtypes), ``sizes`` (bytes per slot, per
token, speculative buffers), ``slots`` (slots per request, concurrency caps), ``split`` (how a
budget splits between state cache and KV pool), ``checkpoints`` (states stored per request),
``logs`` (SGLang's log lines). Exact integer arithmetic on Python ints; docs/sizing.md has the
conventions, the derivations and the SGLang sources. This file only re-exports.
"""

from kda_core._checks import check_int as _check_int  # noqa: F401 (studies/planner.py calls it)
from kda_core.sizing.checkpoints import (
    checkpoints_per_request,
    checkpoints_upper_bound,
    decode_track_points,
    mean_checkpoints_per_request,
)
from kda_core.sizing.logs import (
    capping_message,
    kv_allocation_log,
    mamba_allocation_log,
    pool_usage,
    usage_log,
)
from kda_core.sizing.presets import (
    DTYPE_BYTES,
    GIB,
    MIB,
    PRESETS,
    TORCH_DTYPE_NAME,
    ModelSpec,
    as_spec,
    check_knobs,
    dtype_bytes,
    local_heads,
    preset,
    tiny_spec,
)
from kda_core.sizing.sizes import (
    conv_state_bytes,
    default_ring_len,
    int8_scale_bytes,
    intermediate_conv_window_bytes,
    intermediate_ssm_bytes,
    kda_state_bytes,
    kv_tokens_for_bytes,
    mla_kv_bytes_per_token,
    next_pow2,
    replayssm_ring_bytes,
    slot_bytes,
)
from kda_core.sizing.slots import (
    STRATEGIES,
    max_running_requests,
    request_pool_estimate,
    resolve_max_num_reqs,
    slots_held_per_request,
    slots_per_request,
)
from kda_core.sizing.split import (
    SIZING_FORMULAS,
    MemorySplit,
    balanced_ratio,
    crossover_context,
    memory_vs_context,
    split_memory,
    split_memory_0523,
)

__all__ = [
    "DTYPE_BYTES",
    "GIB",
    "MIB",
    "PRESETS",
    "SIZING_FORMULAS",
    "STRATEGIES",
    "TORCH_DTYPE_NAME",
    "MemorySplit",
    "ModelSpec",
    "as_spec",
    "check_knobs",
    "balanced_ratio",
    "capping_message",
    "checkpoints_per_request",
    "checkpoints_upper_bound",
    "conv_state_bytes",
    "crossover_context",
    "decode_track_points",
    "default_ring_len",
    "dtype_bytes",
    "int8_scale_bytes",
    "intermediate_conv_window_bytes",
    "intermediate_ssm_bytes",
    "kda_state_bytes",
    "kv_allocation_log",
    "kv_tokens_for_bytes",
    "local_heads",
    "mamba_allocation_log",
    "max_running_requests",
    "mean_checkpoints_per_request",
    "memory_vs_context",
    "mla_kv_bytes_per_token",
    "next_pow2",
    "pool_usage",
    "preset",
    "replayssm_ring_bytes",
    "request_pool_estimate",
    "resolve_max_num_reqs",
    "slot_bytes",
    "slots_held_per_request",
    "slots_per_request",
    "split_memory",
    "split_memory_0523",
    "tiny_spec",
    "usage_log",
]
