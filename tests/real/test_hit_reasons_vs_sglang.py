"""The SGLang column of ``studies.hit_reasons`` against SGLang 0.5.23's own radix tree
(``UnifiedRadixCache`` with FULL + MAMBA components, ``sglang_cache.RealSGLangCache``): the
same prompts, served one after the other, must report the same cached tokens.

Per request, the real tree is looked up with ``input - 1`` tokens (``Req._compute_max_prefix_len``
in ``python/sglang/srt/managers/schedule_batch.py``) and its device prefix is the cached count;
the request's states are placed by ``make("sglang")`` (checked against SGLang's own placement code
by tests/real/test_sglang_placement.py) from the real match (``full_kv_hit_length``, the device
prefix) and inserted into the real tree at each position. Runs in the real-engine venv.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang.srt.mem_cache.radix_cache")

from prompt_mix import prompt_mix, tokens  # noqa: E402
from sglang_cache import RealSGLangCache  # noqa: E402

from kda_core.cache import policy as policy_mod  # noqa: E402
from kda_core.studies.hit_reasons import hit_reasons  # noqa: E402
from kda_core.workloads import load_trace  # noqa: E402


def real_cached(prompts: list[list[int]]) -> list[int]:
    real = RealSGLangCache(kv_size=1 << 16, mamba_slots=2048, max_reqs=64)
    pol = policy_mod.make("sglang")
    out = []
    for prompt in prompts:
        L = len(prompt)
        m = real.match(prompt[: L - 1])
        cached = m.device_prefix_len
        out.append(cached)
        match = SimpleNamespace(token_match=m.full_kv_hit_length, restore_at=cached)
        for p in pol.checkpoint_positions(L, match, page_size=1):
            real.insert(prompt[:p])
    return out


def model_cached(tmp: Path, prompts: list[list[int]], g: int) -> list[int]:
    path = tmp / "prompts.jsonl"
    rows = [json.dumps({"token_ids": p, "timestamp": i}) + "\n" for i, p in enumerate(prompts)]
    path.write_text("".join(rows))
    trace = load_trace(path, "token-ids", block_size=g)
    # vLLM's block only sets the trace's split: a multiple of g keeps SGLang's page at g
    return hit_reasons(trace, vllm={"block_size": 4 * g}).sglang.cached.tolist()


def test_identical_prompt_and_shared_prefix(tmp_path: Path) -> None:
    # an identical 1024-token prompt restores nothing (the 1023-token lookup splits the node
    # holding the only state); a prompt sharing 480 tokens of a 520-token one restores nothing
    # (its state at 512 is past the branch); the third sharer restores the branch state, 448
    shared = tokens(0, 480)
    prompts = [tokens(50_000, 1024)] * 2
    prompts += [shared + tokens(10_000 * (k + 1), 40) for k in range(3)]
    assert real_cached(prompts) == [0, 0, 0, 0, 448]
    assert model_cached(tmp_path, prompts, 8) == [0, 0, 0, 0, 448]


@pytest.mark.parametrize("seed", range(4))
def test_a_mix_of_prefixes_agrees(tmp_path: Path, seed: int) -> None:
    prompts = prompt_mix(seed)
    want = real_cached(prompts)
    assert any(want), "the mix must produce hits to compare"
    assert model_cached(tmp_path, prompts, 64) == want
