"""The plan's launch commands, drafter flags among them, parsed back by the engines' own
argument parsers: vLLM 0.33's ``FlexibleArgumentParser`` with ``EngineArgs.add_cli_args`` and
``EngineArgs.from_cli_args``; SGLang 0.5.23's ``ServerArgs.add_cli_args``. Every flag of every
point reads back as the value the point was sized at."""

from __future__ import annotations

import argparse
import json
import shlex

import pytest

from kda_core.plan._flags import check_grid, launch_command

DRAFT = "/models/qwen3-next-eagle3"
MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"


@pytest.fixture(scope="module")
def vllm_parser():
    import vllm.platforms as platforms
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms.cpu import CpuPlatform
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # the CPU venv has no device to infer; DeviceConfig's default reads the platform
    platforms._current_platform = CpuPlatform()
    p = FlexibleArgumentParser()
    EngineArgs.add_cli_args(p)
    return p, EngineArgs


def test_vllm_reads_back_every_point(vllm_parser, tmp_path):
    parser, engine_args = vllm_parser
    model = str(tmp_path)  # offline, vLLM resolves a hub id to a local snapshot: give a folder
    grid = {
        "speculative_config.method": [None, "mtp", "eagle3"],
        "speculative_config.num_speculative_tokens": [0, 3],
        "use_replayssm": [False, True],
        "kv_cache_dtype": ["auto", "fp8_e4m3"],
    }
    for f in check_grid("vllm", grid, {"speculative_config.model": DRAFT, "block_size": 32}):
        words = shlex.split(launch_command("vllm", model, 4, f))
        assert words[:3] == ["vllm", "serve", model]
        e = engine_args.from_cli_args(parser.parse_args(["--model", model, *words[3:]]))
        method = f["speculative_config.method"]
        want = None
        if method is not None:
            want = {"method": method, "model": DRAFT}
            if f["speculative_config.num_speculative_tokens"]:
                want["num_speculative_tokens"] = f["speculative_config.num_speculative_tokens"]
        assert e.speculative_config == want
        assert e.use_replayssm is f["use_replayssm"]
        assert (e.tensor_parallel_size, e.block_size, e.kv_cache_dtype) == (
            4,
            32,
            f["kv_cache_dtype"],
        )
        assert (e.max_num_seqs, e.max_num_batched_tokens) == (256, 2048)
        assert e.enable_prefix_caching is True and e.mamba_cache_mode == "align"


def test_sglang_reads_back_every_point():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    grid = {
        "speculative_algorithm": [None, "NEXTN", "EAGLE3"],
        "speculative_num_draft_tokens": [0, 4],
        "page_size": [1, 64],
    }
    for f in check_grid("sglang", grid, {"mamba_track_interval": 128}):
        if f["speculative_algorithm"] == "EAGLE3":
            f["speculative_draft_model_path"] = DRAFT
        words = shlex.split(launch_command("sglang", MODEL, 4, f))
        assert words[:3] == ["python", "-m", "sglang.launch_server"]
        a = parser.parse_args(words[3:])
        assert (a.model_path, a.tp_size, a.page_size) == (MODEL, 4, f["page_size"])
        assert a.mamba_track_interval == 128
        assert a.speculative_algorithm == f["speculative_algorithm"]
        assert a.speculative_draft_model_path == f["speculative_draft_model_path"]
        d = f["speculative_num_draft_tokens"]
        default = parser.get_default("speculative_num_draft_tokens")
        assert a.speculative_num_draft_tokens == (d or default)
        if f["speculative_algorithm"] is not None and d:
            # speculative_hook._handle_eagle_family: the steps given with the draft tokens
            # (else it asserts), and draft tokens = steps + 1 at topk 1
            assert (a.speculative_num_steps, a.speculative_eagle_topk) == (d - 1, 1)
        else:
            assert a.speculative_num_steps is None


def test_the_speculative_config_is_one_json_object():
    f = check_grid("vllm", None, {"speculative_config.method": "mtp"})[0]
    words = shlex.split(launch_command("vllm", MODEL, 8, f))
    assert json.loads(words[words.index("--speculative-config") + 1]) == {"method": "mtp"}
