"""EAGLE / EAGLE3 drafters with their own config (``kda_core.sizing._eagle``): the draft config
reader, the refusals, and both engines' numbers worked by hand from the engines' rules
(docs/sizing.md, "EAGLE drafters with their own config"; the real code is run against them in
tests/real/test_sizing_eagle_vs_*.py)."""

from __future__ import annotations

import json

import pytest

from kda_core import sizing as sz
from kda_core.sizing._cli import main
from kda_core.sizing._eagle import read_eagle_draft, shipped_drafts

GIB = 1 << 30
Q3N, Q38, DRAFT = "qwen3-next-80b-a3b-instruct", "qwen3.8-27b-fp8", "qwen3-next-80b-a3b-eagle3"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _raw(**fields) -> dict:
    return {**shipped_drafts()[DRAFT]["config"], **fields}


def test_shipped_draft_is_read_and_pairs_with_a_shipped_target():
    d = read_eagle_draft(DRAFT)
    assert (d.architecture, d.num_hidden_layers, d.num_kv_heads, d.head_dim) == (
        "LlamaForCausalLMEagle3",
        1,
        2,
        256,
    )
    assert d.nextn_predict_layers is None
    assert shipped_drafts()[DRAFT]["pairs_with"] == Q3N
    # head_dim left out: hidden_size // num_attention_heads; kv heads left out: the heads
    raw = {k: v for k, v in _raw().items() if k not in ("head_dim", "num_key_value_heads")}
    d = read_eagle_draft(raw)
    assert (d.num_kv_heads, d.head_dim) == (16, 2048 // 16)


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"kv_lora_rank": 512}, "MLA draft"),
        ({"use_sliding_window": True}, "sliding-window"),
        ({"layer_types": ["sliding_attention"]}, "sliding-window"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be an integer in"),
        ({"num_key_value_heads": "2"}, "num_key_value_heads must be an integer"),
        ({"num_nextn_predict_layers": -1}, "num_nextn_predict_layers must be an integer in"),
    ],
)
def test_bad_draft_configs_are_refused_by_field(fields, match):
    with pytest.raises(ValueError, match=match):
        read_eagle_draft(_raw(**fields))


