"""Data for memory_planner's engine view: the model a user brings, vLLM next to SGLang, a log.

The model is a shipped config (``sizing.shipped_configs``), a pasted or uploaded ``config.json``
(``config_spec``: size-capped, refused by the field it lacks) or the few numbers of a KDA + MLA
model (``custom_spec``). ``vllm_side`` is vLLM 0.33's plan (``sizing.vllm_plan``) for the same
GPU budget, TP, dtypes and request length as a ``studies.planner.Plan`` (SGLang's): the block
size it chooses, its blocks, the requests that fit, the smallest prompt that can hit its prefix
cache and the lines it prints; with an MTP drafter (``Plan.mtp``) its attention layers, their
KV per request and the KV tokens without them, and with ReplaySSM on a KDA model with draft
tokens vLLM's RecoverSSM verify records (``--use-replayssm``). ``EXAMPLE_LOGS`` are real
SGLang and vLLM logs shipped as package data (sources in ``example_logs/SOURCES.md``) for
``sizing.read_log``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.sizing import ModelSpec, VllmPlan
from kda_core.sizing.hfconfig import MAX_CONFIG_BYTES
from kda_core.sizing.presets import MAX_DIM
from kda_core.studies.planner import Plan

_LOG_DIR = Path(__file__).with_name("example_logs")


def custom_spec(
    name: str = "custom",
    n_linear_layers: int = 69,
    n_attn_layers: int = 24,
    linear_heads: int = 96,
    head_dim: int = 128,
    conv_kernel: int = 4,
    kv_lora_rank: int = 512,
    qk_rope_head_dim: int = 64,
    *,
    linear_kind: str = "kda",
    value_dim: int = 0,
    k_heads: int = 0,
    attn_kind: str = "mla",
    attn_kv_heads: int = 0,
    attn_head_dim: int = 0,
) -> ModelSpec:
    """A ModelSpec from the numbers a planner user types: ``n_linear_layers`` linear layers of
    ``linear_kind`` (KDA by default; "gdn", "mamba2", "mamba1", "short_conv", ...) with
    ``linear_heads`` heads (a short conv's channels), key / state dim ``head_dim``, value dim
    ``value_dim`` (0 = ``head_dim``; 1 for a short conv), ``k_heads`` key heads or groups (0 =
    heads), and ``n_attn_layers`` attention layers: MLA (``kv_lora_rank + qk_rope_head_dim``)
    or GQA (``attn_kv_heads`` x ``attn_head_dim``)."""
    head_dim = check_int("head_dim", head_dim, 1, MAX_DIM)  # ModelSpec would say linear_k_dim
    conv_only = linear_kind == "short_conv"
    mla = attn_kind == "mla"
    return ModelSpec(
        name=name,
        n_linear_layers=n_linear_layers,
        n_attn_layers=n_attn_layers,
        linear_heads=linear_heads,
        linear_k_dim=0 if conv_only else head_dim,
        linear_v_dim=1 if conv_only else (value_dim or head_dim),
        conv_kernel=conv_kernel,
        linear_kind=linear_kind,
        linear_k_heads=k_heads,
        attn_kind=attn_kind,
        kv_lora_rank=kv_lora_rank if mla else 0,
        qk_rope_head_dim=qk_rope_head_dim if mla else 0,
        attn_kv_heads=0 if mla else attn_kv_heads,
        attn_head_dim=0 if mla else attn_head_dim,
    )


def _parse_config(text: object) -> ModelSpec:
    """The ModelSpec of a pasted ``config.json`` (``sizing.from_hf_config``); ValueError naming
    ``config_json`` when it is empty, over ``MAX_CONFIG_BYTES`` or not a JSON object, and the
    missing field when the config is incomplete."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("config_json is empty: paste or upload a model's config.json")
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ValueError(f"config_json must be at most {MAX_CONFIG_BYTES:,} bytes")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"config_json is not valid JSON ({e.msg}, line {e.lineno} column {e.colno})"
        ) from None
    if not isinstance(data, dict):
        raise ValueError("config_json must hold a JSON object")
    return sizing.from_hf_config(data)


