"""The engine flags a sweep varies: names, ranges, defaults, the grid, the launch command.

A flag is named as the engine's argument with underscores (its CLI spelling with dashes):

* SGLang 0.5.23 (``python/sglang/srt/arg_groups/fields/``): ``schedule.py``
  ``mamba_full_memory_ratio`` (fallback 0.9), ``max_mamba_cache_size``, ``chunked_prefill_size``,
  ``page_size``, ``max_running_requests``; ``exec_.py`` ``mamba_radix_cache_strategy`` (auto,
  no_buffer, extra_buffer, extra_buffer_lazy), ``mamba_track_interval`` (256),
  ``mamba_ssm_dtype``; ``memory.py`` ``hicache_ratio`` (with ``--enable-hierarchical-cache``);
  ``spec.py`` ``speculative_algorithm`` (NEXTN, EAGLE, EAGLE3), ``speculative_num_draft_tokens``,
  ``speculative_draft_model_path``; ``model.py`` ``kv_cache_dtype``.
* vLLM 0.33.0 (``vllm/engine/arg_utils.py``, ``EngineArgs.add_cli_args``): ``block_size``,
  ``prefix_cache_retention_interval``, ``max_num_seqs``, ``max_num_batched_tokens``,
  ``use_replayssm``; ``--speculative-config`` is one JSON object, so its keys are flags of
  their own, named as vLLM's dotted form names them (``--speculative-config.method mtp``,
  ``FlexibleArgumentParser``): ``speculative_config.method`` (mtp, eagle, eagle3),
  ``speculative_config.num_speculative_tokens``, ``speculative_config.model``.

A drafter flag left out (None) is no drafter; ``None`` is a value of the grid like any other
(``--grid speculative-algorithm=none,NEXTN`` on the command line).

A flag the grid leaves out takes its default here (the engine's, except ``chunked_prefill_size``:
SGLang picks it from the GPU's memory, the lab uses 8192), and the launch command spells every
flag out. Sources of the engines' checks a point must pass: ``_size.py``.
"""

from __future__ import annotations

import itertools
import json
import math
import shlex
from typing import Any

import numpy as np

ENGINES = ("sglang", "vllm")
MAX_POINTS = 256
"""Most grid points one sweep runs (a sweep is never unbounded)."""
MAX_VALUES = 64

_INT = "int"
_FLOAT = "float"
_TEXT = "text"  # a path or a shipped config's name (a draft model)
_BOOL = "bool"
MAX_TEXT = 4096
# name -> (kind, lo, hi or choices, default); None = unset (the engine's own sizing)
SGLANG_FLAGS: dict[str, tuple] = {
    "mamba_full_memory_ratio": (_FLOAT, 1e-3, 1e3, 0.9),
    "mamba_radix_cache_strategy": (
        "choice",
        ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"),
        None,
        "auto",
    ),
    "page_size": (_INT, 1, 4096, 1),
    "chunked_prefill_size": (_INT, 64, 1 << 20, 8192),
    "mamba_track_interval": (_INT, 1, 1 << 20, 256),
    "hicache_ratio": (_FLOAT, 0.0, 64.0, 0.0),
    "max_mamba_cache_size": (_INT, 1, 1 << 24, None),
    "speculative_algorithm": ("choice", (None, "NEXTN", "EAGLE", "EAGLE3"), None, None),
    "speculative_num_draft_tokens": (_INT, 0, 64, 0),
    "speculative_draft_model_path": (_TEXT, None, None, None),
    "max_running_requests": (_INT, 1, 1 << 16, None),
    "mamba_ssm_dtype": ("choice", ("float32", "bfloat16", "float16"), None, None),
    "kv_cache_dtype": ("choice", ("auto", "bfloat16", "fp8_e4m3"), None, "auto"),
}
VLLM_FLAGS: dict[str, tuple] = {
    "block_size": (_INT, 1, 1 << 16, 16),
    "prefix_cache_retention_interval": (_INT, 0, 1 << 24, 0),
    "max_num_seqs": (_INT, 1, 1 << 16, 256),
    "max_num_batched_tokens": (_INT, 16, 1 << 20, 2048),
    "kv_cache_dtype": ("choice", ("auto", "bfloat16", "fp8_e4m3"), None, "auto"),
    "speculative_config.method": ("choice", (None, "mtp", "eagle", "eagle3"), None, None),
    "speculative_config.num_speculative_tokens": (_INT, 0, 64, 0),
    "speculative_config.model": (_TEXT, None, None, None),
    "use_replayssm": (_BOOL, None, None, False),
}
SPEC_KEYS = ("method", "num_speculative_tokens", "model")
"""vLLM's ``speculative_config`` keys the sweep takes (``speculative_config.KEY`` flags)."""
FLAGS = {"sglang": SGLANG_FLAGS, "vllm": VLLM_FLAGS}


