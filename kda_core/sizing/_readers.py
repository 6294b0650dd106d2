"""Family readers (KDA, Gated DeltaNet, short conv, JetBlock, CCA): a config dict
-> ModelSpec fields, as SGLang 0.5.23's config class and vLLM 0.33's model class read it.

Each reader cites the engine code it follows. Helpers shared with ``_readers_mamba`` and
``_readers_bailing``:
``parse_types`` (per-layer type lists), ``gqa`` (GQA attention fields), ``parse_dtype`` (a
declared state dtype), ``check_agree`` (a field the two engines would size differently).
"""

from __future__ import annotations

from typing import Any

from kda_core.sizing.hfconfig import config_int, kimi_linear_layout
from kda_core.sizing.presets import MAX_DIM

Fields = dict[str, Any]
_STATE_DTYPES = ("float32", "bfloat16", "float16")


def parse_dtype(c: dict, key: str, default: str) -> str:
    """A declared state dtype (``mamba_ssm_dtype`` and the like), else ``default``."""
    d = c.get(key)
    if d is None:
        return default
    if d not in _STATE_DTYPES:
        raise ValueError(f"config.json: {key} must be one of {list(_STATE_DTYPES)}, got {d!r}")
    return d


def parse_types(c: dict, key: str, kinds: dict[str, str]) -> tuple[int, int, int]:
    """(linear, attention, all) layer counts of a per-layer type list; ``kinds`` maps a type
    to "linear", "attn", "both" or "" (an MLP / MoE layer)."""
    types = c.get(key)
    if not isinstance(types, list) or not types or len(types) > MAX_DIM:
        raise ValueError(f"config.json: missing field {key!r} (a list of layer types)")
    bad = sorted({str(t) for t in types} - set(kinds))
    if bad:
        raise ValueError(f"config.json: {key} has unknown layer types {bad}")
    lin = sum(kinds[t] in ("linear", "both") for t in types)
    attn = sum(kinds[t] in ("attn", "both") for t in types)
    return lin, attn, len(types)


def gqa(c: dict, head_dim: int, mha_default: bool = False) -> Fields:
    """GQA attention: ``num_key_value_heads`` of ``head_dim``; ``mha_default``: the family's
    config class falls back to one KV head per query head when the field is absent (else
    the field is required: a class default is not guessed)."""
    heads = config_int(c, "num_attention_heads")
    absent = c.get("num_key_value_heads") is None
    kv = heads if absent and mha_default else config_int(c, "num_key_value_heads")
    return {
        "attn_kind": "gqa",
        "attn_heads": heads,
        "attn_kv_heads": kv,
        "attn_head_dim": head_dim,
        "kv_lora_rank": 0,
        "qk_rope_head_dim": 0,
    }


def hidden_over_heads(c: dict) -> int:
    return config_int(c, "hidden_size") // config_int(c, "num_attention_heads")


def head_dim_or_hidden(c: dict) -> int:
    """The config's ``head_dim``, else hidden / heads (SGLang ``ModelConfig.
    _derive_model_shapes``; vLLM ``ModelArchConfigConvertorBase.get_head_size``)."""
    return config_int(c, "head_dim") if c.get("head_dim") is not None else hidden_over_heads(c)


def check_agree(what: str, sglang: int, vllm: int) -> int:
    """``sglang`` when the engines agree; ValueError naming both numbers otherwise."""
    if sglang != vllm:
        raise ValueError(
            f"config.json: {what} is {sglang} in SGLang 0.5.23 and {vllm} in vLLM 0.33; the "
            "engines size this model differently and the lab sizes one model"
        )
    return sglang


