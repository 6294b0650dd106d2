"""The one ``config.json`` reader: ``kda_core.model._hf`` (checkpoints) and ``sizing`` share it.

``read_config(cfg)`` takes a dict, a path to a ``config.json`` or a model folder (size-capped,
JSON object only); ``config_int`` reads an integer field (an alias may stand in for it, and a
missing one is named with its aliases); ``kimi_linear_layout`` reads a Kimi-Linear layer pattern
and KDA shape with transformers' precedence (``KimiLinearConfig.__post_init__``): the
checkpoint's ``linear_attn_config`` values win over the flat ``linear_*`` fields, ``layer_types``
over that dict's 1-based ``kda_layers`` / ``full_attn_layers``. Both layouts load: Moonshot's
(the dict) and transformers' own (flat: what ``kda_core.model.export_hf`` writes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES: int = 1 << 20  # a real config.json is a few KiB; larger is refused
_MAX_FIELD: int = 1 << 24  # cap on an integer field (layers, heads, dims, ranks, sizes)
_KIMI_KINDS = {"linear_attention": "kda", "full_attention": "mla"}


def read_config(cfg: object) -> dict[str, Any]:
    """The config as a dict: ``cfg`` itself, or the JSON file (or ``folder/config.json``);
    ValueError naming ``cfg`` for a missing, oversize or non-JSON file."""
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


def config_int(
    c: dict[str, Any],
    key: str,
    *aliases: str,
    lo: int = 1,
    where: str = "",
) -> int:
    """``c[key]`` (else the first alias present) as an int in ``[lo, _MAX_FIELD]``. A missing
    field is named with its aliases ("config.json: missing field 'key' (or 'alias')"); an
    alias may be dotted into a sub-dict (``"linear_attn_config.num_heads"``)."""
    names = (key, *aliases)
    for name in names:
        v = _lookup(c, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= _MAX_FIELD:
            raise ValueError(
                f"config.json: {where}{name} must be an integer in [{lo}, {_MAX_FIELD}]"
            )
        return v
    alt = f" (or {', '.join(repr(a) for a in aliases)})" if aliases else ""
    raise ValueError(f"config.json: missing field {where + key!r}{alt}")


def _lookup(c: dict[str, Any], name: str) -> Any:
    head, _, rest = name.partition(".")
    v = c.get(head)
    if rest:
        return v.get(rest) if isinstance(v, dict) else None
    return v


def kimi_linear_layout(
    c: dict[str, Any], kernel_default: int | None = None
) -> tuple[tuple[str, ...], int, int, int]:
    """(per-layer kinds "kda" / "mla", KDA heads, head dim, conv kernel) of a Kimi-Linear
    config in either layout (module doc). ``kernel_default`` stands in for a missing kernel
    (transformers' default 4: the checkpoint loader passes it; sizing does not, as SGLang and
    vLLM read the dict's value)."""
    n = config_int(c, "num_hidden_layers")
    lin = c.get("linear_attn_config")
    lin = lin if isinstance(lin, dict) else {}
    d = "linear_attn_config."
    heads = config_int(c, d + "num_heads", "linear_num_heads")
    head_dim = config_int(c, d + "head_dim", "linear_head_dim")
    kernel = (d + "short_conv_kernel_size", "linear_conv_kernel_dim")
    if kernel_default is not None and all(_lookup(c, k) is None for k in kernel):
        c = {**c, "linear_conv_kernel_dim": kernel_default}
    return _parse_kimi_kinds(c, lin, n), heads, head_dim, config_int(c, *kernel)


def _parse_kimi_kinds(c: dict[str, Any], lin: dict[str, Any], n: int) -> tuple[str, ...]:
    if c.get("layer_types") is not None:
        types = c["layer_types"]
    elif "full_attn_layers" in lin and "kda_layers" in lin:
        # a layer not in kda_layers is attention (SGLang / vLLM ``is_kda_layer``)
        types = ["full_attention"] * n
        for key, kind in (
            ("full_attn_layers", "full_attention"),
            ("kda_layers", "linear_attention"),
        ):
            ids = lin[key]
            if not isinstance(ids, list) or any(
                isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= n for i in ids
            ):
                raise ValueError(
                    f"config.json: linear_attn_config.{key} must be layer numbers in [1, {n}]"
                )
            for i in ids:
                types[i - 1] = kind  # 1-based in the checkpoint, as transformers reads them
    else:
        raise ValueError(
            "config.json: missing field 'layer_types' (or linear_attn_config.full_attn_layers "
            "and kda_layers)"
        )
    if not isinstance(types, list) or len(types) != n or any(t not in _KIMI_KINDS for t in types):
        raise ValueError(
            f"config.json: layer_types must name {n} layers 'linear_attention' or "
            f"'full_attention', got {types}"
        )
    return tuple(_KIMI_KINDS[t] for t in types)
