"""Family readers with Mamba layers (Nemotron-H, Falcon-H1, Granite-4.0-H, Zamba2, Jamba): a
config dict -> ModelSpec fields, as SGLang 0.5.23's config class and vLLM 0.33's model class
(with the transformers config class it loads) read it. Each reader cites the code it follows.
"""

from __future__ import annotations

from kda_core.sizing._readers import (
    Fields,
    check_agree,
    gqa,
    head_dim_or_hidden,
    hidden_over_heads,
    parse_dtype,
    parse_types,
)
from kda_core.sizing.hfconfig import config_int


def _parse_mamba2(
    c: dict, inter: int, heads: str, head_dim: int, groups: str, state: str, conv: str
):
    """Mamba2 fields: ``Mamba2StateShape.create`` / ``mamba2_state_shape`` with intermediate
    ``inter`` = heads x head dim (both engines' configs assert it)."""
    h = config_int(c, heads)
    if h * head_dim != inter:
        raise ValueError(f"config.json: {heads} x head dim must equal the intermediate {inter}")
    return {
        "linear_kind": "mamba2",
        "linear_heads": h,
        "linear_v_dim": head_dim,
        "linear_k_heads": config_int(c, groups),
        "linear_k_dim": config_int(c, state),
        "conv_kernel": config_int(c, conv),
    }


_NEMOTRON_TYPES = {
    "mamba": "linear",
    "linear_attention": "linear",
    "attention": "attn",
    "full_attention": "attn",
    "mlp": "",
    "moe": "",
}
_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def read_nemotron_h(c: dict) -> Fields:
    """Nemotron-H and its Puzzle variant (Mamba2 + GQA): ``layers_block_type``, else
    ``hybrid_override_pattern`` (M Mamba2, * attention; SGLang ``NemotronHConfig.
    _resolve_layers_block_type``, transformers' ``NemotronHConfig`` likewise). Attention head
    size ``head_dim``, else 128: the default of SGLang's class and of transformers' class vLLM
    reads (neither reads ``attention_head_dim``). Chunk ``mamba_chunk_size`` / ``chunk_size``
    (SGLang ``_resolve_mamba_chunk_size``). Declared dtypes: SGLang ``mamba_ssm_dtype``, vLLM
    ``mamba_ssm_cache_dtype`` else float32 (``NemotronHForCausalLMConfig``)."""
    if c.get("layers_block_type") is None:
        pattern = c.get("hybrid_override_pattern")
        if not isinstance(pattern, str) or not pattern or set(pattern) - set(_PATTERN):
            raise ValueError(
                "config.json: missing field 'layers_block_type' (or 'hybrid_override_pattern' "
                "of M, *, - and E)"
            )
        c = {**c, "layers_block_type": [_PATTERN[x] for x in pattern]}
    n_lin, n_attn, _ = parse_types(c, "layers_block_type", _NEMOTRON_TYPES)
    hd = config_int(c, "mamba_head_dim")
    inter = config_int(c, "mamba_num_heads") * hd
    head_dim = config_int(c, "head_dim") if c.get("head_dim") is not None else 128
    chunk = c.get("mamba_chunk_size") or c.get("chunk_size") or 128
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": n_attn,
        "mamba_chunk_size": config_int({"chunk_size": chunk}, "chunk_size"),
        "sglang_ssm_dtype": parse_dtype(c, "mamba_ssm_dtype", "float32"),
        "vllm_ssm_dtype": parse_dtype(c, "mamba_ssm_cache_dtype", "float32"),
        **_parse_mamba2(
            c, inter, "mamba_num_heads", hd, "n_groups", "ssm_state_size", "conv_kernel"
        ),
        **gqa(c, head_dim, mha_default=True),  # NemotronHConfig: None -> heads
    }


def read_falcon_h1(c: dict) -> Fields:
    """Falcon-H1 (every layer Mamba2 and attention in parallel: ``FalconH1Config.
    linear_layer_ids`` / ``full_attention_layer_ids`` are all layers). Intermediate
    ``mamba_d_ssm``, else ``mamba_expand`` x hidden; head dim ``mamba_d_head`` ("auto": the
    intermediate / heads). Attention: ``head_dim`` else hidden / heads (both engines)."""
    n = config_int(c, "num_hidden_layers")
    if c.get("mamba_d_ssm") is not None:
        inter = config_int(c, "mamba_d_ssm")
    else:
        inter = config_int(c, "mamba_expand") * config_int(c, "hidden_size")
    d_head = c.get("mamba_d_head", "auto")
    if d_head == "auto":
        d_head = inter // config_int(c, "mamba_n_heads")
    hd = config_int({"mamba_d_head": d_head}, "mamba_d_head")
    return {
        "n_linear_layers": n,
        "n_attn_layers": n,
        "mamba_chunk_size": config_int(
            {"mamba_chunk_size": c.get("mamba_chunk_size", 256)}, "mamba_chunk_size"
        ),
        "sglang_ssm_dtype": parse_dtype(c, "mamba_ssm_dtype", "float32"),
        **_parse_mamba2(
            c, inter, "mamba_n_heads", hd, "mamba_n_groups", "mamba_d_state", "mamba_d_conv"
        ),
        **gqa(c, head_dim_or_hidden(c), mha_default=True),  # FalconH1Config: None -> heads
    }