def read_kimi(c: dict) -> Fields:
    """KDA + MLA (``hfconfig.kimi_linear_layout``; SGLang ``KimiLinearConfig.
    mamba2_cache_params`` and vLLM's ``kimi_linear`` read only ``linear_attn_config``). SGLang's
    KDA state is float32 (``KimiLinearCacheParams`` keeps the default dtype)."""
    kinds, heads, head_dim, kernel = kimi_linear_layout(c)
    n_lin = kinds.count("kda")
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": len(kinds) - n_lin,
        "linear_heads": heads,
        "linear_k_dim": head_dim,
        "linear_v_dim": head_dim,
        "conv_kernel": kernel,
        "kv_lora_rank": config_int(c, "kv_lora_rank"),
        "qk_rope_head_dim": config_int(c, "qk_rope_head_dim", lo=0),
        "attn_heads": config_int(c, "num_attention_heads"),
    }


_GDN_TYPES = {"linear_attention": "linear", "full_attention": "attn"}


def _parse_gdn_layers(c: dict) -> tuple[int, int]:
    """``layer_types``, else every ``full_attention_interval``-th layer (SGLang
    ``Qwen3NextConfig.layers_block_type`` reads the interval; transformers and vLLM the list):
    both given must agree."""
    n = config_int(c, "num_hidden_layers")
    from_interval = None
    if c.get("full_attention_interval") is not None:
        k = config_int(c, "full_attention_interval")
        full = sum(1 for i in range(n) if (i + 1) % k == 0)
        from_interval = (n - full, full)
    if c.get("layer_types") is None:
        if from_interval is None:
            raise ValueError(
                "config.json: missing field 'layer_types' (or 'full_attention_interval')"
            )
        return from_interval
    lin, attn, total = parse_types(c, "layer_types", _GDN_TYPES)
    if total != n:
        raise ValueError(f"config.json: layer_types must list {n} layer types")
    if from_interval is not None and (lin, attn) != from_interval:
        raise ValueError("config.json: layer_types and full_attention_interval disagree")
    return lin, attn


def _gdn(c: dict, vllm_reads_declared: bool) -> Fields:
    n_lin, n_attn = _parse_gdn_layers(c)
    declared = parse_dtype(c, "mamba_ssm_dtype", "")
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": n_attn,
        "linear_kind": "gdn",
        "linear_heads": config_int(c, "linear_num_value_heads"),
        "linear_k_heads": config_int(c, "linear_num_key_heads"),
        "linear_k_dim": config_int(c, "linear_key_head_dim"),
        "linear_v_dim": config_int(c, "linear_value_head_dim"),
        "conv_kernel": config_int(c, "linear_conv_kernel_dim"),
        "sglang_ssm_dtype": declared or "float32",  # Qwen3NextConfig: mamba2_state_dtype(self)
        "vllm_ssm_dtype": declared if vllm_reads_declared else "",
        **gqa(c, config_int(c, "head_dim")),
    }


def read_qwen3_5(c: dict) -> Fields:
    """Qwen3.5 (GDN + GQA): vLLM applies the declared ``mamba_ssm_dtype``
    (``Qwen3_5ForConditionalGenerationConfig.verify_and_update_config``)."""
    return _gdn(c, True)


def read_gdn(c: dict) -> Fields:
    """Qwen3-Next and InternS2 (GDN + GQA): vLLM's ``auto`` keeps the model dtype (no config
    handler for their architectures in ``models/config.py``)."""
    return _gdn(c, False)


def read_olmo_hybrid(c: dict) -> Fields:
    """OLMo-Hybrid (vLLM only, GDN + GQA): transformers' ``OlmoHybridConfig.__post_init__``
    fallbacks (linear heads = attention heads, K = 0.75 hidden / key heads, V = 2 K, KV heads
    = heads); attention head size hidden / heads (``OlmoHybridAttention``)."""
    heads = config_int(c, "num_attention_heads")
    if c.get("num_key_value_heads") is None:
        c = {**c, "num_key_value_heads": heads}
    kh = c.get("linear_num_key_heads") or heads
    k = c.get("linear_key_head_dim") or int(0.75 * config_int(c, "hidden_size") / kh)
    filled = {
        "linear_num_key_heads": kh,
        "linear_num_value_heads": c.get("linear_num_value_heads") or heads,
        "linear_key_head_dim": k,
        "linear_value_head_dim": c.get("linear_value_head_dim") or 2 * k,
        "linear_conv_kernel_dim": c.get("linear_conv_kernel_dim") or 4,
        "head_dim": hidden_over_heads(c),
    }
    return _gdn({**c, **filled}, False)


