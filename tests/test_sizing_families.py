"""Every hybrid family SGLang 0.5.23 or vLLM 0.33 serves, read from its config fields and sized
by hand from the engines' shape code (``sizing.kinds`` cites it per kind); which engine serves
which family; the refusals. The real engines' own code sizes the same configs in tests/real.
"""

from __future__ import annotations

import copy
import json

import pytest

from kda_core import sizing as sz
from kda_core.sizing.families import FAMILIES
from kda_core.sizing.hf import shipped_configs

BF16, F32 = 2, 4


def _cfg(name: str) -> dict:
    return copy.deepcopy(shipped_configs()[name]["config"])


def test_short_conv_lfm2_keeps_a_conv_window_only():
    s = sz.shipped_spec("lfm2-1.2b")
    # 10 conv layers x (L_cache - 1 = 2) x 2048 channels / tp, no recurrent state
    for tp in (1, 2, 4, 8):
        assert sz.conv_state_bytes(s, tp) == 10 * 2 * (2048 // tp) * BF16
        assert sz.kda_state_bytes(s, tp, "float32") == 0
    # GQA: 6 layers x K+V x 8 KV heads x head 2048 / 32 = 64
    assert sz.kv_bytes_per_token(s, 1) == 6 * 2 * 8 * 64 * BF16
    assert s.mamba_chunk_size == 1  # Lfm2Config.mamba_chunk_size: SGLang caches on the page grid


def test_lightning_minicpm_keeps_a_state_only():
    s = sz.shipped_spec("minicpm-sala")
    # 24 lightning layers x (32 heads / tp, 128, 128), no conv (conv_kernel 1)
    assert sz.kda_state_bytes(s, 2, "float32") == 24 * 16 * 128 * 128 * F32
    assert sz.conv_state_bytes(s, 2) == 0
    # SGLang's state is float32 (MiniCPMHybridConfig keeps the default dtype)
    assert sz.slot_bytes(s, 1) == 24 * 32 * 128 * 128 * F32
    assert sz.kv_bytes_per_token(s, 1) == 8 * 2 * 2 * 128 * BF16


def test_mamba1_jamba_in_vllm():
    s = sz.shipped_spec("jamba-v0.1")
    d = sz.Deployment(8 << 30, 2, max_model_len=262_144)
    p = sz.size_vllm(s, d)
    # mamba1_state_shape: conv (8192 / tp, W - 1), state (8192 / tp, 16); auto = model dtype
    per_layer = (4096 * 3) * BF16 + 4096 * 16 * BF16
    assert p.ssm_dtype == "bfloat16" and p.mamba_page_bytes == per_layer
    assert (p.group_size, p.attn_groups, p.mamba_groups) == (4, 1, 7)
    with pytest.raises(ValueError, match="SGLang 0.5.23 does not serve jamba"):
        sz.size_sglang(s, d)


def test_falcon_h1_every_layer_is_both():
    s = sz.shipped_spec("falcon-h1-7b-instruct")
    # conv (W-1) x (I + 2 G N) / tp with G raised to tp when tp does not divide it
    assert sz.conv_state_bytes(s, 1) == 44 * 3 * (3072 + 2 * 1 * 256) * BF16
    assert sz.conv_state_bytes(s, 4) == 44 * 3 * ((3072 + 2 * 4 * 256) // 4) * BF16
    assert sz.kda_state_bytes(s, 4, "float32") == 44 * 6 * 128 * 256 * F32
    assert sz.kv_bytes_per_token(s, 4) == 44 * 1 * 2 * 128 * BF16  # 2 KV heads: one per GPU
    p = sz.vllm_plan(s, 8 << 30, 2, max_model_len=32_768)
    assert (p.group_size, p.attn_groups, p.mamba_groups) == (44, 1, 1)
    assert p.blocks_per_request == -(-32_768 // p.block_size) + 3  # MambaMixer2: +1 block


def _granite(**over: object) -> dict:
    c = {
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_n_groups": 1,
        "mamba_d_state": 128,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "layer_types": ["mamba"] * 9 + ["attention"],
    }
    return {**c, **over}


def test_granite_reads_both_layer_type_spellings_and_its_head_size():
    s = sz.from_hf_config(_granite())
    assert (s.family, s.n_linear_layers, s.n_attn_layers, s.linear_heads) == (
        "granitemoehybrid",
        9,
        1,
        48,
    )
    new = ["linear_attention"] * 9 + ["full_attention"]  # transformers >= 5.15's names
    assert sz.from_hf_config(_granite(layer_types=new)) == s
    # intermediate = expand x hidden = 3072 = 48 x 64: conv (3072 + 2 x 128) x 3 per layer
    assert sz.conv_state_bytes(s, 1) == 9 * 3 * (3072 + 256) * BF16
    assert s.attn_head_dim == 1536 // 12 and s.sglang_ssm_dtype == "float32"
    # SGLang reads head_dim, vLLM's GraniteMoeHybridAttention uses hidden / heads
    with pytest.raises(ValueError, match="head size is 64 in SGLang 0.5.23 and 128 in vLLM 0.33"):
        sz.from_hf_config(_granite(head_dim=64))
    with pytest.raises(ValueError, match="mamba_n_heads x head dim must equal"):
        sz.from_hf_config(_granite(mamba_d_head=32))


def test_nemotron_h_spellings_and_its_head_size_default():
    nano = _cfg("nvidia-nemotron-nano-9b-v2")
    spec = sz.from_hf_config(nano)
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    listed = {k: v for k, v in nano.items() if k != "hybrid_override_pattern"}
    listed["layers_block_type"] = [names[x] for x in nano["hybrid_override_pattern"]]
    assert sz.from_hf_config(listed) == spec  # SGLang's (and transformers') newer field
    # no head_dim: both engines' config classes default it to 128; attention_head_dim unread
    n8 = _cfg("nemotron-h-8b-base-8k")
    assert sz.from_hf_config({**n8, "attention_head_dim": 96}).attn_head_dim == 128
    puzzle = {**nano, "model_type": "nemotron_h_puzzle", "block_configs": []}
    assert sz.from_hf_config(puzzle).family == "nemotron_h_puzzle"
    # vLLM reads mamba_ssm_cache_dtype (NemotronHForCausalLMConfig), SGLang mamba_ssm_dtype
    both = sz.from_hf_config({**nano, "mamba_ssm_cache_dtype": "bfloat16"})
    assert (both.sglang_ssm_dtype, both.vllm_ssm_dtype) == ("float32", "bfloat16")


def test_bailing_lightning_layers_and_mla():
    c = {
        "model_type": "bailing_hybrid",
        "architectures": ["BailingMoeV2_5ForCausalLM"],
        "num_hidden_layers": 16,
        "layer_group_size": 8,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    s = sz.from_hf_config(c)
    assert (s.linear_kind, s.n_linear_layers, s.n_attn_layers, s.attn_kind) == (
        "lightning",
        14,
        2,
        "mla",
    )
    assert sz.kda_state_bytes(s, 2, "float32") == 14 * 8 * 128 * 128 * F32
    assert sz.kv_bytes_per_token(s, 2) == 2 * 576 * BF16
    # vLLM sizes a lightning state in the cache dtype, whatever the SSM flag
    d = sz.Deployment(4 << 30, 2, "float32", max_model_len=8192)
    assert sz.size_vllm(s, d).ssm_dtype == "bfloat16"
    assert sz.size_sglang(s, d).ssm_dtype == "float32"
    by_arch = {**c, "model_type": "bailing_moe_linear"}  # found by its architecture
    assert sz.from_hf_config(by_arch).family == "bailing_hybrid"
    # no head_dim: SGLang's class default 128, vLLM's hidden / heads: sized where they agree
    no_hd = {k: v for k, v in c.items() if k != "head_dim"}
    assert sz.from_hf_config(no_hd).linear_k_dim == 2048 // 16 == 128
    with pytest.raises(ValueError, match="head size .* is 128 in SGLang 0.5.23 and 256 in vLLM"):
        sz.from_hf_config({**no_hd, "hidden_size": 4096})
    # a conv kernel under the V2.5 architecture: SGLang builds KDA layers, vLLM lightning ones
    with pytest.raises(ValueError, match="BailingMoeV2_5ForCausalLM: SGLang 0.5.23 sizes KDA"):
        sz.from_hf_config({**c, "short_conv_kernel_size": 4})


LING3 = {
    "model_type": "bailing_hybrid",
    "architectures": ["BailingMoeV3ForCausalLM"],
    "num_hidden_layers": 42,
    "layer_group_size": 6,
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "head_dim": 128,
    "short_conv_kernel_size": 4,
    "no_kda_lora": True,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
}


def test_bailing_kda_ling3_state_cell_and_dtypes():
    s = sz.from_hf_config(LING3)
    # MLA at layers 5, 11, ..., 41: 7 of 42; the rest KDA
    assert (s.linear_kind, s.n_linear_layers, s.n_attn_layers, s.attn_kind) == (
        "kda",
        35,
        7,
        "mla",
    )
    assert s.vllm_tail_attn_layers == 0
    for tp in (1, 2):
        # KimiLinearStateShape / kda_state_shape: conv (W-1) x (H D + 2 H D) / tp in bf16,
        # state (H / tp, D, D)
        conv = 3 * (32 * 128 + 2 * 32 * 128) // tp * BF16
        for ssm, b in (("float32", F32), ("bfloat16", BF16)):
            state = 32 // tp * 128 * 128 * b
            assert sz.slot_bytes(s, tp, ssm) == 35 * (conv + state), (tp, ssm)
        assert sz.kv_bytes_per_token(s, tp) == 7 * (512 + 64) * BF16
    d = sz.Deployment(4 << 30, 2, "bfloat16", max_model_len=8192)
    # SGLang takes the flag; vLLM's BailingMoeV3 never passes it to kda_state_dtype: float32
    assert sz.size_sglang(s, d).ssm_dtype == "bfloat16"
    assert sz.size_vllm(s, d).ssm_dtype == "float32"
    assert sz.size_vllm(s, d).mamba_page_bytes == 3 * 12288 // 2 * BF16 + 16 * 128 * 128 * F32
    assert sz.engine_refusal(s, "sglang") == sz.engine_refusal(s, "vllm") == ""


def test_bailing_kda_trailing_partial_group_follows_each_engine():
    # 44 layers in groups of 6: SGLang's layers_block_type keeps layers 42, 43 KDA; vLLM's
    # _is_kda_layer makes every layer at or past 44 // 6 * 6 = 42 attention
    s = sz.from_hf_config({**LING3, "num_hidden_layers": 44})
    assert (s.n_linear_layers, s.n_attn_layers, s.vllm_tail_attn_layers) == (37, 7, 2)
    per_layer = 3 * 12288 * BF16 + 32 * 128 * 128 * F32
    assert sz.slot_bytes(s, 1, "float32") == 37 * per_layer
    assert sz.kv_bytes_per_token(s, 1) == 7 * 576 * BF16
    p = sz.vllm_plan(s, 8 << 30, 1, max_model_len=8192)
    # vLLM's groups: 9 attention layers and 35 KDA layers, group size 9 -> 1 + 4 groups
    assert (p.spec.n_attn_layers, p.spec.n_linear_layers) == (9, 35)
    assert (p.group_size, p.attn_groups, p.mamba_groups) == (9, 1, 4)
    with pytest.raises(ValueError, match="vllm_tail_attn_layers must be"):
        sz.ModelSpec("x", 2, 1, 4, vllm_tail_attn_layers=3)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"short_conv_kernel_size": None}, "missing field 'short_conv_kernel_size'"),
        ({"head_dim": None}, "missing field 'head_dim'"),
        ({"use_mla_nope": True}, "use_mla_nope"),
    ],
)
def test_bailing_kda_refusals_name_the_field(change, match):
    with pytest.raises(ValueError, match=match):
        sz.from_hf_config({**LING3, **change})