def test_sglang_prices_the_targets_per_layer_cell_and_allocates_the_drafts_own():
    spec, tp = sz.shipped_spec(Q38), 2
    d = read_eagle_draft(DRAFT)
    s = sz.split_memory(spec, 40 * GIB, 0.9, tp, eagle=d)
    off = sz.split_memory(spec, 40 * GIB, 0.9, tp)
    cell = 16 * (4 // tp) * 2 * 256 * 2  # 16 GQA layers, 2 KV heads a GPU, K+V, bf16
    assert s.draft_cell_bytes == cell // 16  # one layer at the TARGET's size: 2,048 B
    own = (2 // tp) * 2 * 256 * 2  # the draft's one layer: 1 KV head a GPU, 1,024 B
    assert s.draft_pool_bytes == own * (s.kv_tokens + 1)  # rows size + page_size
    assert s.draft_unpriced_bytes == own * (s.kv_tokens + 1) - cell // 16 * s.kv_tokens < 0
    assert s.kv_tokens == off.kv_bytes // (cell + cell // 16)
    # a draft naming num_nextn_predict_layers 0 is priced at nothing, allocated whole
    z = sz.split_memory(
        spec, 40 * GIB, 0.9, tp, eagle=read_eagle_draft(_raw(num_nextn_predict_layers=0))
    )
    assert z.draft_cell_bytes == 0 and z.kv_tokens == off.kv_tokens
    assert z.draft_unpriced_bytes == z.draft_pool_bytes == own * (z.kv_tokens + 1)


def test_vllm_an_equal_draft_joins_the_attention_groups():
    spec, d = sz.shipped_spec(Q3N), read_eagle_draft(DRAFT)
    knobs = {"max_model_len": 131_072, "num_speculative_tokens": 3}
    p = sz.vllm_plan(spec, 23 * GIB, 2, eagle=d, **knobs)
    mtp_like = sz.vllm_plan(spec, 23 * GIB, 2, **knobs)
    # 12 + 1 attention layers against 36 linear: groups of 13, one attention, three mamba
    assert (p.group_size, p.attn_groups, p.draft_groups, p.mamba_groups) == (13, 1, 0, 3)
    assert p.block_size == mtp_like.block_size and p.draft_block_size == p.block_size
    per_req = _cdiv(131_072, p.block_size) + 3 * (2 + 3)
    assert p.blocks_per_request == per_req
    assert p.num_blocks == 23 * GIB // (13 * p.page_bytes)
    assert p.draft_kv_bytes_per_request == _cdiv(131_072, p.block_size) * p.page_bytes


def test_vllm_a_smaller_draft_page_takes_a_larger_block_in_its_own_group():
    spec, d = sz.shipped_spec(Q38), read_eagle_draft(DRAFT)
    p = sz.vllm_plan(spec, 40 * GIB, 2, max_model_len=65_536, num_speculative_tokens=2, eagle=d)
    bs = p.block_size
    assert p.page_bytes == bs * 2 * 256 * 2 * (4 // 2)  # the target's page is the largest
    assert p.draft_block_size == 2 * bs  # the draft's page is half: twice the tokens a block
    # buckets of 16, 48 and 1 layers: groups of 1 (no padding)
    assert (p.group_size, p.attn_groups, p.draft_groups, p.mamba_groups) == (1, 16, 1, 48)
    per_req = 16 * _cdiv(65_536, bs) + _cdiv(65_536, 2 * bs) + 48 * (2 + 2)
    assert p.blocks_per_request == per_req
    assert p.num_blocks == 40 * GIB // p.page_bytes
    assert p.draft_kv_bytes_per_request == _cdiv(65_536, 2 * bs) * p.page_bytes


def test_vllm_a_larger_draft_page_raises_the_targets_block():
    spec = sz.shipped_spec(Q38)
    d = read_eagle_draft(_raw(num_key_value_heads=16))  # 8 heads a GPU at TP2: 4 x the target
    p = sz.vllm_plan(spec, 40 * GIB, 2, max_model_len=65_536, num_speculative_tokens=2, eagle=d)
    bs = p.block_size
    assert p.page_bytes == bs * 8 * 2 * 256 * 2 and p.draft_block_size == bs
    per_req = 16 * _cdiv(65_536, 4 * bs) + _cdiv(65_536, bs) + 48 * (2 + 2)
    assert p.blocks_per_request == per_req


def test_refusals_and_deployment_checks():
    d = read_eagle_draft(DRAFT)
    with pytest.raises(ValueError, match="num_speculative_tokens must be given"):
        sz.vllm_plan(sz.shipped_spec(Q3N), GIB, eagle=d)
    with pytest.raises(ValueError, match="GQA targets"):
        sz.vllm_plan("kimi-k3", 8 * GIB, 8, num_speculative_tokens=1, eagle=d)
    nemo = sz.shipped_spec("nemotron-h-8b-base-8k")
    assert sz.vllm_plan(nemo, 8 * GIB, num_speculative_tokens=1, eagle=d).draft_attn_layers == 1
    with pytest.raises(ValueError, match="captures no EAGLE3 hidden states"):
        sz.split_memory(nemo, 8 * GIB, eagle=d)
    with pytest.raises(ValueError, match="two drafters"):
        sz.Deployment(GIB, mtp=True, eagle=d)
    with pytest.raises(ValueError, match="num_attention_heads must be an integer"):
        sz.Deployment(GIB, eagle={"num_hidden_layers": 1})
    with pytest.raises(ValueError, match="eagle must be a draft config.json"):
        sz.Deployment(GIB, eagle=3)
    assert sz.Deployment(GIB, eagle=DRAFT).eagle == d  # a shipped draft by name


def test_cli_spells_the_draft_as_each_engine_does(capsys, tmp_path):
    argv = [Q38, "--gpu-mem", "40", "--tp", "2", "--max-model-len", "65536", "--json"]
    vllm_cfg = json.dumps({"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 2})
    assert main([*argv, "--speculative-config", vllm_cfg]) == 0
    out = json.loads(capsys.readouterr().out)
    d = read_eagle_draft(DRAFT)
    dep = sz.Deployment(40 * GIB, tp=2, max_model_len=65_536, num_speculative_tokens=2, eagle=d)
    spec = sz.shipped_spec(Q38)
    p, s = sz.size_vllm(spec, dep), sz.size_sglang(spec, dep)
    v, g = out["vllm"], out["sglang"]
    assert (v["draft_block_size"], v["kv_tokens"]) == (p.draft_block_size, p.kv_cache_tokens)
    assert v["kv_tokens_without_draft"] > v["kv_tokens"]
    assert (g["draft_kv_pool_bytes"], g["kv_tokens"]) == (s.draft_pool_bytes, s.kv_tokens)
    # SGLang's spelling, the draft as a folder: the same numbers
    (tmp_path / "config.json").write_text(json.dumps(shipped_drafts()[DRAFT]["config"]))
    sg = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(tmp_path)]
    assert main([*argv, *sg, "--num-speculative-tokens", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == out
    assert main([*argv, "--speculative-draft-model-path", DRAFT]) == 2
    assert "--speculative-algorithm EAGLE3" in capsys.readouterr().err
    assert main([*argv, *sg[:2], "--speculative-draft-model-path", "nowhere"]) == 2
    assert "no config.json, folder or shipped draft" in capsys.readouterr().err
