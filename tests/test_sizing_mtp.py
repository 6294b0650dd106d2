"""The MTP drafter's own KV in both engines' sizing, by hand (tests/real checks the engines).

Per-layer KV by hand: Qwen3-Next, 2 KV heads x 256 x (K + V) x 2 bytes = 2,048 B per token;
Kimi K3, MLA (512 + 64) x 2 bytes = 1,152 B per token.
"""

from __future__ import annotations

import copy
import json

import pytest

from kda_core import sizing as sz
from kda_core.sizing._cli import main
from kda_core.sizing.hf import shipped_configs

GIB = 1 << 30


def _spec(name: str, **fields: int) -> sz.ModelSpec:
    raw = copy.deepcopy(shipped_configs()[name]["config"])
    raw.get("text_config", raw).update(fields)
    return sz.from_hf_config(raw, name)


Q3N = "qwen3-next-80b-a3b-instruct"


def test_vllm_mtp_layers_join_the_attention_groups():
    # 12 attention + 2 MTP = 14 vs 36 GDN: 36 >= 1.5 x 14, so groups of 14: 1 + cdiv(36, 14)
    spec = _spec(Q3N, num_nextn_predict_layers=2)
    # num_speculative_tokens left out: vLLM's default for MTP, n_predict = 2
    off = sz.vllm_plan(spec, 20 * GIB, max_model_len=65_536, num_speculative_tokens=2)
    on = sz.vllm_plan(spec, 20 * GIB, max_model_len=65_536, mtp=True)
    assert on.num_speculative_tokens == 2
    assert (off.group_size, off.attn_groups, off.mamba_groups) == (12, 1, 3)
    assert (on.group_size, on.attn_groups, on.mamba_groups, on.draft_attn_layers) == (14, 1, 3, 2)
    assert on.page_bytes == off.page_bytes and on.block_size == off.block_size
    assert on.num_blocks == 20 * GIB // (14 * on.page_bytes)
    blocks = -(-65_536 // on.block_size)
    assert on.draft_kv_bytes_per_request == 2 * blocks * on.page_bytes
    assert any("Add 6 padding layers" in x for x in sz.vllm_log_lines(on))  # 3 x 14 - 36


@pytest.mark.parametrize(
    "fields, modules",
    [
        ({}, 1),  # Qwen3NextMultiTokenPredictor: num_nextn_predict_layers, default 1
        ({"mtp_num_hidden_layers": 3}, 1),  # a field it does not read
        ({"num_nextn_predict_layers": 2}, 2),
    ],
)
def test_vllm_qwen3_next_reads_num_nextn_predict_layers(fields, modules):
    spec = _spec(Q3N, **fields)
    knobs = {"max_model_len": 4096, "num_speculative_tokens": 2, "mtp": True}
    assert sz.vllm_plan(spec, 8 * GIB, **knobs).draft_attn_layers == modules


def test_vllm_mtp_tokens_default_to_n_predict_and_must_divide():
    spec = _spec(Q3N, num_nextn_predict_layers=2)
    plan = sz.vllm_plan(spec, 8 * GIB, max_model_len=4096, mtp=True, num_speculative_tokens=4)
    assert plan.num_speculative_tokens == 4  # reuses the two modules in turn
    with pytest.raises(ValueError, match=r"\(3\) must be divisible by n_predict \(2\)"):
        sz.vllm_plan(spec, 8 * GIB, max_model_len=4096, mtp=True, num_speculative_tokens=3)
    with pytest.raises(ValueError, match="num_speculative_tokens must be given"):
        sz.vllm_plan(_spec(Q3N), 8 * GIB, max_model_len=4096, mtp=True)


def test_vllm_qwen3_5_reads_mtp_num_hidden_layers():
    spec = _spec("qwen3.6-35b-a3b", mtp_num_hidden_layers=2, num_nextn_predict_layers=5)
    assert sz.vllm_plan(spec, 8 * GIB, max_model_len=4096, mtp=True).draft_attn_layers == 2


def test_sglang_prices_the_targets_num_nextn_predict_layers():
    spec = _spec(Q3N, num_nextn_predict_layers=2)
    off = sz.split_memory(spec, 20 * GIB)
    on = sz.split_memory(spec, 20 * GIB, mtp=True)
    assert on.draft_cell_bytes == 2 * 2048 and on.draft_unpriced_bytes == 0
    cell = spec.n_attn_layers * 2048
    assert (on.kv_bytes, off.kv_tokens) == (off.kv_bytes, off.kv_bytes // cell)
    assert on.kv_tokens == on.kv_bytes // (cell + 2 * 2048)


def test_vllm_sizes_kimi_k3_mtp_sglang_has_no_draft_for_it():
    spec = _spec("kimi-k3", num_nextn_predict_layers=1)
    on = sz.vllm_plan(spec, 20 * GIB, tp=8, max_model_len=65_536, mtp=True)
    assert on.draft_attn_layers == 1  # one more MLA layer: 25 attention vs 69 KDA, groups of 25
    assert (on.group_size, on.attn_groups, on.mamba_groups) == (25, 1, 3)
    with pytest.raises(ValueError, match="SGLang 0.5.23 has no MTP draft model for Kimi"):
        sz.split_memory(spec, 20 * GIB, mtp=True)


def test_sglang_qwen3_next_without_the_field_prices_no_draft_but_allocates_one_layer():
    spec = _spec(Q3N, mtp_num_hidden_layers=1)
    on = sz.split_memory(spec, 20 * GIB, mtp=True)
    assert on.kv_tokens == sz.split_memory(spec, 20 * GIB).kv_tokens
    assert (on.draft_cell_bytes, on.draft_unpriced_bytes) == (0, 2048 * on.kv_tokens)


def test_unmodelled_drafts_are_refused_by_name():
    with pytest.raises(ValueError, match="num_nextn_predict_layers"):
        sz.vllm_plan(sz.shipped_spec("kimi-linear-48b-a3b-instruct"), GIB, mtp=True)
    with pytest.raises(ValueError, match="mtp: the lab models the MTP drafter of"):
        sz.split_memory(sz.shipped_spec("nvidia-nemotron-nano-9b-v2"), GIB, mtp=True)
    with pytest.raises(ValueError, match="num_nextn_predict_layers must be an integer"):
        _spec(Q3N, num_nextn_predict_layers="2")
    with pytest.raises(ValueError, match="mtp must be a bool"):
        sz.Deployment(GIB, mtp=1)


def test_cli_names_the_drafts_share(capsys):
    argv = [Q3N, "--gpu-mem", "20", "--max-model-len", "65536", "--json"]
    mtp = '{"method": "mtp", "num_speculative_tokens": 1}'
    assert main([*argv, "--speculative-config", mtp]) == 0
    out = json.loads(capsys.readouterr().out)
    v, s = out["vllm"], out["sglang"]
    assert v["draft_attn_layers"] == 1 and v["kv_tokens"] < v["kv_tokens_without_draft"]
    assert s["draft_kv_bytes_per_token"] == 0
    assert s["draft_kv_unpriced_bytes"] == 2048 * s["kv_tokens"]
    assert main([*argv, "--speculative-algorithm", "NEXTN", "--num-speculative-tokens", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm"] == v
    assert main(argv) == 0
    assert "draft_attn_layers" not in json.loads(capsys.readouterr().out)["vllm"]
    assert main([*argv, "--speculative-config", '{"method": "ngram"}']) == 2
    assert '"method" "mtp", "eagle" or "eagle3"' in capsys.readouterr().err
    assert main([*argv, "--speculative-config", '{"method": "eagle"}']) == 2  # no draft named
    assert '"model" must name the draft' in capsys.readouterr().err
    assert main(["kimi-k3", "--speculative-algorithm", "NEXTN", "--json"]) == 2  # no such field
    assert "num_nextn_predict_layers" in capsys.readouterr().err


def test_cli_refuses_one_engine_by_name(tmp_path, capsys):
    raw = copy.deepcopy(shipped_configs()["kimi-k3"]["config"])
    raw["text_config"]["num_nextn_predict_layers"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main([str(path), "--speculative-algorithm", "NEXTN", "--tp", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sglang"] == {
        "served": False,
        "why": "mtp: SGLang 0.5.23 has no MTP draft model for Kimi K3 / Kimi Linear",
    }
    assert out["vllm"]["draft_attn_layers"] == 1


def test_vllm_recoverssm_drops_the_draft_blocks_and_takes_records_outside_the_pool():
    # Kimi K3 at TP8, k = 3: 12 heads x 4 rows x (128 x 4 B + 256 x 2 B) = 49,152 B per layer
    # and request; x 69 KDA layers = 3,391,488 B (3.23 MiB); x 256 requests = 868,220,928 B
    k3 = sz.preset("kimi-k3")
    knobs = {"tp": 8, "max_model_len": 65_536, "num_speculative_tokens": 3}
    base = sz.vllm_plan(k3, 20 * GIB, **knobs)
    rec = sz.vllm_plan(k3, 20 * GIB, use_replayssm=True, **knobs)
    assert base.blocks_per_request - rec.blocks_per_request == 3 * base.mamba_groups
    assert (base.num_blocks, base.recoverssm_records_bytes) == (rec.num_blocks, 0)
    assert rec.recoverssm_records_bytes == 868_220_928
    line = "Allocated the KDA RecoverSSM verify records: 0.81 GiB in total for 256 requests "
    assert line + "(3.23 MiB per request)." in sz.vllm_log_lines(rec)
    with pytest.raises(ValueError, match="only with speculative decoding"):
        sz.vllm_plan(k3, GIB, tp=8, max_model_len=4096, use_replayssm=True)
    with pytest.raises(ValueError, match="KDA"):
        sz.vllm_plan(sz.shipped_spec(Q3N), GIB, use_replayssm=True, num_speculative_tokens=1)