def test_sglang_only_families():
    jet = {
        "model_type": "jet_nemotron",
        "layer_types": ["jet", "attn", "jet", "swa"],
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "efficient_attention_config": {
            "jet": {"num_heads": 12, "head_dim": 96, "expand_v": 2.0, "conv_size": 4}
        },
    }
    s = sz.from_hf_config(jet)
    # JetNemotronConfig: create(H V, H, H, V, K) with V = 192, K = 96
    assert sz.conv_state_bytes(s, 1) == 2 * 3 * (12 * 192 + 2 * 12 * 96) * BF16
    assert sz.kda_state_bytes(s, 1, "float32") == 2 * 12 * 192 * 96 * F32
    assert s.n_attn_layers == 2  # attn and swa
    zaya = {
        "model_type": "zaya",
        "zaya_layers": ["a", 16, "a", 16],
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_query_groups": 2,
        "head_dim": 128,
        "hidden_size": 2048,
        "cca_time0": 2,
        "cca_time1": 2,
    }
    z = sz.from_hf_config(zaya)
    # ZayaConfig: conv ((8 + 2) x 128 / tp, 2) and (2048, 1) unsplit, per attention layer
    assert sz.conv_state_bytes(z, 2) == 2 * (640 * 2 + 2048) * BF16
    with pytest.raises(ValueError, match="zaya_layers"):
        sz.from_hf_config({**zaya, "zaya_layers": None, "layer_types": ["hybrid"] * 2})
    for spec in (s, z):
        assert sz.engine_refusal(spec, "sglang") == ""
        assert sz.engine_refusal(spec, "vllm").startswith("vLLM 0.33 does not serve")
        with pytest.raises(ValueError, match="vLLM 0.33 does not serve"):
            sz.vllm_plan(spec, 1 << 30, max_model_len=4096)


