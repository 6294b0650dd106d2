"""``python -m kda_core.sizing CONFIG [...]``: every shipped config sized on the command line,
the engines' flag spellings, a log read back, ``--json``, and bad input refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kda_core import sizing as sz
from kda_core.sizing import _cli
from kda_core.sizing.hf import shipped_configs

DATA = Path(__file__).parent / "data"


def _json(capsys, *argv: str) -> dict:
    assert _cli.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_config_sizes_on_the_command_line(capsys, name):
    spec = sz.shipped_spec(name)
    tp = 2 if spec.linear_heads % 2 == 0 else 1
    out = _json(capsys, name, "--tp", str(tp), "--gpu-mem", "30", "--max-model-len", "32768")
    d = sz.Deployment(30 << 30, tp, max_model_len=32768, strategy="auto")
    for engine, size in (("sglang", sz.size_sglang), ("vllm", sz.size_vllm)):
        e = out[engine]
        refusal = sz.engine_refusal(spec, engine)
        assert e["served"] is (refusal == "")
        if not e["served"]:
            assert e["why"] == refusal
            continue
        got = size(spec, d)
        if engine == "sglang":
            assert (e["state_slots"], e["kv_tokens"]) == (got.max_mamba_cache_size, got.kv_tokens)
            assert e["log_lines"] == sz.sglang_log_lines(spec, d)
        else:
            assert (e["block_size"], e["num_blocks"]) == (got.block_size, got.num_blocks)
            assert e["log_lines"] == sz.vllm_log_lines(got)


def test_the_engines_flag_spellings(capsys):
    argv = ["kimi-k3", "--tp", "8", "--gpu-mem", str(29_497 / 1024), "--engine", "sglang"]
    argv += ["--mamba-ssm-dtype", "bfloat16", "--kv-cache-dtype", "fp8_e4m3", "--page-size", "64"]
    argv += ["--mamba-full-memory-ratio", "0.15", "--enable-linear-replayssm-spec"]
    e = _json(capsys, *argv)["sglang"]
    # the K3 write-up's fp8 deployment (tests/test_sizing_writeup.py): 80 slots, its KV line
    assert (e["state_slots"], e["kv_tokens"], e["max_running_requests"]) == (80, 1_947_648, 16)
    assert e["log_lines"][:3] == (DATA / "sglang_k3_writeup_fp8.log").read_text().splitlines()[:3]
    off = _json(capsys, "kimi-k3", "--tp", "8", "--engine", "sglang", "--disable-radix-cache")
    assert (
        off["sglang"]["slots_per_request"] == 1 and off["sglang"]["shortest_hitting_prompt"] is None
    )
    v = _json(capsys, "qwen3.6-35b-a3b", "--engine", "vllm", "--mamba-ssm-cache-dtype", "bfloat16")
    assert "sglang" not in v and v["vllm"]["ssm_dtype"] == "bfloat16"


def test_a_log_is_read_back_with_its_verdict(capsys):
    log = DATA / "sglang_qwen38_27b_otel_h100.log"
    out = _json(capsys, "qwen3.8-27b-fp8", "--engine", "sglang", "--log", str(log))
    assert out["log"]["engine"] == "sglang" and out["log"]["verdict"] == "state_slots"
    assert _cli.main(["qwen3.8-27b-fp8", "--log", str(log)]) == 0
    text = capsys.readouterr().out
    # without --engine, only the log's reading: no second answer sized at the default flags
    assert "log (sglang): state_slots" in text and "SGLang 0.5.23" not in text
    assert "vLLM 0.33" not in text


def test_a_vllm_log_says_the_target_is_not_checked(capsys):
    log = DATA / "vllm_qwen36_club3090_612.log"
    assert _cli.main(["qwen3.6-35b-a3b", "--log", str(log), "--target", "64"]) == 0
    text = capsys.readouterr().out
    assert "log (vllm): prefix_inert" in text and "--target: checked on SGLang logs" in text


def test_a_fragment_is_read_with_the_fixes_toward_a_target(capsys):
    log = DATA / "sglang_fragment_38846.log"
    argv = ["qwen3.8-27b-fp8", "--engine", "sglang", "--log", str(log), "--target", "32"]
    out = _json(capsys, *argv, "--max-running-requests", "32")["log"]
    assert out["running"] == {"requested": 32, "effective": 9, "won": "state", "target": 32}
    fix = next(f for f in out["fixes"] if f["flag"].endswith("memory-ratio 4.04"))
    assert fix["reaches"] and fix["log_lines"][0].startswith("Mamba Cache is allocated")
    assert _cli.main(argv) == 0
    assert "reaches" in capsys.readouterr().out


MTP_WITH_MODEL = '{"method": "mtp", "num_speculative_tokens": 2, "model": "x"}'  # plan refuses it


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["nope.json"], "config"),
        (["kimi-k3", "--tp", "7"], "tp"),
        (["kimi-k3", "--tp", "x"], "--tp"),
        (["kimi-k3", "--gpu-mem", "0"], "--gpu-mem"),
        (["kimi-k3", "--page-size", "0"], "page_size"),
        (["kimi-k3", "--mamba-full-memory-ratio", "-1"], "ratio"),
        (["kimi-k3", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype"),
        (["kimi-k3", "--bogus"], "--bogus"),
        (["kimi-k3", "--log", "missing.log"], "--log"),
        (
            ["kimi-k3", "--log", str(DATA / "sglang_fragment_38846.log"), "--target", "0"],
            "--target",
        ),
        ([], "config"),
        (
            ["qwen3-next-80b-a3b-instruct", "--speculative-config", MTP_WITH_MODEL],
            "--speculative-config",
        ),
    ],
)
def test_bad_input_exits_non_zero_in_one_line_naming_the_argument(capsys, argv, word):
    assert _cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and word in err


def test_the_module_runs(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(shipped_configs()["nvidia-nemotron-nano-9b-v2"]["config"]))
    done = subprocess.run(
        [sys.executable, "-m", "kda_core.sizing", str(cfg), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["vllm"]["served"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "kda_core.sizing", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: config")
