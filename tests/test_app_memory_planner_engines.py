"""apps.memory_planner's engine view and log panel: a pasted config, SGLang next to vLLM, the
K3 write-up example, a log read back, bad configs, logs and uploads (the page keeps its state)."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from apps import memory_planner as mp
from apps import ui as common
from apps.memory_planner.checks import PRESETS, check_upload
from apps.memory_planner.inputs import load_config
from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.sizing.sglang import sglang_min_hit
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe
from tests import test_sizing_families as sizing_families

QWEN = "qwen3-next-80b-a3b-instruct"


def _config(name: str = QWEN, drop: str | None = None) -> str:
    cfg = dict(shipped_configs()[name]["config"])
    if drop:
        del cfg[drop]
    return json.dumps(cfg)


def test_pasted_config_plans_as_the_shipped_one():
    pasted = mp.run_plan("config.json", _config(), tp=4, ssm_dtype="float32")
    shipped = mp.run_plan(QWEN, tp=4, ssm_dtype="float32")
    assert pasted[0] == shipped[0] and pasted[13] == shipped[13] and pasted[14] == shipped[14]


def test_engines_side_by_side_are_the_studies_numbers():
    out = mp.run_plan(QWEN, tp=4, ssm_dtype="float32", kv_dtype="fp8_e4m3")
    p = pl.plan(sizing.shipped_spec(QWEN), tp=4, ssm_dtype="float32", kv_dtype="fp8_e4m3")
    v = pe.vllm_side(p)
    table = out[13]
    assert f"| state slots (vLLM: blocks shared with KV) | {p.state_slots:,} | " in table
    assert f"| {v.plan.num_blocks:,} |" in table
    assert f"| **max running requests** | **{p.max_running:,}** | **{v.max_running:,}** |" in table
    assert f"| attention block size (tokens) | page 1 | {v.plan.block_size:,} |" in table
    hit = f"{v.plan.min_prefix_hit_tokens:,} tokens"
    # SGLang's cell says why: states are saved every max(mamba chunk, page) tokens
    n, _ = sglang_min_hit(p.spec, p.deployment)
    sglang = f"{n} tokens: states are saved every 64 tokens (max(mamba chunk 64, page))"
    assert f"| smallest prompt that can hit the prefix cache | {sglang} | {hit} |" in table
    assert out[14].splitlines() == list(sizing.vllm_log_lines(v.plan))
    assert (
        out[14].splitlines()[0].startswith(f"Setting attention block size to {v.plan.block_size}")
    )


def test_vllm_refusing_to_start_is_said():
    out = mp.run_plan("kimi-k3", tp=1, budget_gib=20, ssm_dtype="float32")
    assert "0: refuses to start (max_num_seqs)" in out[13]
    assert out[14].splitlines()[-1].startswith("ValueError: max_num_seqs (256) exceeds")


def test_k3_writeup_example_prints_its_kv_line():
    model, tp, ssm, kv, gib, ratio, slots, page, ring = mp.k3_example()
    out = mp.run_plan(model, tp=tp, ssm_dtype=ssm, kv_dtype=kv, budget_gib=gib, ratio=ratio,
                      max_slots=slots, page_size=page, replayssm=ring)  # fmt: skip
    assert out[1].splitlines()[:3] == [
        "Mamba Cache is allocated. max_mamba_cache_size: 80, conv_state size: 0.14GB, "
        "ssm_state size: 2.05GB",
        "GDN ReplaySSM ring buffers allocated (L=16): d=0.256GB, k=0.256GB, g=0.512GB "
        "rawv=0.256GB, rawk=0.256GB, beta=0.004GB",
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1947648, KV size: 25.08 GB",
    ]
    assert "max_running_requests is capped to 16 by the mamba state cache" in out[1]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_config(drop="linear_num_key_heads"), "missing field 'linear_num_key_heads'"),
        ('{"model_type": "llama"}', "model_type 'llama' is not sized: it is not a hybrid"),
        ("{not json", "config_json is not valid JSON"),
        ("", "config_json is empty"),
    ],
)
def test_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(gr.Error, match=message):
        mp.run_plan("config.json", config)


def test_read_log_example_and_bad_logs():
    e = pe.EXAMPLE_LOGS[0]  # Kimi K3 at TP8 from SGLang's compute-mamba-ratio skill
    report, lines = mp.read_log(e.model, "", log=e.text, log_ratio=e.ratio)
    assert report.startswith("**sglang log of kimi-k3**: 2 reproduced")
    assert "**Verdict: bound by the state slots**" in report
    assert "257 state slots / 5 reserved per request = 51 running requests" in report
    row = "| `--mamba-ssm-dtype bfloat16` | 498 slots -> cap 99, 1,167,659 KV tokens | no |"
    assert row in report
    assert "| 1 | reproduced | `Mamba Cache is allocated." in lines
    assert "| `conv_state GB: 0.46 → 0.458" in lines
    # a ratio the log contradicts: the slot count it gives is not the logged one
    _, lines = mp.read_log(e.model, "", log=e.text, log_ratio=0.5)
    assert "| 1 | different | `Mamba Cache" in lines and "`max_mamba_cache_size: 257 → " in lines
    report, lines = mp.read_log(e.model, "", log="hello\nworld")  # counted, not refused
    assert "**Verdict: no line the reader knows**" in report
    assert lines == "2 lines skipped: not lines the reader knows (not listed)"
    with pytest.raises(gr.Error, match="paste a log first"):
        mp.read_log(e.model, "", log="  \n")
    with pytest.raises(gr.Error, match="ratio of the log"):
        mp.read_log(e.model, "", log=e.text, log_ratio=-1)


def test_client_paste_upload_and_log(tmp_path):
    from gradio_client import Client

    with common.launched(mp.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        e = pe.EXAMPLE_LOGS[2]  # the vLLM log of Qwen3.6-35B-A3B
        report, lines = c.predict(e.model, "", log=e.text, api_name="/memory_planner_read_log")
        assert "**Verdict: prefix caching inert below one block**" in report
        assert "2097 tokens to hit the prefix cache" in report
        with pytest.raises(Exception, match="missing field 'linear_num_key_heads'"):
            c.predict("config.json", _config(drop="linear_num_key_heads"), tp=4,
                      api_name="/memory_planner_plan")  # fmt: skip
        out = c.predict("config.json", _config(), tp=4, api_name="/memory_planner_plan")
        assert out[0] == mp.run_plan(QWEN, tp=4)[0]
        big = tmp_path / "config.json"
        big.write_bytes(b" " * ((1 << 20) + 1))
        with pytest.raises(ValueError, match="config_file must be at most 1,048,576 bytes"):
            pe.read_config_file(str(big))


def test_a_log_is_not_read_against_the_custom_numbers():
    with pytest.raises(gr.Error, match="a log is read against a shipped model or a config.json"):
        mp.read_log("custom", "", log=pe.EXAMPLE_LOGS[0].text)


def test_an_oversize_upload_is_refused_before_the_callback(tmp_path):
    """The upload's validator reads the size first; the text box and model keep their values."""
    big = tmp_path / "config.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(gr.Error, match="config_file must be at most 1,048,576 bytes"):
        check_upload(str(big))
    ok = tmp_path / "ok.json"
    ok.write_text(_config(), encoding="utf-8")
    assert load_config(str(ok)) == (_config(), "config.json")