def test_vllm_only_families():
    zamba = {
        "model_type": "zamba2",
        "hidden_size": 2560,
        "num_attention_heads": 32,
        "n_mamba_heads": 80,
        "mamba_ngroups": 1,
        "mamba_d_state": 64,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "layers_block_type": ["mamba", "mamba", "hybrid", "mamba"],
    }
    s = sz.from_hf_config(zamba)
    # every layer has a Mamba2 mixer; each hybrid layer a shared attention block with its KV,
    # head size 2 hidden / heads = 160, KV heads = heads (transformers' Zamba2Config)
    assert (s.n_linear_layers, s.n_attn_layers, s.attn_head_dim) == (4, 1, 160)
    assert sz.kv_bytes_per_token(s, 2) == 1 * 16 * 2 * 160 * BF16
    olmo = {
        "model_type": "olmo_hybrid",
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    o = sz.from_hf_config(olmo)
    # transformers' OlmoHybridConfig fallbacks: 8 key / value heads, K = 0.75 x 1024 / 8 = 96,
    # V = 192; KV heads = heads; attention head 1024 / 8
    assert (o.k_heads, o.linear_k_dim, o.linear_v_dim, o.attn_kv_heads) == (8, 96, 192, 8)
    for spec in (s, o, sz.shipped_spec("jamba-v0.1")):
        assert sz.engine_refusal(spec, "vllm") == ""
        assert sz.engine_refusal(spec, "sglang").startswith("SGLang 0.5.23 does not serve")


def test_gdn_families_and_their_vllm_default_dtype():
    q = _cfg("qwen3.6-35b-a3b")["text_config"]
    intern = {**q, "model_type": "interns2_mobius_text"}
    s = sz.from_hf_config(intern)
    # InternS2's architecture has no vLLM config handler: auto keeps the model dtype even
    # where the config declares mamba_ssm_dtype; Qwen3.5's applies it
    assert (s.family, s.vllm_ssm_dtype, sz.from_hf_config(q).vllm_ssm_dtype) == (
        "interns2_mobius_text",
        "",
        "float32",
    )
    assert sz.engine_refusal(s, "vllm") == sz.engine_refusal(s, "sglang") == ""


def test_every_family_names_what_serves_it():
    served = {k: (bool(f.sglang), bool(f.vllm)) for k, f in FAMILIES.items()}
    for key in ("falcon_h1", "granitemoehybrid", "lfm2", "lfm2_moe", "bailing_hybrid"):
        assert served[key] == (True, True)
    for key in ("zaya", "jet_nemotron", "minicpm_sala"):
        assert served[key] == (True, False)
    for key in ("jamba", "zamba2", "olmo_hybrid"):
        assert served[key] == (False, True)
    # InternS2 is served by both pinned engines (vLLM's registry lists
    # InternS2MobiusForConditionalGeneration and InternS2PreviewForConditionalGeneration)
    assert served["interns2_mobius"] == served["intern_s2_preview"] == (True, True)


# The shipped configs of the families above (each file names its model id and source), sized
# by hand at TP 1 from the engines' shape code: per linear layer a bf16 conv window of
# (kernel - 1) x channels plus a float32 state; per attention layer K and V of the KV heads.
SHIPPED_BY_HAND = {
    # 24 JetBlocks: channels H V + 2 H K = 12 x 256 + 2 x 12 x 96 (V = int(96 x 2.67)), state
    # H V K; 2 attn + 2 swa layers of 2 KV heads x 128
    "jet-nemotron-2b": (24 * (3 * 5376 * BF16 + 12 * 256 * 96 * F32), 4 * 2 * 2 * 128 * BF16),
    # 36 Mamba2: channels 48 x 64 + 2 x 1 x 128, state 48 x 64 x 128; 4 layers of 4 KV heads
    "granite-4.0-h-tiny": (36 * (3 * 3328 * BF16 + 48 * 64 * 128 * F32), 4 * 2 * 4 * 128 * BF16),
    # 24 Gated DeltaNet: channels 2 x 30 x 96 + 30 x 192, state 30 x 96 x 192; 8 x 30 KV heads
    "olmo-hybrid-7b": (24 * (3 * 11520 * BF16 + 30 * 96 * 192 * F32), 8 * 2 * 30 * 128 * BF16),
    # 54 Mamba2: channels 80 x 64 + 2 x 1 x 64, state 80 x 64 x 64; 9 hybrid layers, 32 KV
    # heads of 2 x 2560 / 32 = 160
    "zamba2-2.7b": (54 * (3 * 5248 * BF16 + 80 * 64 * 64 * F32), 9 * 2 * 32 * 160 * BF16),
    # 40 CCA layers (the even ones of 80): conv ((8 + 2) x 128, t0 + t1 - 2 = 2) and the
    # previous hidden state (2048, 1), no recurrent state; 40 layers of 2 KV heads
    "zaya1-8b-legacy": (40 * (1280 * 2 + 2048) * BF16, 40 * 2 * 2 * 128 * BF16),
    # 30 Gated DeltaNet: channels 2 x 16 x 128 + 32 x 128, state 32 x 128 x 128; 10 layers of
    # 2 KV heads x 256
    "intern-s2-mobius": (30 * (3 * 8192 * BF16 + 32 * 128 * 128 * F32), 10 * 2 * 2 * 256 * BF16),
}


@pytest.mark.parametrize("name", sorted(SHIPPED_BY_HAND))
def test_shipped_family_configs_by_hand(name):
    s = sz.shipped_spec(name)
    slot, kv = SHIPPED_BY_HAND[name]
    assert sz.slot_bytes(s, 1, "float32", "bfloat16") == slot
    assert sz.kv_bytes_per_token(s, 1) == kv


def test_the_command_line_names_vllms_layer_split_of_a_trailing_group(tmp_path, capsys):
    from kda_core.sizing import _cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LING3, "num_hidden_layers": 44}))
    assert _cli.main([str(path), "--engine", "both", "--max-model-len", "8192"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    # SGLang keeps layers 42, 43 KDA (37 + 7); vLLM makes them attention (35 + 9)
    kda = "Kimi Delta Attention"
    assert header.endswith(f": 37 {kda} + 7 MLA (vLLM: 35 {kda} + 9 MLA)"), header


def test_a_bailing_architecture_neither_engine_serves_is_refused_by_name():
    ring = {**LING3, "architectures": ["BailingMoeLinearV2ForCausalLM"]}
    with pytest.raises(ValueError, match="BailingMoeLinearV2ForCausalLM is served by neither"):
        sz.from_hf_config(ring)
    lightning = {k: v for k, v in ring.items() if k != "short_conv_kernel_size"}
    with pytest.raises(ValueError, match="architectures BailingMoeLinearV2ForCausalLM"):
        sz.from_hf_config(lightning)
    assert sz.from_hf_config({**LING3, "architectures": []}).linear_kind == "kda"  # the fields