_LFM2_TYPES = {"conv": "linear", "short_conv": "linear", "full_attention": "attn"}


def read_lfm2(c: dict) -> Fields:
    """LFM2 / LFM2-MoE (short conv + GQA): ``layer_types`` conv / full_attention, else
    ``full_attn_idxs`` (``Lfm2Config.linear_layer_ids``); SGLang sizes the conv over
    ``hidden_size``, vLLM's ``Lfm2ForCausalLM`` over ``conv_dim`` (``Lfm2MoeForCausalLM``
    over ``hidden_size``); kernel ``conv_L_cache``; attention head size hidden / heads (both
    engines' LFM2 attention). SGLang's cache grid is the page (``mamba_chunk_size`` 1)."""
    if c.get("layer_types") is None and isinstance(c.get("full_attn_idxs"), list):
        # transformers' Lfm2Config.__post_init__ spells the list out from the indices
        full = set(c["full_attn_idxs"])
        n = config_int(c, "num_hidden_layers")
        c = {**c, "layer_types": ["full_attention" if i in full else "conv" for i in range(n)]}
    n_lin, n_attn, _ = parse_types(c, "layer_types", _LFM2_TYPES)
    hidden = config_int(c, "hidden_size")
    if c.get("conv_dim") is not None:
        check_agree(
            "the short-conv width (hidden_size vs conv_dim)", hidden, config_int(c, "conv_dim")
        )
    hd = check_agree("the attention head size", head_dim_or_hidden(c), hidden_over_heads(c))
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": n_attn,
        "linear_kind": "short_conv",
        "linear_heads": hidden,
        "linear_v_dim": 1,
        "linear_k_dim": 0,
        "conv_kernel": config_int(c, "conv_L_cache"),
        "mamba_chunk_size": 1,
        **gqa(c, hd),
    }


_JET_TYPES = {"attn": "attn", "swa": "attn", "jet": "linear"}


def read_jet_nemotron(c: dict) -> Fields:
    """Jet-Nemotron (SGLang only): ``layer_types`` attn / swa / jet; the JetBlock state of
    ``efficient_attention_config.jet`` (``JetNemotronConfig.mamba2_cache_params``: heads, K =
    ``head_dim``, V = int(K ``expand_v``), kernel ``conv_size``)."""
    n_lin, n_attn, _ = parse_types(c, "layer_types", _JET_TYPES)
    jet = (c.get("efficient_attention_config") or {}).get("jet")
    if not isinstance(jet, dict):
        raise ValueError("config.json: missing field 'efficient_attention_config.jet'")
    where = "efficient_attention_config.jet."
    k = config_int(jet, "head_dim", where=where)
    expand = jet.get("expand_v")
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand <= 64:
        raise ValueError(f"config.json: missing field '{where}expand_v' (a number in (0, 64])")
    heads = config_int(jet, "num_heads", where=where)
    return {
        "n_linear_layers": n_lin,
        "n_attn_layers": n_attn,
        "linear_kind": "jet",
        "linear_heads": heads,
        "linear_k_heads": heads,
        "linear_k_dim": k,
        "linear_v_dim": int(k * expand),
        "conv_kernel": config_int(jet, "conv_size", where=where),
        "sglang_ssm_dtype": parse_dtype(c, "mamba_ssm_dtype", "float32"),
        **gqa(c, head_dim_or_hidden(c)),
    }


_MINICPM_MIXERS = {
    "minicpm4": "attn",
    "minicpm": "attn",
    "standard": "attn",
    "attention": "attn",
    "attn": "attn",
    "lightning": "linear",
    "lightning_attn": "linear",
    "lightning-attn": "linear",
}  # _MIXER_TYPE_ALIASES of SGLang's minicpm.py


