"""kda_core.sizing.from_hf_config: real hybrid configs (shipped) to ModelSpecs, and the per-slot
state, conv window and KV per token of each, derived by hand from the engines' shape code
(SGLang ``mamba_utils.Mamba2StateShape`` / ``KimiLinearStateShape``, vLLM
``MambaStateShapeCalculator``)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from kda_core import sizing as sz
from kda_core.model import _hf as hf
from kda_core.model.params import ModelConfig
from kda_core.sizing.hf import shipped_configs
from kda_core.sizing.sizes import state_shape

SHIPPED = {
    # name: (linear kind, linear layers, attention layers, linear heads, key heads / groups,
    # attention kind), counted by hand from each file
    "kimi-k3": ("kda", 69, 24, 96, 96, "mla"),
    "kimi-linear-48b-a3b-instruct": ("kda", 20, 7, 32, 32, "mla"),
    "qwen3-next-80b-a3b-instruct": ("gdn", 36, 12, 32, 16, "gqa"),
    "qwen3.6-35b-a3b": ("gdn", 30, 10, 32, 16, "gqa"),
    "qwen3.8-27b-fp8": ("gdn", 48, 16, 48, 16, "gqa"),
    "nvidia-nemotron-nano-9b-v2": ("mamba2", 27, 4, 128, 8, "gqa"),
    "nemotron-h-8b-base-8k": ("mamba2", 24, 4, 128, 8, "gqa"),  # 24 M, 4 *, 24 -
    "falcon-h1-7b-instruct": ("mamba2", 44, 44, 24, 1, "gqa"),  # every layer both
    "lfm2-1.2b": ("short_conv", 10, 6, 2048, 2048, "gqa"),  # full_attn_idxs: 6 of 16
    "lfm2-8b-a1b": ("short_conv", 18, 6, 2048, 2048, "gqa"),
    "minicpm-sala": ("lightning", 24, 8, 32, 32, "gqa"),  # 8 minicpm4 of 32 mixers
    "jamba-v0.1": ("mamba1", 28, 4, 8192, 8192, "gqa"),  # i % 8 == 4: 4 of 32
    "jet-nemotron-2b": ("jet", 24, 4, 12, 12, "gqa"),  # 24 jet, 2 attn + 2 swa of 28
    "granite-4.0-h-tiny": ("mamba2", 36, 4, 48, 1, "gqa"),  # attention at 5, 15, 25, 35
    "olmo-hybrid-7b": ("gdn", 24, 8, 30, 30, "gqa"),  # full attention at i % 4 == 3
    "zamba2-2.7b": ("mamba2", 54, 9, 80, 1, "gqa"),  # every layer Mamba2, 9 hybrid also attend
    "zaya1-8b-legacy": ("cca", 40, 40, 10, 10, "gqa"),  # even layers of 80; 8 + 2 CCA heads
    "intern-s2-mobius": ("gdn", 30, 10, 32, 16, "gqa"),  # layer_types: full at i % 4 == 3
}


def test_shipped_configs_name_their_source_and_parse():
    configs = shipped_configs()
    assert set(configs) == set(SHIPPED)
    for name, (kind, n_lin, n_attn, h, hk, attn) in SHIPPED.items():
        src = configs[name]["source"]
        assert "/" in src["hf_model_id"] and "config.json" in src["fields"]
        s = sz.shipped_spec(name)
        assert (s.linear_kind, s.n_linear_layers, s.n_attn_layers) == (kind, n_lin, n_attn)
        assert (s.linear_heads, s.k_heads, s.attn_kind) == (h, hk, attn)


def test_kimi_configs_equal_the_presets():
    for name, preset in (
        ("kimi-k3", "kimi-k3"),
        ("kimi-linear-48b-a3b-instruct", "kimi-linear-48b"),
    ):
        s, p = sz.shipped_spec(name), sz.preset(preset)
        for tp in (1, 2, 4, 8):
            assert sz.kda_state_bytes(s, tp, "float32") == sz.kda_state_bytes(p, tp, "float32")
            assert sz.conv_state_bytes(s, tp) == sz.conv_state_bytes(p, tp)
        kv = sz.kv_bytes_per_token(s, 8)
        assert kv == sz.mla_kv_bytes_per_token(p) == p.n_attn_layers * 576 * 2
    k3 = sz.shipped_spec("kimi-k3")
    assert sz.kda_state_bytes(k3, 8, "bfloat16") == 69 * 12 * 128 * 128 * 2 == 27_131_904
    assert sz.conv_state_bytes(k3, 8) == 69 * 3 * 12 * 384 * 2 == 1_907_712
    # the lab's own export (transformers' flat layout) sizes as the checkpoint layout does
    flat = hf.config_to_hf(
        ModelConfig(
            n_layers=3,
            variant="kimi-linear",
            gate_lower_bound=None,
            layer_types=("kda", "kda", "mla"),
        )
    )
    spec = sz.from_hf_config(flat)
    assert (spec.n_linear_layers, spec.n_attn_layers, spec.linear_heads) == (2, 1, 4)
    assert spec.conv_kernel == flat["linear_conv_kernel_dim"] == 4


def test_gdn_state_conv_and_gqa_kv_by_hand():
    q = sz.shipped_spec("qwen3-next-80b-a3b-instruct")
    # conv window (W-1) x (Hv*V + 2*Hk*K) / tp; state (Hv/tp, V, K)
    assert sz.conv_state_bytes(q, 1) == 36 * 3 * (32 * 128 + 2 * 16 * 128) * 2
    assert sz.kda_state_bytes(q, 1, "float32") == 36 * 32 * 128 * 128 * 4
    assert sz.conv_state_bytes(q, 4) == 36 * 3 * (8192 // 4) * 2
    assert sz.kda_state_bytes(q, 4, "float32") == 36 * 8 * 128 * 128 * 4
    # GQA: 12 layers x K+V x 2 KV heads x 256; one head per GPU once tp > 2
    assert sz.kv_bytes_per_token(q, 1) == 12 * 2 * 2 * 256 * 2
    assert sz.kv_bytes_per_token(q, 2) == sz.kv_bytes_per_token(q, 4) == 12 * 1 * 2 * 256 * 2
    assert sz.kv_bytes_per_token(q, 8, "fp8_e4m3") == 12 * 2 * 256
    with pytest.raises(ValueError, match="GQA"):
        sz.mla_kv_bytes_per_token(q)


def test_mamba2_groups_are_replicated_when_tp_exceeds_them():
    n = sz.shipped_spec("nvidia-nemotron-nano-9b-v2")
    assert sz.conv_state_bytes(n, 1) == 27 * 3 * (128 * 80 + 2 * 8 * 128) * 2
    assert sz.kda_state_bytes(n, 1, "float32") == 27 * 128 * 80 * 128 * 4
    assert sz.conv_state_bytes(n, 8) == 27 * 3 * (12288 // 8) * 2
    # 8 groups on 16 GPUs: SGLang and vLLM extend to 16 groups, conv 10240 + 2*16*128 = 14336
    assert sz.conv_state_bytes(n, 16) == 27 * 3 * (14336 // 16) * 2
    shape = state_shape(n, 16, "vllm")
    assert shape.conv_elems == 3 * 896 and shape.temporal == (8, 80, 128)
    with pytest.raises(ValueError, match="tp must divide"):
        sz.kda_state_bytes(n, 3)


def test_from_path_and_folder(tmp_path):
    cfg = shipped_configs()["qwen3-next-80b-a3b-instruct"]["config"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    a = sz.from_hf_config(tmp_path)
    b = sz.from_hf_config(tmp_path / "config.json")
    assert a == b == sz.from_hf_config(cfg) and a.name == "qwen3_next"
    assert sz.from_hf_config(cfg, name="mine").name == "mine"


def test_a_shipped_file_sizes_like_its_name(tmp_path):
    # the path of a shipped file ({"source", "config"}) reads its "config"; the label is the
    # config's model_type, the shape the shipped spec's
    path = Path(sz.hf.__file__).with_name("configs") / "intern-s2-mobius.json"
    spec = sz.from_hf_config(path)
    assert spec.name == "interns2_mobius_text" and spec.family == "interns2_mobius_text"
    assert dataclasses.replace(spec, name="intern-s2-mobius") == sz.shipped_spec("intern-s2-mobius")
    # a config.json that happens to have a "config" field is read as itself
    cfg = {**shipped_configs()["qwen3-next-80b-a3b-instruct"]["config"], "config": {}}
    cfg["source"] = {"hf_model_id": "x/y"}
    assert sz.from_hf_config(cfg).n_attn_layers == 12
    wrapped = {"source": {"hf_model_id": "x/y"}, "config": {"model_type": "llama"}}
    with pytest.raises(ValueError, match="'llama' is not sized"):
        sz.from_hf_config(wrapped)


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_the_command_line_sizes_each_shipped_file_like_its_name(capsys, name):
    from kda_core.sizing import _cli

    path = Path(sz.hf.__file__).with_name("configs") / f"{name}.json"
    runs = []
    for arg in (name, str(path)):
        assert _cli.main([arg, "--engine", "both", "--json"]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    by_name, by_path = runs
    for engine in ("sglang", "vllm"):
        assert by_path[engine] == by_name[engine], engine


def test_bad_files_are_refused(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("{" + " " * (1 << 20) + "}")
    with pytest.raises(ValueError, match="larger than"):
        sz.from_hf_config(big)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        sz.from_hf_config(bad)
    with pytest.raises(ValueError, match="no config.json"):
        sz.from_hf_config(tmp_path / "missing")
    with pytest.raises(ValueError, match="cfg must be"):
        sz.from_hf_config(42)


REQUIRED = {
    "kimi-linear-48b-a3b-instruct": [
        "num_hidden_layers",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "linear_attn_config.num_heads",
        "linear_attn_config.head_dim",
        "linear_attn_config.short_conv_kernel_size",
    ],
    "qwen3-next-80b-a3b-instruct": [
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
        "num_key_value_heads",
        "head_dim",
    ],
    "nvidia-nemotron-nano-9b-v2": [
        "mamba_num_heads",
        "mamba_head_dim",
        "ssm_state_size",
        "n_groups",
        "conv_kernel",
    ],
    "lfm2-1.2b": ["conv_L_cache", "hidden_size", "num_attention_heads"],
    "minicpm-sala": ["num_hidden_layers", "num_key_value_heads"],
    "jamba-v0.1": ["attn_layer_period", "mamba_expand", "mamba_d_state", "mamba_d_conv"],
    "falcon-h1-7b-instruct": ["mamba_n_heads", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"],
}
ALIASES = {  # a field and the aliases its refusal names
    "kimi-linear-48b-a3b-instruct": ("linear_attn_config.kda_layers", "layer_types"),
    "nvidia-nemotron-nano-9b-v2": ("hybrid_override_pattern", "layers_block_type"),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_a_missing_field_is_named(name):
    base = shipped_configs()[name]["config"]
    for field in REQUIRED[name]:
        cfg = copy.deepcopy(base)
        where = cfg
        *parents, key = field.split(".")
        for p in parents:
            where = where[p]
        del where[key]
        with pytest.raises(ValueError, match=f"'{field}'"):
            sz.from_hf_config(cfg)


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_a_missing_layer_pattern_is_named_with_its_aliases(name):
    cfg = copy.deepcopy(shipped_configs()[name]["config"])
    field, alias = ALIASES[name]
    *parents, key = field.split(".")
    where = cfg
    for p in parents:
        where = where[p]
    del where[key]
    with pytest.raises(ValueError, match=f"missing field '{alias}'.*{key}"):
        sz.from_hf_config(cfg)


def test_layer_split_rules():
    cfg = copy.deepcopy(shipped_configs()["qwen3.6-35b-a3b"]["config"])
    text = cfg["text_config"]
    spec = sz.from_hf_config(cfg)
    assert (spec.n_attn_layers, spec.sglang_ssm_dtype, spec.vllm_ssm_dtype) == (
        10,
        "float32",
        "float32",
    )
    del text["layer_types"]
    assert sz.from_hf_config(cfg).n_attn_layers == 10  # from full_attention_interval
    text["layer_types"] = ["linear_attention"] * 39 + ["full_attention"]
    with pytest.raises(ValueError, match="disagree"):
        sz.from_hf_config(cfg)
    del text["full_attention_interval"]
    assert sz.from_hf_config(cfg).n_attn_layers == 1
    del text["layer_types"]
    with pytest.raises(ValueError, match="'layer_types' \\(or 'full_attention_interval'\\)"):
        sz.from_hf_config(cfg)


def test_non_hybrids_are_refused_by_name():
    with pytest.raises(ValueError, match="'llama' is not sized: it is not a hybrid"):
        sz.from_hf_config({"model_type": "llama", "num_hidden_layers": 32})
    with pytest.raises(ValueError, match="'glm9' is not sized: it is not one of the hybrid"):
        sz.from_hf_config({"model_type": "glm9"})
    kimi = copy.deepcopy(shipped_configs()["kimi-linear-48b-a3b-instruct"]["config"])
    kimi["linear_attn_config"]["kda_layers"] = []
    with pytest.raises(ValueError, match="not a hybrid"):
        sz.from_hf_config(kimi)
    nemo = copy.deepcopy(shipped_configs()["nvidia-nemotron-nano-9b-v2"]["config"])
    nemo["hybrid_override_pattern"] = "*-*-"
    with pytest.raises(ValueError, match="not a hybrid"):
        sz.from_hf_config(nemo)
    with pytest.raises(ValueError, match="model_type"):
        sz.from_hf_config({})
    with pytest.raises(ValueError, match="head_dim must be an integer"):
        sz.from_hf_config(
            {**shipped_configs()["qwen3-next-80b-a3b-instruct"]["config"], "head_dim": "256"}
        )
