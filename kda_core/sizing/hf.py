"""A hybrid model's ``config.json`` as a ModelSpec, read as SGLang 0.5.23 and vLLM 0.33 read it.

``from_hf_config(cfg)`` takes a dict, a path to a ``config.json`` or a model folder
(``hfconfig.read_config``), unwraps a ``text_config`` (Kimi K3, Qwen3.5, InternS2) and hands the
fields to its family's reader (``families.FAMILIES``). Refusals say which: not a hybrid (no
linear layers, or no attention layers), a family neither pinned engine serves (by name), or a
field missing (named with its accepted aliases). ``shipped_configs`` are real models' configs
(each file names its Hugging Face model id; a trimmed one says what was trimmed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kda_core.sizing.families import FAMILIES
from kda_core.sizing.hfconfig import read_config
from kda_core.sizing.presets import ModelSpec

_CONFIG_DIR = Path(__file__).with_name("configs")
_NOT_HYBRID = frozenset(  # model types whose layers are all attention or all recurrent
    [
        "llama",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "mistral",
        "mixtral",
        "deepseek_v3",
        "gemma3",
        "gpt_oss",
        "mamba",
        "mamba2",
        "falcon_mamba",
    ]
)


_BY_ARCH: dict[str, str] = {"BailingMoeV2_5ForCausalLM": "bailing_hybrid"}
"""Architectures whose configs name another ``model_type`` than the family's key."""


def _family_key(c: dict[str, Any]) -> str | None:
    """The ``FAMILIES`` key of a (text) config: its ``model_type``, else its architecture."""
    mtype = c.get("model_type")
    if mtype in FAMILIES:
        return mtype
    archs = c.get("architectures") or []
    return next((_BY_ARCH[a] for a in archs if a in _BY_ARCH), None)


def _context_len(c: dict[str, Any]) -> int:
    for key in ("max_position_embeddings", "model_max_length"):
        v = c.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 40:
            return v
    return 0


_MTP_FIELDS = {
    "nextn_predict_layers": "num_nextn_predict_layers",
    "mtp_hidden_layers": "mtp_num_hidden_layers",
}


def _check_count(c: dict, key: str) -> int:
    """A config's MTP module count (0 when absent or null); ValueError naming a bad one."""
    v = c.get(key)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 64:
        raise ValueError(f"config.json: {key} must be an integer in [0, 64], got {v!r}")
    return v


def _unwrap_shipped(top: dict[str, Any]) -> dict[str, Any]:
    """A shipped file (``configs/*.json``: ``{"source": {...}, "config": {...}}``) is read as
    its ``config``, so a path to one sizes like its name; any other dict is returned as is."""
    inner, src = top.get("config"), top.get("source")
    if "model_type" not in top and isinstance(inner, dict) and isinstance(src, dict):
        return inner
    return top


def from_hf_config(cfg: object, name: str | None = None) -> ModelSpec:
    """The ModelSpec of a hybrid model's ``config.json`` (a dict, a file, or a model folder).

    ``name`` defaults to the (text) ``model_type``. ValueError naming the missing or malformed
    field (with its aliases), a family neither engine serves, or a model that is not a hybrid.
    """
    top = _unwrap_shipped(read_config(cfg))
    text = top.get("text_config")
    c = text if isinstance(text, dict) else top
    if "model_type" not in c and "model_type" in top:
        c = {**c, "model_type": top["model_type"]}
    if not c.get("architectures") and top.get("architectures"):
        c = {**c, "architectures": top["architectures"]}
    mtype = c.get("model_type")
    if not isinstance(mtype, str):
        raise ValueError("config.json: missing field 'model_type'")
    key = _family_key(c)
    if key is None:
        why = (
            "it is not a hybrid (its layers are all attention or all recurrent)"
            if mtype in _NOT_HYBRID
            else "it is not one of the hybrid families SGLang 0.5.23 or vLLM 0.33 serves "
            "(docs/sizing.md lists them)"
        )
        raise ValueError(f"model_type {mtype!r} is not sized: {why}")
    fields = FAMILIES[key].read(c)
    label = name if isinstance(name, str) and name else mtype
    mtp = {f: _check_count(c, k) for f, k in _MTP_FIELDS.items()}
    spec = ModelSpec(name=label, family=key, context_len=_context_len(c), **fields, **mtp)
    if spec.n_linear_layers == 0:
        raise ValueError(f"model {label!r} is not a hybrid: it has no linear (recurrent) layers")
    if spec.n_attn_layers == 0:
        raise ValueError(f"model {label!r} is not a hybrid: it has no attention layers")
    return spec


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