def read_minicpm_sala(c: dict) -> Fields:
    """MiniCPM hybrid (``minicpm_sala``, SGLang only): ``mixer_types`` repeated over the layers
    (``MiniCPMHybridConfig.__init__``), lightning layers with a (H, D, D) state, H =
    ``lightning_nkv`` (else ``num_key_value_heads``; it must equal ``lightning_nh``), D =
    ``lightning_head_dim`` (else the head size); the rest GQA."""
    n = config_int(c, "num_hidden_layers")
    mixers = c.get("mixer_types") or ["minicpm4"]
    if not isinstance(mixers, list) or len(mixers) > n:
        raise ValueError(f"config.json: mixer_types must list at most {n} mixer types")
    full = (mixers * -(-n // len(mixers)))[:n]
    lin, attn, _ = parse_types({"mixer_types": full}, "mixer_types", _MINICPM_MIXERS)
    hd = head_dim_or_hidden(c)
    nkv = c.get("lightning_nkv") or config_int(c, "num_key_value_heads")
    if (c.get("lightning_nh") or config_int(c, "num_attention_heads")) != nkv and lin:
        raise ValueError("config.json: lightning_nh must equal lightning_nkv (SGLang's seg_la)")
    d = c.get("lightning_head_dim") or hd
    return {
        "n_linear_layers": lin,
        "n_attn_layers": attn,
        "linear_kind": "lightning",
        "linear_heads": config_int({"lightning_nkv": nkv}, "lightning_nkv"),
        "linear_k_dim": config_int({"lightning_head_dim": d}, "lightning_head_dim"),
        "linear_v_dim": d,
        "conv_kernel": 1,
        **gqa(c, hd),
    }


def read_zaya(c: dict) -> Fields:
    """ZAYA1 (SGLang only): CCA attention layers (``zaya_layers`` "a", else the even layers of
    ``num_hidden_layers``)
    keep a conv cache of ((heads + KV heads) head_dim / tp, t0 + t1 - 2) and the previous hidden
    state (hidden, 1) unsplit (``ZayaConfig.mamba2_cache_params``); heads from
    ``cca_num_q_heads`` (first non-zero) else ``num_attention_heads``, head dim ``head_dim``
    else ``kv_channels``. SGLang's cache grid is the page (``mamba_chunk_size`` 1)."""
    layers = c.get("zaya_layers")
    if isinstance(layers, list) and layers:  # "a" = CCA attention, an int = a MoE layer
        n_attn = sum(1 for x in layers if x == "a")
    elif c.get("layer_types") is not None:
        raise ValueError(
            "config.json: missing field 'zaya_layers': SGLang 0.5.23's ZayaConfig reads the "
            "zaya_layers list, not transformers' native layer_types (not sized here)"
        )
    else:
        n_attn = -(-config_int(c, "num_hidden_layers") // 2)  # the even layers
    q_list = [v for v in c.get("cca_num_q_heads") or [] if v]
    heads = q_list[0] if q_list else config_int(c, "num_attention_heads")
    kv = config_int(c, "num_key_value_heads", "num_query_groups")
    hd = config_int(c, "head_dim", "kv_channels")
    t0, t1 = config_int(c, "cca_time0"), config_int(c, "cca_time1")
    return {
        "n_linear_layers": n_attn,
        "n_attn_layers": n_attn,
        "linear_kind": "cca",
        "linear_heads": config_int({"cca heads": heads + kv}, "cca heads"),
        "linear_v_dim": hd,
        "linear_k_dim": 0,
        "conv_kernel": t0 + t1 - 1,
        "conv_unsplit": config_int(c, "hidden_size"),
        "mamba_chunk_size": 1,
        "sglang_ssm_dtype": parse_dtype(c, "mamba_ssm_dtype", "float32"),
        **gqa(c, hd),
    }
