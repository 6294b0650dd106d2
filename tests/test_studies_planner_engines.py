"""kda_core.studies.planner_engines: the user's model, vLLM next to SGLang, example logs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe

DATA = Path(__file__).parent / "data"


def test_vllm_side_is_vllm_plan_for_the_same_knobs():
    spec = sizing.shipped_spec("qwen3.6-35b-a3b")
    p = pl.plan(spec, tp=1, budget_gib=20, ssm_dtype="float32", kv_dtype="fp8_e4m3")
    v = pe.vllm_side(p)
    want = sizing.vllm_plan(
        spec, 20 * sizing.GIB, 1, "fp8_e4m3", "bfloat16", "float32", max_model_len=19_000
    )
    assert v.plan == want
    # float32 state, fp8 KV: the block is raised to 2,096 tokens (as in the club-3090 logs)
    assert v.plan.block_size == 2096 and v.plan.min_prefix_hit_tokens == 2097
    # 10 attention layers, 30 linear: groups of 10 layers, 1 attention group, 3 mamba groups
    assert (v.plan.group_size, v.plan.attn_groups, v.plan.mamba_groups) == (10, 1, 3)
    assert v.attn_blocks_per_request == -(-19_000 // 2096) == 10
    assert v.mamba_blocks_per_request == 3 * 2  # 3 mamba groups x 2 blocks (align mode)
    assert v.max_running == int(want.num_blocks / want.blocks_per_request)
    assert v.log_lines == tuple(sizing.vllm_log_lines(want))
    none = pe.vllm_side(p, prefix_caching=False)
    assert none.plan.min_prefix_hit_tokens is None and none.mamba_blocks_per_request == 3


def test_vllm_refuses_to_start_when_max_num_seqs_exceeds_the_blocks():
    p = pl.plan("kimi-k3", tp=1, budget_gib=20, ssm_dtype="float32")
    v = pe.vllm_side(p, max_num_seqs=256)
    assert v.plan.num_blocks == 134 and v.max_running == 0
    assert v.log_lines[-1].startswith("ValueError: max_num_seqs (256) exceeds available Mamba")
    assert pe.vllm_side(p, max_num_seqs=134).max_running == 13  # 134 / 10 blocks per request


def test_a_shipped_config_pasted_gives_the_shipped_spec():
    for name, entry in shipped_configs().items():
        spec = pe.model_spec("config.json", json.dumps(entry["config"]))
        assert dataclasses.replace(spec, name=name) == sizing.shipped_spec(name)
    assert pe.model_spec("kimi-k3") == sizing.shipped_spec("kimi-k3")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "config_json is empty"),
        ("{", "config_json is not valid JSON"),
        ("[1, 2]", "config_json must hold a JSON object"),
        ('{"model_type": "llama"}', "model_type 'llama' is not sized: it is not a hybrid"),
        (" " * (1 << 20) + "{}", "config_json must be at most 1,048,576 bytes"),
    ],
)
def test_bad_configs_are_refused_by_name(text, message):
    with pytest.raises(ValueError, match=message):
        pe.model_spec("config.json", text)


def test_an_incomplete_config_names_the_missing_field():
    cfg = dict(shipped_configs()["qwen3-next-80b-a3b-instruct"]["config"])
    del cfg["linear_num_key_heads"]
    with pytest.raises(ValueError, match="missing field 'linear_num_key_heads'"):
        pe.model_spec("config.json", json.dumps(cfg))


def test_uploaded_file_size_is_checked_before_reading(tmp_path):
    big = tmp_path / "config.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(ValueError, match="config_file must be at most 1,048,576 bytes"):
        pe.read_config_file(str(big))
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": 1}', encoding="utf-8")
    assert pe.read_config_file(str(ok)) == '{"a": 1}'
    with pytest.raises(ValueError, match="config_file: no file"):
        pe.read_config_file(None)


def test_example_logs_are_the_test_data_and_round_trip():
    """The shipped examples are byte-for-byte the logs tests/data cites, and each reads back
    with no number different and nothing not understood."""
    verdicts = {}
    for e in pe.EXAMPLE_LOGS:
        assert e.text == (DATA / f"{e.name}.log").read_text(encoding="utf-8")
        spec = pe.model_spec(e.model)
        r = sizing.read_log(
            e.text, spec, page_size=e.page_size, ratio=e.ratio, requested=e.requested
        )
        c = r.counts()
        assert c["different"] == 0 and c["not understood"] == 0 and c["reproduced"] >= 1
        verdicts[e.name] = r.verdict
    assert verdicts == {
        "sglang_kimi_k3_compute_mamba_ratio": "state_slots",
        "sglang_qwen38_27b_otel_h100": "state_slots",
        "vllm_qwen36_club3090_612": "prefix_inert",
        "sglang_k3_writeup_fp8": "state_slots",
        "sglang_fragment_38846": "state_slots",  # one line: 9 = 47 // 5 of the 32 asked
    }