def _check_value(engine: str, name: str, v: Any) -> Any:
    kind, lo, hi, _ = FLAGS[engine][name]
    if kind == "choice":
        if v not in lo:
            raise ValueError(f"grid: {name} must be one of {lo}, got {v!r}")
        return v
    if kind == _TEXT:
        if v is not None and not (isinstance(v, str) and 0 < len(v) <= MAX_TEXT):
            raise ValueError(f"grid: {name} must be None or a path of 1 to {MAX_TEXT} characters")
        return v
    if kind == _BOOL:
        if not isinstance(v, (bool, np.bool_)):
            raise ValueError(f"grid: {name} must be True or False, got {v!r}")
        return bool(v)
    ok_int = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    if kind == _INT:
        if not ok_int or not lo <= int(v) <= hi:
            raise ValueError(f"grid: {name} must be an integer in [{lo}, {hi}], got {v!r}")
        return int(v)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"grid: {name} must be a number in [{lo}, {hi}], got {v!r}")
    f = float(v)
    if not (math.isfinite(f) and lo <= f <= hi):
        raise ValueError(f"grid: {name} must be a number in [{lo}, {hi}], got {v!r}")
    return f


def check_grid(
    engine: str, grid: Any, fixed: Any, max_points: int = MAX_POINTS
) -> list[dict[str, Any]]:
    """Every point of ``grid`` (flag -> values) on top of ``fixed`` (flag -> value), in grid
    order (the last flag varies fastest); each point names every flag of the engine."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    specs = FLAGS[engine]
    grid = {} if grid is None else grid
    fixed = {} if fixed is None else fixed
    for arg, d in (("grid", grid), ("flags", fixed)):
        if not isinstance(d, dict):
            raise ValueError(f"{arg} must be a dict of {engine} flags, got {type(d).__name__}")
        bad = sorted(set(d) - set(specs))
        if bad:
            raise ValueError(f"{arg}: unknown {engine} flag(s) {bad}; known: {sorted(specs)}")
    both = sorted(set(grid) & set(fixed))
    if both:
        raise ValueError(f"flags: {both} are also in grid")
    axes = []
    for name, values in grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"grid: {name} must be a list of values, got {values!r}")
        vals = list(values)
        if not 1 <= len(vals) <= MAX_VALUES:
            raise ValueError(f"grid: {name} must have 1 to {MAX_VALUES} values, got {len(vals)}")
        axes.append([_check_value(engine, name, v) for v in vals])
    n = math.prod(len(a) for a in axes)
    if n > max_points:
        raise ValueError(f"grid has {n} points, more than the cap of {max_points}")
    base = {k: spec[3] for k, spec in specs.items()}
    base.update({k: _check_value(engine, k, v) for k, v in fixed.items()})
    return [{**base, **dict(zip(grid, combo))} for combo in itertools.product(*axes)]


def _cli(name: str) -> str:
    return "--" + name.replace("_", "-")


def _vllm_spec(flags: dict[str, Any]) -> list[str]:
    """``--speculative-config`` as one JSON object (its keys as vLLM's ``SpeculativeConfig``
    names them) and ``--use-replayssm``; nothing for a point without a method."""
    cfg = {k: flags.get(f"speculative_config.{k}") for k in SPEC_KEYS}
    parts = []
    if cfg["method"] is not None:
        cfg = {k: v for k, v in cfg.items() if v}  # 0 tokens: vLLM's default (n_predict)
        parts.append(f"--speculative-config {shlex.quote(json.dumps(cfg))}")
    if flags.get("use_replayssm"):
        parts.append("--use-replayssm")
    return parts


def _sglang_spec(flags: dict[str, Any]) -> list[str]:
    """The drafter as SGLang spells it: a chain of ``D - 1`` steps of top-1 drafts for ``D``
    draft tokens (``speculative_hook._handle_eagle_family`` asserts the steps are given with
    the draft tokens, and sets ``D = steps + 1`` at topk 1)."""
    algo, d = flags.get("speculative_algorithm"), flags.get("speculative_num_draft_tokens") or 0
    if algo is None:
        return [f"--speculative-num-draft-tokens {d}"] if d else []
    parts = [f"--speculative-algorithm {algo}"]
    path = flags.get("speculative_draft_model_path")
    if path is not None:
        parts.append(f"--speculative-draft-model-path {shlex.quote(path)}")
    if d < 2:  # no chain to spell (such a point is refused when sized)
        return parts
    parts += [f"--speculative-num-steps {d - 1}", "--speculative-eagle-topk 1"]
    return [*parts, f"--speculative-num-draft-tokens {d}"]


def launch_command(engine: str, model_path: str, tp: int, flags: dict[str, Any]) -> str:
    """The engine's launch command for one point, every flag spelled out."""
    if engine == "vllm":
        parts = ["vllm serve", model_path, f"--tensor-parallel-size {tp}"]
        parts += ["--enable-prefix-caching", "--mamba-cache-mode align"]
        for k in VLLM_FLAGS:
            v = flags.get(k)
            if k == "prefix_cache_retention_interval" and not v:
                continue
            if v is not None and "." not in k and k != "use_replayssm":
                parts.append(f"{_cli(k)} {v}")
        return " ".join(parts + _vllm_spec(flags))
    parts = ["python -m sglang.launch_server", f"--model-path {model_path}", f"--tp-size {tp}"]
    for k in SGLANG_FLAGS:
        v = flags.get(k)
        if v is None or (k == "hicache_ratio" and not v) or k.startswith("speculative_"):
            continue
        if k == "hicache_ratio":
            parts.append("--enable-hierarchical-cache")
        parts.append(f"{_cli(k)} {v:g}" if isinstance(v, float) else f"{_cli(k)} {v}")
    parts += _sglang_spec(flags)
    if flags.get("mamba_radix_cache_strategy") == "no_buffer":
        parts.append("--disable-overlap-schedule")  # mamba_hook.validate_mamba_no_buffer
    return " ".join(parts)
