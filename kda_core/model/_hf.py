"""Kimi-Linear checkpoints (transformers' ``KimiLinearForCausalLM``): read one, write one.

`read(folder) -> (ModelConfig, named arrays)` parses ``config.json`` and the safetensors weights
(one ``model.safetensors`` or shards listed in ``model.safetensors.index.json``; float32,
float16, bfloat16 or float64; tensor names as transformers' modules or in the checkpoint
layout Moonshot publishes and ``save_pretrained`` writes, see `_parse_module_names`) of a small
Kimi-Linear checkpoint into the lab's ``kimi-linear`` variant (`TinyHybrid.from_hf`).
`export(config, arrays, folder)` writes ``config.json`` + ``model.safetensors`` (float32) that
``transformers.AutoModelForCausalLM.from_pretrained`` loads (`kda_core.model.export_hf`); numpy.

Config fields follow transformers' ``KimiLinearConfig`` and are read by the one config reader
the lab has, ``kda_core.sizing.hfconfig`` (its precedence: ``layer_types``, else the
checkpoint's ``linear_attn_config`` with 1-based ``full_attn_layers`` / ``kda_layers``; that
dict's ``num_heads`` / ``head_dim`` / ``short_conv_kernel_size``, else the flat
``linear_num_heads`` / ``linear_head_dim`` / ``linear_conv_kernel_dim``). Every size field must
be present (transformers would silently use the 48B model's); ``rms_norm_eps`` (1e-5),
``hidden_act`` (silu) and the kernel size (4) take transformers' defaults. Refused, naming the
field: another architecture, MoE layers (``mlp_layer_types`` "sparse"; the lab's MLP is dense),
a low-rank query (``q_lora_rank``), grouped KV heads, attention biases, activations other than
SiLU, and a vocabulary other than the lab's 256 byte tokens.

transformers' MLA has no position encoding (``qk_rope_head_dim`` is a key part shared by all
heads, unrotated) and nothing like K3's lower-bound gate: ``k3`` is not exported (docs/model.md).
"""

from __future__ import annotations

import functools
import json
import re
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from kda_core.model.params import ModelConfig
from kda_core.model.tokenizer import VOCAB
from kda_core.sizing.hfconfig import config_int, kimi_linear_layout, read_config

