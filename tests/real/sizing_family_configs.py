"""The configs tests/real sizes against both engines' own code: every shipped config (real
models, ``kda_core/sizing/configs``, each naming its Hugging Face id and where its values come
from: Granite-4.0-H, Jet-Nemotron, ZAYA1, Zamba2, OLMo-Hybrid and Intern-S2-Mobius among them)
and, for the two families no public ``config.json`` was found for (Ling / Ring linear and
Nemotron-H Puzzle), the fields of the family's ``config.json`` as its config class reads them:
not a released checkpoint (the Puzzle's is the Nemotron Nano config with no per-block
overrides, the Ling / Ring one a 16-layer lightning + MLA layout of the class's own fields).

``CONFIGS[name]`` is the raw config, ``spec(name)`` the lab's ``ModelSpec`` of it and
``tps(name)`` the two smallest TP sizes the config's heads allow.
"""

from __future__ import annotations

import copy

from kda_core import sizing as sz
from kda_core.sizing.hf import shipped_configs

_NANO = shipped_configs()["nvidia-nemotron-nano-9b-v2"]["config"]

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
