"""Real model configs and the byte / slot / concurrency arithmetic SGLang 0.5.23 and vLLM 0.33 use
for hybrid (recurrent + attention) models.

A model is a ``ModelSpec`` (``preset``, ``from_hf_config`` for every hybrid family either engine
serves, ``families``; one entry per linear kind in ``LINEAR_KINDS``); a deployment is a
``Deployment`` (every knob checked once, engine defaults for what is left out); ``size_sglang`` and
``size_vllm`` size one for the other (``split_memory`` and ``vllm_plan`` are their DESIGN.md
spellings), ``sglang_log_lines`` / ``vllm_log_lines`` are what each engine would print, and
``read_log`` reads a server's log (or a fragment of one) back. ``python -m kda_core.sizing
CONFIG`` does it on the command line. Modules: ``presets``, ``_kinds``, ``hfconfig`` (the one
``config.json`` reader, shared with ``kda_core.model``), ``families``, ``hf``, ``sizes``,
``slots``, ``deployment``, ``sglang``, ``split``, ``vllm``, ``checkpoints``, ``logs``,
``logread`` (a subpackage, a module per engine). docs/sizing.md has the derivations and the
engines' sources. This file only re-exports.
"""

from kda_core.sizing._draft_rows import drafter_rows
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing._logs import capping_message
from kda_core.sizing.checkpoints import checkpoints_per_request
from kda_core.sizing.deployment import Deployment
from kda_core.sizing.families import engine_refusal
from kda_core.sizing.hf import from_hf_config, shipped_spec
from kda_core.sizing.logread import LogReport, read_log
from kda_core.sizing.presets import (
    GIB,
    MIB,
    PRESETS,
    ModelSpec,
    as_spec,
    check_knobs,
    dtype_bytes,
    local_heads,
    preset,
    preset_name,
    tiny_spec,
)
from kda_core.sizing.sglang import MemorySplit, sglang_log_lines, size_sglang, split_memory
from kda_core.sizing.sizes import (
    conv_state_bytes,
    default_ring_len,
    int8_scale_bytes,
    intermediate_conv_window_bytes,
    intermediate_ssm_bytes,
    kda_state_bytes,
    kv_bytes_per_token,
    mla_kv_bytes_per_token,
    replayssm_ring_bytes,
    slot_bytes,
)
from kda_core.sizing.slots import (
    SlotsPerRequest,
    max_running_requests,
    request_slots,
    resolve_auto,
    slots_held_per_request,
    slots_per_request,
)
from kda_core.sizing.split import balanced_ratio
from kda_core.sizing.vllm import VllmPlan, size_vllm, vllm_log_lines, vllm_plan

__all__ = [
    # DESIGN.md's contracts
    "preset",
    "from_hf_config",
    "kda_state_bytes",
    "conv_state_bytes",
    "kv_bytes_per_token",
    "mla_kv_bytes_per_token",
    "replayssm_ring_bytes",
    "max_running_requests",
    "split_memory",
    "vllm_plan",
    # a model, a deployment, both engines' numbers and lines, a log read back
    "ModelSpec",
    "Deployment",
    "MemorySplit",
    "VllmPlan",
    "size_sglang",
    "size_vllm",
    "sglang_log_lines",
    "vllm_log_lines",
    "engine_refusal",
    "drafter_rows",
    "LINEAR_KINDS",
    "shipped_spec",
    "preset_name",
    "read_log",
    "LogReport",
    # what the serving engine, the simulator and the other studies read
    "GIB",
    "MIB",
    "PRESETS",
    "SlotsPerRequest",
    "as_spec",
    "balanced_ratio",
    "capping_message",
    "check_knobs",
    "checkpoints_per_request",
    "default_ring_len",
    "dtype_bytes",
    "int8_scale_bytes",
    "intermediate_conv_window_bytes",
    "intermediate_ssm_bytes",
    "local_heads",
    "request_slots",
    "resolve_auto",
    "slot_bytes",
    "slots_held_per_request",
    "slots_per_request",
    "tiny_spec",
]