_ARCHITECTURE = "KimiLinearForCausalLM"
_MODEL_TYPE = "kimi_linear"
_MAX_CHECKPOINT_BYTES = 1 << 30  # "small": the lab holds it in float64
_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16}
_SIZE_FIELDS = (
    *("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"),
    *("num_attention_heads", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"),
)
_HF_KIND = {"kda": "linear_attention", "mla": "full_attention"}


def _check_supported(cfg: dict, n: int) -> None:
    mlp = cfg.get("mlp_layer_types")
    if mlp is None:  # transformers' default: the first first_k_dense_replace layers dense
        k = cfg.get("first_k_dense_replace", 1)
        mlp = ["dense" if i < k else "sparse" for i in range(n)]
    if any(t != "dense" for t in mlp):
        raise ValueError(
            "config.json: mlp_layer_types has MoE ('sparse') layers; the lab's MLP is dense in "
            f"every layer, got {mlp}"
        )
    kv_heads = cfg.get("num_key_value_heads")
    checks = (
        ("q_lora_rank", cfg.get("q_lora_rank") is None, "must be null (a full-rank q_proj)"),
        ("attention_bias", not cfg.get("attention_bias", False), "must be false"),
        ("hidden_act", cfg.get("hidden_act", "silu") == "silu", "must be 'silu'"),
        ("vocab_size", cfg["vocab_size"] == VOCAB, f"must be {VOCAB} (the lab's byte tokens)"),
        (
            "num_key_value_heads",
            kv_heads in (None, cfg["num_attention_heads"]),
            "must be null or num_attention_heads",
        ),
    )
    for key, ok, rule in checks:
        if not ok:
            raise ValueError(f"config.json: {key} {rule}, got {cfg.get(key)!r}")


def config_from_hf(cfg: dict) -> ModelConfig:
    """A Kimi-Linear ``config.json`` (as a dict) -> the lab's ModelConfig (see module doc)."""
    if not isinstance(cfg, dict):
        raise ValueError(f"config must be a dict, got {type(cfg).__name__}")
    archs = cfg.get("architectures") or []
    if _ARCHITECTURE not in archs and cfg.get("model_type") != _MODEL_TYPE:
        raise ValueError(
            f"config.json: architectures {archs} / model_type {cfg.get('model_type')!r} is not "
            f"{_ARCHITECTURE} / {_MODEL_TYPE!r}: only Kimi-Linear checkpoints load here"
        )
    size = {key: config_int(cfg, key, lo=0) for key in _SIZE_FIELDS}
    n = size["num_hidden_layers"]
    _check_supported(cfg, n)
    kinds, heads, head_dim, kernel = kimi_linear_layout(cfg, kernel_default=4)
    eps = cfg.get("rms_norm_eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1:
        raise ValueError(f"config.json: rms_norm_eps must be a number in (0, 1), got {eps!r}")
    return ModelConfig(
        d_model=size["hidden_size"],
        n_layers=n,
        n_heads=heads,
        head_dim=head_dim,
        conv_size=kernel,
        mla_heads=size["num_attention_heads"],
        mla_head_dim=size["qk_nope_head_dim"],
        mla_latent=size["kv_lora_rank"] + size["qk_rope_head_dim"],
        mlp_hidden=size["intermediate_size"],
        gate_lower_bound=None,
        norm_eps=float(eps),
        variant="kimi-linear",
        layer_types=kinds,
        mla_rope_dim=size["qk_rope_head_dim"],
        mla_v_dim=size["v_head_dim"],
    )


def config_to_hf(c: ModelConfig) -> dict:
    """The ``config.json`` of a ``kimi-linear`` ModelConfig (transformers' field names)."""
    return {
        "architectures": [_ARCHITECTURE],
        "model_type": _MODEL_TYPE,
        "vocab_size": VOCAB,
        "hidden_size": c.d_model,
        "intermediate_size": c.mlp_hidden,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.mla_heads,
        "num_key_value_heads": c.mla_heads,
        "kv_lora_rank": c.mla_kv_rank,
        "q_lora_rank": None,
        "qk_rope_head_dim": c.mla_rope_dim,
        "qk_nope_head_dim": c.mla_head_dim,
        "v_head_dim": c.mla_value_dim,
        "linear_num_heads": c.n_heads,
        "linear_head_dim": c.head_dim,
        "linear_conv_kernel_dim": c.conv_size,
        "layer_types": [_HF_KIND[k] for k in c.layer_kinds],
        "mlp_layer_types": ["dense"] * c.n_layers,
        "hidden_act": "silu",
        "rms_norm_eps": c.norm_eps,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "pad_token_id": None,
        "bos_token_id": None,
        "eos_token_id": None,
        "use_cache": True,
        "dtype": "float32",
    }


def _mixer_pairs(kind: str) -> list[tuple[str, str]]:
    """(lab mixer field, transformers' self_attn name) for the weights that map one to one."""
    if kind == "kda":
        return [
            ("conv_w", "conv1d.weight"),
            ("w_beta", "b_proj.weight"),
            ("f_a", "forget_gate.f_a_proj.weight"),
            ("f_b", "forget_gate.f_b_proj.weight"),
            ("A_log", "forget_gate.A_log"),
            ("dt_bias", "forget_gate.dt_bias"),
            ("g_a", "g_a_proj.weight"),
            ("g_b", "g_b_proj.weight"),
            ("norm_w", "o_norm.weight"),
            ("w_o", "o_proj.weight"),
        ]
    return [
        ("w_dkv", "kv_a_proj_with_mqa.weight"),
        ("norm_c", "kv_a_layernorm.weight"),
        ("w_q", "q_proj.weight"),
        ("w_o", "o_proj.weight"),
    ]


def _to_hf_array(lab: np.ndarray, hf_name: str) -> np.ndarray:
    """Lab layout -> transformers' (Linear weights [out, in]; conv1d [C, 1, W]; A_log
    [1, 1, H, 1])."""
    if hf_name.endswith("conv1d.weight"):
        return lab[:, None, :]
    if hf_name.endswith("A_log"):
        return lab.reshape(1, 1, -1, 1)
    return lab.T if lab.ndim == 2 else lab


def _from_hf_array(a: np.ndarray, hf_name: str) -> np.ndarray:
    """The inverse of `_to_hf_array`."""
    if hf_name.endswith("conv1d.weight"):
        return a.reshape(a.shape[0], -1)
    if hf_name.endswith("A_log"):
        return a.reshape(-1)
    return a.T if a.ndim == 2 else a


def to_hf_state(c: ModelConfig, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Lab named arrays of a ``kimi-linear`` model -> transformers' state dict (float32)."""
    HK, F, C = c.n_heads * c.head_dim, c.mlp_hidden, c.mla_kv_rank
    Hm, dh, dv = c.mla_heads, c.mla_head_dim, c.mla_value_dim
    sd = {
        "model.embed_tokens.weight": arrays["embed"],
        "model.norm.weight": arrays["final_norm"],
        "lm_head.weight": arrays["lm_head"].T,
    }
    for i, kind in enumerate(c.layer_kinds):
        lab, hf = f"blocks.{i}.", f"model.layers.{i}."
        w_up = arrays[lab + "w_up"]
        sd[hf + "input_layernorm.weight"] = arrays[lab + "norm1"]
        sd[hf + "post_attention_layernorm.weight"] = arrays[lab + "norm2"]
        sd[hf + "mlp.gate_proj.weight"] = w_up[:, :F].T
        sd[hf + "mlp.up_proj.weight"] = w_up[:, F:].T
        sd[hf + "mlp.down_proj.weight"] = arrays[lab + "w_down"].T
        for field, name in _mixer_pairs(kind):
            sd[hf + "self_attn." + name] = _to_hf_array(arrays[lab + "mixer." + field], name)
        if kind == "kda":
            qkv = arrays[lab + "mixer.w_qkv"]
            for j, p in enumerate(("q_proj", "k_proj", "v_proj")):
                sd[hf + f"self_attn.{p}.weight"] = qkv[:, j * HK : (j + 1) * HK].T
        else:  # kv_b_proj's rows: per head, its dh key rows then its dv value rows
            uk = arrays[lab + "mixer.w_uk"].reshape(C, Hm, dh)
            uv = arrays[lab + "mixer.w_uv"].reshape(C, Hm, dv)
            kvb = np.concatenate([uk, uv], axis=2).reshape(C, Hm * (dh + dv))
            sd[hf + "self_attn.kv_b_proj.weight"] = kvb.T
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


def _check_tensor(sd: dict[str, np.ndarray], name: str) -> np.ndarray:
    """Take tensor ``name`` out of a checkpoint's state dict; a missing one is refused."""
    if name not in sd:
        raise ValueError(f"checkpoint: missing tensor {name!r}")
    return sd.pop(name)


def _parse_hf_state(c: ModelConfig, sd: dict[str, np.ndarray]) -> dict:
    """transformers' state dict -> lab named arrays (their shapes are checked by the model).
    ``lm_head.weight`` is always its own tensor: transformers' KimiLinearForCausalLM declares no
    tied weights, so ``tie_word_embeddings`` changes nothing there either."""
    C, Hm, dh, dv = c.mla_kv_rank, c.mla_heads, c.mla_head_dim, c.mla_value_dim
    sd = dict(sd)
    take = functools.partial(_check_tensor, sd)
    out = {
        "embed": take("model.embed_tokens.weight"),
        "final_norm": take("model.norm.weight"),
        "lm_head": take("lm_head.weight").T,
    }
    for i, kind in enumerate(c.layer_kinds):
        lab, hf = f"blocks.{i}.", f"model.layers.{i}."
        out[lab + "norm1"] = take(hf + "input_layernorm.weight")
        out[lab + "norm2"] = take(hf + "post_attention_layernorm.weight")
        gate, up = take(hf + "mlp.gate_proj.weight"), take(hf + "mlp.up_proj.weight")
        out[lab + "w_up"] = np.concatenate([gate.T, up.T], axis=1)
        out[lab + "w_down"] = take(hf + "mlp.down_proj.weight").T
        for field, name in _mixer_pairs(kind):
            out[lab + "mixer." + field] = _from_hf_array(take(hf + "self_attn." + name), name)
        if kind == "kda":
            qkv = [take(hf + f"self_attn.{p}.weight").T for p in ("q_proj", "k_proj", "v_proj")]
            out[lab + "mixer.w_qkv"] = np.concatenate(qkv, axis=1)
        else:
            kvb = take(hf + "self_attn.kv_b_proj.weight")
            if kvb.shape != (Hm * (dh + dv), C):
                raise ValueError(
                    f"checkpoint: {hf}self_attn.kv_b_proj.weight must have shape "
                    f"{(Hm * (dh + dv), C)}, got {kvb.shape}"
                )
            kvb = kvb.T.reshape(C, Hm, dh + dv)
            out[lab + "mixer.w_uk"] = kvb[:, :, :dh].reshape(C, Hm * dh)
            out[lab + "mixer.w_uv"] = kvb[:, :, dh:].reshape(C, Hm * dv)
    if sd:
        raise ValueError(f"checkpoint: unexpected tensors {sorted(sd)[:3]} ({len(sd)} in all)")
    return out


# transformers' conversion_mapping.py, "kimi_linear": the checkpoint layout (Moonshot's, and
# what save_pretrained writes) -> the module names
_RENAMES = (
    (re.compile(r"self_attn\.(f_a_proj|f_b_proj|dt_bias|A_log)"), r"self_attn.forget_gate.\1"),
    (re.compile(r"\.block_sparse_moe\."), ".mlp."),
)
_CONV_PARTS = ("q_conv1d", "k_conv1d", "v_conv1d")


def _parse_module_names(sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A state dict in the checkpoint layout renamed to transformers' module names, as its
    loader does: the forget gate's weights under ``forget_gate``, ``block_sparse_moe`` as
    ``mlp``, the three ``{q,k,v}_conv1d`` weights stacked into ``conv1d``. Module names pass."""
    out: dict[str, np.ndarray] = {}
    for name, a in sd.items():
        for pattern, repl in _RENAMES:
            name = pattern.sub(repl, name)
        out[name] = a
    for name in [n for n in out if n.endswith("self_attn.q_conv1d.weight")]:
        base = name[: -len("q_conv1d.weight")]
        parts = [out.pop(base + p + ".weight", None) for p in _CONV_PARTS]
        if any(p is None for p in parts):
            raise ValueError(f"checkpoint: {base}q/k/v_conv1d.weight must all be present")
        out[base + "conv1d.weight"] = np.concatenate(parts, axis=0)
    return out


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of one .safetensors file as float32 / float64 numpy arrays (bfloat16 and
    float16 widened exactly; the format: 8-byte header length, JSON header, raw data)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8]) if len(data) >= 8 else (0,)
    if not 2 <= n <= len(data) - 8:
        raise ValueError(f"{path.name}: not a safetensors file (header length {n})")
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    body = memoryview(data)[8 + n :]
    out = {}
    for name, info in header.items():
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(
                f"{path.name}: tensor {name!r} has dtype {info['dtype']}, not one of "
                f"{sorted(_DTYPES)}"
            )
        a, b = info["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":  # the upper half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(np.float64 if dtype == np.float64 else np.float32)
    return out


def _check_weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [folder / n for n in names]
    else:
        files = [folder / "model.safetensors"]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ValueError(f"{folder}: missing weight file(s) {missing}")
    total = sum(f.stat().st_size for f in files)
    if total > _MAX_CHECKPOINT_BYTES:
        raise ValueError(
            f"{folder}: checkpoint of {total} bytes is larger than the lab's "
            f"{_MAX_CHECKPOINT_BYTES} (a small model only)"
        )
    return files


def read(folder: str | Path) -> tuple[ModelConfig, dict[str, np.ndarray]]:
    """A Kimi-Linear checkpoint folder -> (ModelConfig, lab named arrays)."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ValueError(f"folder {folder} holds no config.json (a Kimi-Linear checkpoint folder)")
    config = config_from_hf(read_config(folder))
    sd: dict[str, np.ndarray] = {}
    for f in _check_weight_files(folder):
        sd.update(read_safetensors(f))
    return config, _parse_hf_state(config, _parse_module_names(sd))


def export(c: ModelConfig, arrays: dict[str, np.ndarray], folder: str | Path) -> Path:
    """Write ``config.json`` + ``model.safetensors`` of a ``kimi-linear`` model's named arrays
    to ``folder`` (created); returns the folder."""
    if c.variant != "kimi-linear":
        raise ValueError(
            f"model: variant {c.variant!r} cannot be exported: transformers' {_ARCHITECTURE} has "
            "no counterpart to K3's lower-bound gate, full-rank output gate or gated MLA "
            "(build the 'kimi-linear' variant)"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config_to_hf(c), indent=2) + "\n")
    save_file(to_hf_state(c, arrays), str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder
