"""Print the README's sizing table: the lab's numbers next to SGLang 0.5.23's and vLLM 0.33's own
code for each shipped config (one GPU's 40 GiB rest budget, bf16 KV, each engine's default state
dtype, ratio 0.9, extra_buffer + overlap, pages of 64; vLLM prefix caching on, 131,072-token
requests; "not served" where the engine does not serve the family).

    .venv-real/bin/python tests/real/sizing_table.py
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(os.path.dirname(HERE))]

import fakes  # noqa: E402

fakes.install()

import pytest  # noqa: E402
import sglang_configs as sc  # noqa: E402
import test_sizing_configs_vs_sglang as tsg  # noqa: E402
import test_sizing_configs_vs_vllm as tvl  # noqa: E402

from kda_core import sizing as sz  # noqa: E402
from kda_core.sizing.hf import shipped_configs  # noqa: E402

REST, RATIO, PAGE, LENGTH = 40 << 30, 0.9, 64, 131_072
TP = {"kimi-k3": 8, "qwen3-next-80b-a3b-instruct": 4}


def _sglang(name: str, mp: pytest.MonkeyPatch, spec: sz.ModelSpec, tp: int) -> str:
    if sz.engine_refusal(spec, "sglang"):
        return "not served | - | not served"
    ssm = spec.sglang_ssm_dtype
    ours = sz.split_memory(spec, REST, RATIO, tp, page_size=PAGE)
    with sc.runtime_tp(mp, tp):
        cfg = sc.sglang_config(name)
        slots, left = tsg._sglang_split(mp, tsg._params(cfg, ssm), spec, REST, RATIO, False)
        tokens = sc.pool_tokens(sc.cell_size(cfg, spec, tp, "bfloat16"), left, PAGE)
    slots_cell = f"{ours.max_mamba_cache_size} / {slots}"
    return f"{slots_cell} | {ours.max_running} | {ours.kv_tokens:,} / {tokens:,}"


def _vllm(name: str, mp: pytest.MonkeyPatch, spec: sz.ModelSpec, tp: int) -> str:
    if sz.engine_refusal(spec, "vllm"):
        return "not served | - | - | -"
    p = sz.vllm_plan(spec, REST, tp, max_model_len=LENGTH)
    cc, _, config, v_tokens, conc, _ = tvl.real_plan(
        mp, name, tp, "bfloat16", None, LENGTH, REST, "align"
    )
    return (
        f"{p.block_size} / {cc.block_size} | {p.num_blocks:,} / {config.num_blocks:,} | "
        f"{p.max_concurrency:.2f} / {conc:.2f} | {p.kv_cache_tokens:,} / {v_tokens:,}"
    )


def row(name: str, mp: pytest.MonkeyPatch) -> str:
    spec, tp = sz.shipped_spec(name), TP.get(name, 1)
    return f"| {name} | {tp} | {_sglang(name, mp, spec, tp)} | {_vllm(name, mp, spec, tp)} |"


def main() -> None:
    print(
        "| model | TP | SGLang slots (lab / SGLang) | max running | SGLang KV tokens "
        "(lab / SGLang) | vLLM block (lab / vLLM) | vLLM blocks | vLLM concurrency | "
        "vLLM KV tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    mp = pytest.MonkeyPatch()
    try:
        for name in sorted(shipped_configs()):
            print(row(name, mp))
    finally:
        mp.undo()


if __name__ == "__main__":
    main()