_GRANITE_TYPES = {
    "mamba": "linear",
    "linear_attention": "linear",
    "attention": "attn",
    "full_attention": "attn",
}


def read_granitemoehybrid(c: dict) -> Fields:
    """Granite-4.0-H (Mamba2 + GQA): ``layer_types`` mamba / attention (or transformers'
    linear_attention / full_attention: ``_to_sglang_layer_types``); intermediate
    ``mamba_expand`` x hidden. SGLang's state dtype is float32 (``GraniteMoeHybridConfig``
    keeps the default dtype). Attention head size: SGLang the ``head_dim`` field else hidden /
    heads, vLLM hidden / heads (``GraniteMoeHybridAttention``)."""
    n_lin, n_attn, _ = parse_types(c, "layer_types", _GRANITE_TYPES)
    inter = config_int(c, "mamba_expand") * config_int(c, "hidden_size")
    hd = check_agree("the attention head size", head_dim_or_hidden(c), hidden_over_heads(c))
    chunk = c.get("mamba_chunk_size", 256)
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": n_attn,
        "mamba_chunk_size": config_int({"mamba_chunk_size": chunk}, "mamba_chunk_size"),
        **_parse_mamba2(
            c,
            inter,
            "mamba_n_heads",
            config_int(c, "mamba_d_head"),
            "mamba_n_groups",
            "mamba_d_state",
            "mamba_d_conv",
        ),
        **gqa(c, hd),
    }


def read_zamba2(c: dict) -> Fields:
    """Zamba2 (vLLM only): every layer has a Mamba2 mixer, each "hybrid" layer also a shared
    attention block with its own KV (``Zamba2Model``, one ``Attention`` per hybrid layer,
    KV heads = heads). transformers' ``Zamba2Config.__post_init__`` derives the attention head
    size (2 hidden / heads) and the Mamba head dim (``mamba_expand`` x hidden /
    ``n_mamba_heads``), whatever the file says."""
    types = {"mamba": "linear", "linear_attention": "linear", "hybrid": "both"}
    _, n_attn, n = parse_types(c, "layers_block_type", types)
    hidden, heads = config_int(c, "hidden_size"), config_int(c, "num_attention_heads")
    inter = config_int(c, "mamba_expand") * hidden
    hd = inter // config_int(c, "n_mamba_heads")
    return {
        "n_linear_layers": n,
        "n_attn_layers": n_attn,
        **_parse_mamba2(
            c, inter, "n_mamba_heads", hd, "mamba_ngroups", "mamba_d_state", "mamba_d_conv"
        ),
        **gqa({**c, "num_key_value_heads": heads}, 2 * hidden // heads),
    }


def read_jamba(c: dict) -> Fields:
    """Jamba (vLLM only, Mamba1 + GQA): layer i is attention when i % ``attn_layer_period`` ==
    ``attn_layer_offset`` (transformers ``JambaConfig.layers_block_type``); Mamba1 over
    ``mamba_expand`` x hidden channels (``mamba1_state_shape``); attention head size hidden /
    heads (``JambaAttentionDecoderLayer``)."""
    n = config_int(c, "num_hidden_layers")
    period, offset = config_int(c, "attn_layer_period"), config_int(c, "attn_layer_offset", lo=0)
    n_attn = sum(1 for i in range(n) if i % period == offset)
    return {
        "n_linear_layers": n - n_attn,
        "n_attn_layers": n_attn,
        "linear_kind": "mamba1",
        "linear_heads": config_int(c, "mamba_expand") * config_int(c, "hidden_size"),
        "linear_v_dim": 1,
        "linear_k_dim": config_int(c, "mamba_d_state"),
        "conv_kernel": config_int(c, "mamba_d_conv"),
        **gqa(c, hidden_over_heads(c)),
    }