# Ling 3.0's field set (BailingMoeV3ForCausalLM, KDA + MLA; every 6th layer attention)
LING3 = {**sizing_families.LING3, "max_position_embeddings": 262_144}


@pytest.mark.parametrize(
    ("language", "row"),
    [
        ("English", "layers (a trailing partial layer group: SGLang keeps it linear, vLLM"),
        ("中文", "层数（末尾不完整的层组"),
    ],
)
def test_a_trailing_layer_group_shows_each_engines_split(language, row):
    # 44 layers in groups of 6: layers 6, 12, ..., 42 are MLA (7), the rest KDA (37) for
    # SGLang; vLLM makes the trailing partial group (layers 43, 44) attention: 35 + 9
    tail = json.dumps({**LING3, "num_hidden_layers": 44})
    table = mp.run_plan("config.json", tail, tp=2, language=language)[13]
    line = next(x for x in table.splitlines() if row in x)
    if language == "English":
        assert line.endswith("| 37 KDA + 7 MLA | 35 KDA + 9 MLA |"), line
    else:
        assert line.endswith("| 37 层 KDA + 7 层 MLA | 35 层 KDA + 9 层 MLA |"), line
    # 42 layers: seven whole groups, both engines 35 + 7, no row
    whole = mp.run_plan("config.json", json.dumps(LING3), tp=2, language=language)[13]
    assert row not in whole


@pytest.mark.parametrize("language", ["English", "中文"])
def test_the_intro_names_the_families_the_planner_now_sizes(language):
    # Ling 3.0 (a pasted config.json) and Intern-S2-Mobius (a shipped one) plan on this page
    # (above); the intro that lists what a config.json may be names them too
    assert sizing.from_hf_config(LING3).family == "bailing_hybrid"
    assert "intern-s2-mobius" in PRESETS  # the model list
    intro = mp.MSG.lang(language)("intro")
    assert "Ling 3.0" in intro and "Intern-S2-Mobius" in intro
