"""A hybrid model's ``config.json`` as a ModelSpec, read the way SGLang 0.5.23 reads it.

``from_hf_config(cfg)`` takes a dict, a path to a ``config.json`` or a model folder. Families:
``kimi_linear`` (Kimi-Linear, and Kimi K3 whose fields sit under ``text_config``: KDA + MLA),
``qwen3_next`` / ``qwen3_5*`` (Gated DeltaNet + GQA) and ``nemotron_h`` (Mamba2 + GQA). A
field the engines need and the config lacks is refused by name (no defaults are guessed); a
model without linear layers is refused as not a hybrid. ``shipped_configs`` are real models'
shape fields (each file names its Hugging Face model id). Sources: docs/sizing.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kda_core.sizing.presets import DTYPE_BYTES, MAX_DIM, ModelSpec

MAX_CONFIG_BYTES: int = 1 << 20  # a real config.json is a few KiB; larger is refused
_CONFIG_DIR = Path(__file__).with_name("configs")
_KIMI_TYPES = ("kimi_linear", "kimi_k3")
_QWEN_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
_NEMOTRON_TYPES = ("nemotron_h",)
_HYBRID_TYPES = _KIMI_TYPES + _QWEN_TYPES + _NEMOTRON_TYPES


def _parse_file(cfg: object) -> dict[str, Any]:
    """The config as a dict: ``cfg`` itself, or the JSON file (or ``folder/config.json``)."""
    if isinstance(cfg, dict):
        return cfg
    if not isinstance(cfg, (str, Path)):
        raise ValueError(f"cfg must be a dict or a path, got {type(cfg).__name__}")
    path = Path(cfg)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ValueError(f"cfg: no config.json at {str(path)!r}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"cfg: {path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"cfg: {path.name} is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError("cfg: config.json must hold a JSON object")
    return data


def _parse_field(c: dict[str, Any], key: str, where: str = "", lo: int = 1) -> int:
    """``c[key]`` as an int in ``[lo, MAX_DIM]``; ValueError naming the missing field."""
    name = f"{where}{key}"
    if key not in c or c[key] is None:
        raise ValueError(f"config is missing the field {name!r}")
    v = c[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= MAX_DIM:
        raise ValueError(f"config field {name!r} must be an integer in [{lo}, {MAX_DIM}]")
    return v


def _context_len(c: dict[str, Any]) -> int:
    for key in ("max_position_embeddings", "model_max_length"):
        v = c.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 40:
            return v
    return 0


def _parse_ssm_dtype(c: dict[str, Any]) -> str:
    d = c.get("mamba_ssm_dtype")
    if d is None:
        return ""
    if d not in DTYPE_BYTES:
        raise ValueError(f"config field 'mamba_ssm_dtype' must be one of {sorted(DTYPE_BYTES)}")
    return d


def _parse_kimi(c: dict[str, Any], name: str) -> ModelSpec:
    """KDA + MLA: a layer (1-based) in ``kda_layers`` is KDA, every other one attention
    (SGLang ``KimiLinearConfig.is_kda_layer`` / ``full_attention_layer_ids``)."""
    lin = c.get("linear_attn_config")
    if not isinstance(lin, dict):
        raise ValueError("config is missing the field 'linear_attn_config'")
    n = _parse_field(c, "num_hidden_layers")
    kda = lin.get("kda_layers")
    if not isinstance(kda, list):
        raise ValueError("config is missing the field 'linear_attn_config.kda_layers'")
    if any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n for i in kda):
        raise ValueError(f"linear_attn_config.kda_layers must be layer numbers in [1, {n}]")
    n_kda = len(set(kda))
    if n_kda == 0:
        raise ValueError(f"model {name!r} is not a hybrid: linear_attn_config.kda_layers is empty")
    w = "linear_attn_config."
    return ModelSpec(
        name=name,
        n_kda_layers=n_kda,
        n_mla_layers=n - n_kda,
        kda_heads=_parse_field(lin, "num_heads", w),
        head_k_dim=_parse_field(lin, "head_dim", w),
        head_v_dim=_parse_field(lin, "head_dim", w),
        conv_kernel=_parse_field(lin, "short_conv_kernel_size", w),
        kv_lora_rank=_parse_field(c, "kv_lora_rank"),
        qk_rope_head_dim=_parse_field(c, "qk_rope_head_dim", lo=0),
        mla_heads=_parse_field(c, "num_attention_heads"),
        ssm_dtype=_parse_ssm_dtype(c),
        context_len=_context_len(c),
    )


def _parse_qwen_layers(c: dict[str, Any]) -> tuple[int, int]:
    """(linear, full) layer counts from ``layer_types``, else ``full_attention_interval``
    (SGLang's ``Qwen3NextConfig.layers_block_type`` reads the interval; transformers and vLLM
    the list): when both are given they must agree."""
    n = _parse_field(c, "num_hidden_layers")
    types, interval = c.get("layer_types"), c.get("full_attention_interval")
    from_interval = None
    if interval is not None:
        k = _parse_field(c, "full_attention_interval")
        full = sum(1 for i in range(n) if (i + 1) % k == 0)
        from_interval = (n - full, full)
    if types is None:
        if from_interval is None:
            raise ValueError(
                "config is missing the field 'layer_types' or 'full_attention_interval'"
            )
        return from_interval
    if not isinstance(types, list) or len(types) != n:
        raise ValueError(f"config field 'layer_types' must list {n} layer types")
    bad = set(types) - {"linear_attention", "full_attention"}
    if bad:
        raise ValueError(f"config field 'layer_types' has unknown types {sorted(map(str, bad))}")
    counts = (types.count("linear_attention"), types.count("full_attention"))
    if from_interval is not None and counts != from_interval:
        raise ValueError("config fields 'layer_types' and 'full_attention_interval' disagree")
    return counts


def _parse_qwen(c: dict[str, Any], name: str) -> ModelSpec:
    """Gated DeltaNet + GQA (Qwen3-Next, Qwen3.5): SGLang
    ``Qwen3NextConfig.mamba2_cache_params``."""
    n_lin, n_full = _parse_qwen_layers(c)
    if n_lin == 0:
        raise ValueError(f"model {name!r} is not a hybrid: it has no linear_attention layers")
    return ModelSpec(
        name=name,
        n_kda_layers=n_lin,
        n_mla_layers=n_full,
        kda_heads=_parse_field(c, "linear_num_value_heads"),
        linear_k_heads=_parse_field(c, "linear_num_key_heads"),
        head_k_dim=_parse_field(c, "linear_key_head_dim"),
        head_v_dim=_parse_field(c, "linear_value_head_dim"),
        conv_kernel=_parse_field(c, "linear_conv_kernel_dim"),
        linear_kind="gdn",
        attn_kind="gqa",
        attn_kv_heads=_parse_field(c, "num_key_value_heads"),
        attn_head_dim=_parse_field(c, "head_dim"),
        mla_heads=_parse_field(c, "num_attention_heads"),
        kv_lora_rank=0,
        qk_rope_head_dim=0,
        ssm_dtype=_parse_ssm_dtype(c),
        context_len=_context_len(c),
    )


def _parse_nemotron(c: dict[str, Any], name: str) -> ModelSpec:
    """Mamba2 + GQA (Nemotron-H): ``hybrid_override_pattern`` M = Mamba2, * = attention
    (SGLang ``NemotronHConfig.mamba_layer_ids`` / ``mamba2_cache_params``)."""
    pattern = c.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("config is missing the field 'hybrid_override_pattern'")
    if len(pattern) > MAX_DIM or set(pattern) - set("M*-E"):
        raise ValueError("config field 'hybrid_override_pattern' must use only M, *, - and E")
    if pattern.count("M") == 0:
        raise ValueError(f"model {name!r} is not a hybrid: hybrid_override_pattern has no M")
    return ModelSpec(
        name=name,
        n_kda_layers=pattern.count("M"),
        n_mla_layers=pattern.count("*"),
        kda_heads=_parse_field(c, "mamba_num_heads"),
        linear_k_heads=_parse_field(c, "n_groups"),
        head_k_dim=_parse_field(c, "ssm_state_size"),
        head_v_dim=_parse_field(c, "mamba_head_dim"),
        conv_kernel=_parse_field(c, "conv_kernel"),
        linear_kind="mamba2",
        attn_kind="gqa",
        attn_kv_heads=_parse_field(c, "num_key_value_heads"),
        attn_head_dim=_parse_field(c, "head_dim"),
        mla_heads=_parse_field(c, "num_attention_heads"),
        kv_lora_rank=0,
        qk_rope_head_dim=0,
        ssm_dtype=_parse_ssm_dtype(c),
        context_len=_context_len(c),
    )


def from_hf_config(cfg: object, name: str | None = None) -> ModelSpec:
    """The ModelSpec of a hybrid model's ``config.json`` (a dict, a file, or a model folder).

    Kimi K3 and Qwen3.5 keep their text model under ``text_config``; it is read when present.
    ``name`` defaults to the (text) ``model_type``. ValueError naming the missing or malformed
    field; a known non-hybrid ``model_type`` or one without linear layers is refused as such.
    """
    top = _parse_file(cfg)
    text = top.get("text_config")
    c = text if isinstance(text, dict) else top
    mtype = c.get("model_type") or top.get("model_type")
    if not isinstance(mtype, str):
        raise ValueError("config is missing the field 'model_type'")
    label = name if isinstance(name, str) and name else mtype
    if mtype in _KIMI_TYPES or (mtype not in _HYBRID_TYPES and "linear_attn_config" in c):
        return _parse_kimi(c, label)
    if mtype in _QWEN_TYPES:
        return _parse_qwen(c, label)
    if mtype in _NEMOTRON_TYPES:
        return _parse_nemotron(c, label)
    raise ValueError(
        f"model_type {mtype!r} is not a supported hybrid (one of {list(_HYBRID_TYPES)}): "
        "a model without recurrent (linear-attention / Mamba) layers has no state to size"
    )


def shipped_configs() -> dict[str, dict[str, Any]]:
    """The shipped real configs by name: ``{"source": {...}, "config": {...}}`` each."""
    out = {}
    for path in sorted(_CONFIG_DIR.glob("*.json")):
        out[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return out


def shipped_spec(name: str) -> ModelSpec:
    """The ModelSpec of a shipped config (``shipped_configs()`` names)."""
    configs = shipped_configs()
    if name not in configs:
        raise ValueError(f"name must be one of {sorted(configs)}, got {name!r}")
    return from_hf_config(configs[name]["config"], name)
