"""The configs tests/real sizes against both engines' own code: every shipped config (real
models, ``kda_core/sizing/configs``, each naming its Hugging Face id and where its values come
from: Granite-4.0-H, Jet-Nemotron, ZAYA1, Zamba2, OLMo-Hybrid and Intern-S2-Mobius among them)
and, for the layouts no public ``config.json`` was found for (Ling / Ring linear, Ling 3.0 and
Nemotron-H Puzzle), the fields of the family's ``config.json`` as its config class reads them:
not a released checkpoint (the Puzzle's is the Nemotron Nano config with no per-block
overrides, the Ling / Ring one a 16-layer lightning + MLA layout of the class's own fields).
``bailing_hybrid_kda`` (Ling 3.0, ``BailingMoeV3ForCausalLM``, KDA + MLA) has the shape
inclusionAI/Ling-3.0-flash's config has as third-party public code restates it (42 layers in
groups of 6, 32 heads of 128, conv kernel 4, kv_lora_rank 512, rope 64: a Rust loader's
"Ling-3.0-flash-int4 config facts", whose MLA layers 5, 11, ..., 41 it checks against the
checkpoint's index; the vendor's own vLLM fork, inclusionAI/vllm-ling-v3, tests its
BailingMoeV3 config with the same text fields: tests/transformers_utils/
test_bailing_moe_v3_vl_config.py; 262,144 positions: the 256K a third-party model table gives);
``bailing_hybrid_kda_tail`` the same with 44 layers, a trailing partial
group SGLang keeps KDA and vLLM makes MLA (``sizing._readers_bailing.read_bailing``).

``CONFIGS[name]`` is the raw config, ``spec(name)`` the lab's ``ModelSpec`` of it and
``tps(name)`` the two smallest TP sizes the config's heads allow.
"""

from __future__ import annotations

import copy

from kda_core import sizing as sz
from kda_core.sizing.hf import shipped_configs

_NANO = shipped_configs()["nvidia-nemotron-nano-9b-v2"]["config"]

_LING3 = {
    "model_type": "bailing_hybrid",
    "architectures": ["BailingMoeV3ForCausalLM"],
    "num_hidden_layers": 42,
    "layer_group_size": 6,
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "head_dim": 128,
    "short_conv_kernel_size": 4,
    "no_kda_lora": True,
    "kda_safe_gate": True,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "max_position_embeddings": 262_144,
}
FAMILY_CONFIGS: dict[str, dict] = {
    "bailing_hybrid": {
        "model_type": "bailing_hybrid",
        "architectures": ["BailingMoeV2_5ForCausalLM"],
        "num_hidden_layers": 16,
        "layer_group_size": 8,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "max_position_embeddings": 131_072,
    },
    "bailing_hybrid_kda": _LING3,
    "bailing_hybrid_kda_tail": {**_LING3, "num_hidden_layers": 44},
    "nemotron_h_puzzle": {
        **_NANO,
        "model_type": "nemotron_h_puzzle",
        "architectures": ["NemotronHPuzzleForCausalLM"],
        "block_configs": [],
    },
}
CONFIGS: dict[str, dict] = {
    **{k: v["config"] for k, v in shipped_configs().items()},
    **FAMILY_CONFIGS,
}


def raw(name: str) -> dict:
    return copy.deepcopy(CONFIGS[name])


def spec(name: str) -> sz.ModelSpec:
    return sz.from_hf_config(raw(name), name)


def tps(name: str, n: int = 2) -> list[int]:
    """The ``n`` smallest TP sizes (of 1, 2, 4, 8) the config's heads divide into."""
    s, out = spec(name), []
    for tp in (1, 2, 4, 8):
        try:
            sz.slot_bytes(s, tp)
            sz.kv_bytes_per_token(s, tp)
        except ValueError:
            continue
        out.append(tp)
    return out[:n]
