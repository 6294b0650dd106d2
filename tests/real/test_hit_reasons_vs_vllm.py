"""The vLLM column of ``studies.hit_reasons`` against vLLM 0.33's own ``KVCacheManager``
(``get_computed_blocks``, ``allocate_slots``) and ``Scheduler._mamba_block_aligned_split``
(``vllm_blocks_driver.RealBlockCache``): the same prompts, served one after the other, must
report the same cached tokens request by request.

The cases are the reported ones of tests/test_hit_reasons.py (vllm-project/vllm#40696: block
528, prompts shorter than a block; #45238: block 528, states at chunk ends past a shared prefix;
vLLM 0.33 has the shared-prefix junction) and a seeded mix of shared prefixes, branches and
resends. Runs in the real-engine venv (tests/real/); skipped elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("vllm.v1.core.kv_cache_manager")
pytest.importorskip("torch")

from prompt_mix import prompt_mix, tokens  # noqa: E402
from vllm_blocks_driver import RealBlockCache  # noqa: E402

from kda_core.studies.hit_reasons import hit_reasons  # noqa: E402
from kda_core.workloads import load_trace  # noqa: E402


def real_cached(prompts: list[list[int]], block: int, chunk: int) -> list[int]:
    """Each prompt served to its end by vLLM's own manager; the tokens its lookup hit."""
    real = RealBlockCache(block, num_blocks=4096, max_num_batched_tokens=chunk)
    out = []
    for i, prompt in enumerate(prompts):
        rid = f"r{i}"
        real.add(rid, prompt)
        step = real.step(rid)
        out.append(step["hit"]["tokens"])
        while step["end"] < len(prompt):
            step = real.step(rid)
        real.finish(rid)
    return out


def model_cached(tmp: Path, prompts: list[list[int]], block: int, chunk: int, g: int) -> list[int]:
    path = tmp / "prompts.jsonl"
    rows = [json.dumps({"token_ids": p, "timestamp": i}) + "\n" for i, p in enumerate(prompts)]
    path.write_text("".join(rows))
    trace = load_trace(path, "token-ids", block_size=g)
    r = hit_reasons(trace, vllm={"block_size": block, "max_num_batched_tokens": chunk})
    return r.vllm.cached.tolist()


def test_prompts_shorter_than_the_raised_block(tmp_path: Path) -> None:
    shared = tokens(0, 480)
    prompts = [shared + tokens(10_000, 40), shared + tokens(20_000, 40)]
    prompts += [tokens(30_000, 552)] * 2 + [tokens(40_000, 979)] * 2
    want = real_cached(prompts, 528, 2048)
    assert want == [0, 0, 0, 528, 0, 528]  # the numbers of vllm#40696
    assert model_cached(tmp_path, prompts, 528, 2048, 8) == want


@pytest.mark.parametrize("shared_len", [1500, 1600])
def test_states_at_chunk_ends(tmp_path: Path, shared_len: int) -> None:
    shared = tokens(0, shared_len)
    prompts = [shared + tokens(100_000 * (i + 1), 2200 - shared_len) for i in range(6)]
    want = real_cached(prompts, 528, 2048)
    assert want == ([0, 0] + [1056] * 4 if shared_len == 1500 else [0] + [1584] * 5)
    assert model_cached(tmp_path, prompts, 528, 2048, 4) == want


@pytest.mark.parametrize("seed", range(4))
def test_a_mix_of_prefixes_agrees(tmp_path: Path, seed: int) -> None:
    # system prompts of 64-token multiples, follow-ups, branches and resends, block 128
    prompts = prompt_mix(seed)
    want = real_cached(prompts, 128, 256)
    assert any(want), "the mix must produce hits to compare"
    assert model_cached(tmp_path, prompts, 128, 256, 64) == want