def read_config_file(path: object) -> str:
    """An uploaded ``config.json``'s text; its size is checked before it is read."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError("config_file: no file was uploaded")
    if os.path.getsize(path) > MAX_CONFIG_BYTES:
        raise ValueError(f"config_file must be at most {MAX_CONFIG_BYTES:,} bytes")
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("config_file is not UTF-8 text") from None


def model_spec(
    model: str, config_json: str = "", *, mtp: bool = False, draft: int = 0
) -> ModelSpec:
    """A shipped config by name, or the pasted config (``model == "config.json"``); with
    ``mtp`` refused, by the field, as ``python -m kda_core.sizing`` refuses it, when either
    engine cannot size its MTP drafter with ``draft`` speculative tokens."""
    spec = _parse_config(config_json) if model == "config.json" else sizing.shipped_spec(model)
    if mtp:
        _check_mtp(spec, draft)
    return spec


def _check_mtp(spec: ModelSpec, draft: int) -> None:
    """ValueError (``mtp: ...``) when SGLang or vLLM cannot size ``spec``'s MTP drafter: a family
    the lab does not model, SGLang on Kimi, a config naming no MTP module (vLLM), or no
    ``num_speculative_tokens`` where the config names no ``n_predict``."""
    d = sizing.Deployment(rest_bytes=sizing.GIB, mtp=True, max_model_len=1)
    sizing.size_sglang(spec, d)
    sizing.size_vllm(spec, d.replace(num_speculative_tokens=draft))


@dataclass(frozen=True, slots=True)
class VllmSide:
    """vLLM 0.33 for a plan's budget: ``plan`` (block size, blocks, concurrency at
    ``max_model_len`` = the plan's tokens per request), ``max_running`` (0: vLLM refuses to
    start, ``plan.max_num_seqs_error``), the blocks one request takes and the log lines."""

    plan: VllmPlan
    max_running: int
    attn_blocks_per_request: int
    mamba_blocks_per_request: int
    log_lines: tuple[str, ...]
    kv_tokens_without_draft: int  # the KV tokens without the MTP drafter (= plan's without one)


def vllm_side(p: Plan, max_num_seqs: int = 256, prefix_caching: bool = True) -> VllmSide:
    """vLLM's plan for ``p``'s model and deployment: the same budget (as "Available KV cache
    memory"), TP and dtypes (an SSM dtype left to the engines is each engine's own default),
    draft tokens (``num_speculative_tokens``; 0 with MTP: the config's ``n_predict``), MTP
    drafter and request length. The page's one ReplaySSM switch is vLLM's ``--use-replayssm``
    where vLLM 0.33 acts on it (a KDA model with draft tokens: RecoverSSM); vLLM's ReplaySSM on
    other kinds is not modelled, so there it is off."""
    if not isinstance(prefix_caching, bool):
        raise ValueError(f"prefix_caching must be a bool, got {prefix_caching!r}")
    recover = p.replayssm and p.spec.linear_kind == "kda" and p.draft_tokens > 0
    d = p.deployment.replace(
        max_model_len=p.tokens_per_request,
        mamba_cache_mode="align" if prefix_caching else "none",
        num_speculative_tokens=p.draft_tokens,
        max_num_seqs=max_num_seqs,
        use_replayssm=recover,
    )
    v = sizing.size_vllm(p.spec, d)
    attn = v.attn_groups * -(-v.max_model_len // v.block_size)
    if v.draft_groups:  # an EAGLE drafter's own attention groups, at its own block
        attn += v.draft_groups * -(-v.max_model_len // v.draft_block_size)
    running = 0 if v.max_num_seqs_error else min(v.max_num_seqs, int(v.max_concurrency))
    lines = tuple(sizing.vllm_log_lines(v))
    drafter = d.mtp or d.eagle is not None
    alone = sizing.size_vllm(p.spec, d.replace(mtp=False, eagle=None)) if drafter else v
    return VllmSide(v, running, attn, v.blocks_per_request - attn, lines, alone.kv_cache_tokens)


@dataclass(frozen=True, slots=True)
class _ExampleLog:
    """A real server log shipped as an example: the shipped config it is read against and the
    flags the reader is given (None: inferred from the log)."""

    name: str
    model: str
    ratio: float | None
    page_size: int | None
    source: str
    text: str = ""
    requested: int | None = None  # --max-running-requests, when the paste does not echo it


def _example(
    name: str,
    model: str,
    ratio: float | None,
    page: int | None,
    source: str,
    requested: int | None = None,
) -> _ExampleLog:
    text = (_LOG_DIR / f"{name}.log").read_text(encoding="utf-8")
    return _ExampleLog(name, model, ratio, page, source, text, requested)


EXAMPLE_LOGS: tuple[_ExampleLog, ...] = (
    _example(
        "sglang_kimi_k3_compute_mamba_ratio",
        "kimi-k3",
        0.9,
        None,
        "sgl-project/sglang .claude/skills/compute-mamba-ratio/SKILL.md",
    ),
    _example(
        "sglang_qwen38_27b_otel_h100",
        "qwen3.8-27b-fp8",
        0.9,
        None,
        "farbodtavakkoli/OTel inference/sglang/llm/README.md",
    ),
    _example("vllm_qwen36_club3090_612", "qwen3.6-35b-a3b", None, None, "noonghunna/club-3090#612"),
    _example("sglang_k3_writeup_fp8", "kimi-k3", None, 64, "the K3 write-up (docs/sizing.md)"),
    _example(
        "sglang_fragment_38846", "qwen3.8-27b-fp8", None, None, "sgl-project/sglang#38846", 32
    ),
)
"""The shipped example logs (files and sources: ``example_logs/SOURCES.md``)."""


__all__ = [
    "EXAMPLE_LOGS",
    "VllmSide",
    "custom_spec",
    "model_spec",
    "read_config_file",
    "vllm_side",
]
