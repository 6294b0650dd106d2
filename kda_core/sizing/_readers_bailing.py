"""The Ling / Ring reader (``bailing_hybrid``: lightning + MLA, Ling 3.0's KDA + MLA): a config
dict -> ModelSpec fields, as SGLang 0.5.23's ``BailingHybridConfig`` and vLLM 0.33's
``BailingMoeV25ForCausalLM`` / ``BailingMoeV3ForCausalLM`` read it."""

from __future__ import annotations

from kda_core.sizing._readers import Fields, check_agree, head_dim_or_hidden
from kda_core.sizing.hfconfig import config_int

_BAILING_ARCHS = ("BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM")


def read_bailing(c: dict) -> Fields:
    """Ling / Ring linear (``bailing_hybrid``): every ``layer_group_size``-th layer MLA
    (SGLang ``BailingHybridConfig.layers_block_type``; vLLM takes an int group size only), the
    rest lightning attention, or KDA when ``short_conv_kernel_size`` is set (Ling 3.0,
    ``_read_bailing_kda``). Lightning: a (H, D, D) state, H = ``num_attention_heads``, D =
    ``head_dim``: SGLang ``BailingHybridConfig.mamba2_cache_params``, vLLM
    ``BailingMoeV25ForCausalLM.get_mamba_state_shape_from_config``; without the field SGLang's
    class default is 128, vLLM's ``getattr`` default hidden / heads (they must agree)."""
    n = config_int(c, "num_hidden_layers")
    g = config_int(c, "layer_group_size")  # vLLM's is_linear_layer takes an int only
    n_attn = sum(1 for i in range(n) if (i + 1) % g == 0)
    archs = c.get("architectures") or []
    if archs and not set(archs) & set(_BAILING_ARCHS):
        # both engines pick the model class from architectures (vLLM's registry, SGLang's
        # ModelConfig MLA branch keyed on BailingMoeV3ForCausalLM); none is empty: the fields
        raise ValueError(
            f"config.json: architectures {', '.join(map(str, archs))}: SGLang 0.5.23 and vLLM "
            f"0.33 serve bailing_hybrid as {' or '.join(_BAILING_ARCHS)}; Ring-linear-2.0's "
            "BailingMoeLinearV2ForCausalLM is served by neither"
        )
    if c.get("short_conv_kernel_size") is not None or "BailingMoeV3ForCausalLM" in archs:
        _check_bailing_kda(c)
        return _read_bailing_kda(c, n, g, n_attn)
    d = head_dim_or_hidden(c)
    if c.get("head_dim") is None:
        d = check_agree("the lightning head size (no head_dim)", 128, d)
    return {
        "n_linear_layers": n - n_attn,
        "n_attn_layers": n_attn,
        "linear_kind": "lightning",
        "linear_heads": config_int(c, "num_attention_heads"),
        "linear_k_dim": d,
        "linear_v_dim": d,
        "conv_kernel": 1,
        "kv_lora_rank": config_int(c, "kv_lora_rank"),
        "qk_rope_head_dim": config_int(c, "qk_rope_head_dim", lo=0),
        "attn_heads": config_int(c, "num_attention_heads"),
    }


def _check_bailing_kda(c: dict) -> None:
    """ValueError for a KDA-variant config the two engines would build differently or vLLM's
    ``BailingMoeV3ForCausalLM`` cannot read."""
    archs = c.get("architectures") or []
    if "BailingMoeV2_5ForCausalLM" in archs:
        raise ValueError(
            "config.json: short_conv_kernel_size is set under BailingMoeV2_5ForCausalLM: SGLang "
            "0.5.23 sizes KDA layers (BailingHybridConfig.use_kda), vLLM 0.33 lightning layers "
            "(bailing_moe_linear.py reads no conv kernel); the lab sizes one model"
        )
    if c.get("short_conv_kernel_size") is None:
        raise ValueError(
            "config.json: missing field 'short_conv_kernel_size' (BailingMoeV3ForCausalLM's KDA "
            "layers read it; SGLang 0.5.23 would size lightning layers without it)"
        )


def _read_bailing_kda(c: dict, n: int, g: int, n_attn: int) -> Fields:
    """Ling 3.0 (KDA + MLA, ``BailingMoeV3ForCausalLM``). The KDA state: SGLang
    ``BailingHybridConfig.mamba2_cache_params`` (``use_kda``: ``short_conv_kernel_size`` set)
    calls ``KimiLinearStateShape.create(num_heads=num_attention_heads, head_dim=head_dim,
    conv_kernel_size=short_conv_kernel_size)``; vLLM ``models/bailing_moe_v3.py``
    ``_get_kda_state_shape_for_config`` calls ``kda_state_shape`` with the same three fields
    (key heads = heads, key dim = head dim): the lab's KDA entry, as for Kimi-Linear. The MLA
    cell: ``kv_lora_rank + qk_rope_head_dim`` in both (SGLang ``ModelConfig._derive_model_shapes``
    drops the rope part under ``use_mla_nope``, vLLM's ``get_head_size`` does not: refused).

    The engines disagree on a trailing partial group (``num_hidden_layers`` not a multiple of
    ``layer_group_size``): SGLang's ``BailingHybridConfig.layers_block_type`` keeps those layers
    linear (attention only where ``(i + 1) % g == 0``), vLLM's ``bailing_moe_v3.py``
    ``_is_kda_layer`` makes every layer at or past ``n // g * g`` attention. The counts are
    SGLang's; ``vllm_tail_attn_layers`` (n % g) gives vLLM's (``vllm._vllm_layers``)."""
    rope = config_int(c, "qk_rope_head_dim", lo=0)
    if c.get("use_mla_nope"):
        check_agree("the MLA cell's rope part (use_mla_nope)", 0, rope)
    heads = config_int(c, "num_attention_heads")
    head_dim = config_int(c, "head_dim")  # vLLM reads config.head_dim: no fallback guessed
    return {
        "n_linear_layers": n - n_attn,
        "n_attn_layers": n_attn,
        "vllm_tail_attn_layers": n % g,
        "linear_kind": "kda",
        "linear_heads": heads,
        "linear_k_dim": head_dim,
        "linear_v_dim": head_dim,
        "conv_kernel": config_int(c, "short_conv_kernel_size"),
        "kv_lora_rank": config_int(c, "kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "attn_heads": heads,
    }
