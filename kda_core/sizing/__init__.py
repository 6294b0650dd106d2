"""Real model presets and the byte / slot / concurrency arithmetic SGLang and vLLM use for
hybrid (recurrent + attention) models.

Modules: ``presets`` (ModelSpec, preset, tiny_spec, dtypes), ``hf`` (``from_hf_config``, the
shipped real configs), ``sizes`` (bytes per slot, per token, speculative buffers), ``slots``
(slots per request, concurrency caps), ``sglang`` (SGLang 0.5.23's budget split, the K3 write-up's
budget), ``split`` (the legacy split, balancing ratio), ``vllm`` (vLLM 0.33's hybrid KV cache
plan), ``checkpoints`` (states stored per request), ``logs`` (SGLang's log lines), ``logread``
(a server log read back). Exact integer arithmetic on Python ints; docs/sizing.md has the
conventions, the derivations and the engines' sources. This file only re-exports.
"""

from kda_core._checks import check_int as _check_int  # noqa: F401 (studies/planner.py calls it)
from kda_core.sizing.checkpoints import (
    checkpoints_per_request,
    checkpoints_upper_bound,
    decode_track_points,
    mean_checkpoints_per_request,
)
from kda_core.sizing.hf import from_hf_config, shipped_configs, shipped_spec
from kda_core.sizing.logread import read_log
from kda_core.sizing.logreport import LineVerdict, LogReport
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
from kda_core.sizing.sglang import (
    K3_DEPLOYMENTS,
    K3_PAGE_SIZE,
    K3_RATIO,
    K3_REST_BYTES,
    k3_budget_interval,
    k3_ratio_interval,
    k3_split,
)
from kda_core.sizing.sizes import (
    StateShape,
    conv_state_bytes,
    default_ring_len,
    int8_scale_bytes,
    intermediate_conv_window_bytes,
    intermediate_ssm_bytes,
    kda_state_bytes,
    kv_bytes_per_token,
    kv_tokens_for_bytes,
    mla_kv_bytes_per_token,
    next_pow2,
    replayssm_ring_bytes,
    slot_bytes,
    state_shape,
)
from kda_core.sizing.slots import (
    STRATEGIES,
    SlotsPerRequest,
    max_running_requests,
    request_pool_estimate,
    request_slots,
    resolve_auto,
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
    split_formula,
    split_memory,
    split_memory_0523,
    split_memory_legacy,
)
from kda_core.sizing.vllm import (
    VllmPlan,
    attn_page_per_token,
    kv_cache_groups,
    mamba_page_bytes,
    vllm_log_lines,
    vllm_plan,
    vllm_ssm_dtype,
)

__all__ = [
    "LineVerdict",
    "LogReport",
    "read_log",
    "VllmPlan",
    "attn_page_per_token",
    "kv_cache_groups",
    "mamba_page_bytes",
    "vllm_log_lines",
    "vllm_plan",
    "vllm_ssm_dtype",
    "from_hf_config",
    "shipped_configs",
    "shipped_spec",
    "DTYPE_BYTES",
    "GIB",
    "MIB",
    "PRESETS",
    "K3_DEPLOYMENTS",
    "K3_PAGE_SIZE",
    "K3_RATIO",
    "K3_REST_BYTES",
    "SIZING_FORMULAS",
    "STRATEGIES",
    "TORCH_DTYPE_NAME",
    "MemorySplit",
    "ModelSpec",
    "StateShape",
    "as_spec",
    "balanced_ratio",
    "capping_message",
    "check_knobs",
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
    "kv_bytes_per_token",
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
    "k3_budget_interval",
    "k3_ratio_interval",
    "k3_split",
    "slot_bytes",
    "SlotsPerRequest",
    "request_slots",
    "resolve_auto",
    "slots_held_per_request",
    "slots_per_request",
    "split_formula",
    "split_memory",
    "split_memory_0523",
    "split_memory_legacy",
    "state_shape",
    "tiny_spec",
    "usage_log",
]
