"""``studies.hit_requests``: the worst requests and one request's explanation, on the
vllm-project/vllm#40696 prompts of tests/test_hit_reasons.py (block 528; the cached tokens
and reasons are derived there): a 480-token shared prefix, a 552-token and a 979-token prompt
each sent twice, hashed in 8-token blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kda_core.studies.hit_reasons import hit_reasons
from kda_core.studies.hit_requests import explain, worst_requests
from kda_core.workloads import load_trace


def _study(tmp_path: Path):
    def tokens(start: int, n: int) -> list[int]:
        return list(range(start, start + n))

    shared = tokens(0, 480)
    prompts = [shared + tokens(10_000, 40), shared + tokens(20_000, 40)]
    prompts += [tokens(30_000, 552)] * 2 + [tokens(40_000, 979)] * 2
    path = tmp_path / "prompts.jsonl"
    rows = [{"token_ids": p, "timestamp": 1000 * i} for i, p in enumerate(prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return hit_reasons(load_trace(path, "token-ids", block_size=8), vllm={"block_size": 528})


def test_worst_requests_by_the_larger_gap(tmp_path: Path) -> None:
    r = _study(tmp_path)
    # token match [0, 480, 0, 552, 0, 979]; SGLang caches [0, 0, 0, 512, 0, 960], vLLM
    # [0, 0, 0, 528, 0, 528]: gaps max(SGLang, vLLM) = [0, 480, 0, 40, 0, 451]
    assert worst_requests(r, 4).tolist() == [1, 5, 3, 0]
    assert worst_requests(r, 100).tolist() == [1, 5, 3, 0, 2, 4]
    with pytest.raises(ValueError, match=r"n must be .*\[1, 100000\]"):
        worst_requests(r, 0)


def test_explain_below_one_block_and_unique_tokens(tmp_path: Path) -> None:
    e = explain(_study(tmp_path), 1)
    assert (e.input_len, e.token_match, e.block_size, e.matched_blocks) == (520, 480, 8, 60)
    assert not e.known_branch
    # both look up at most 519 tokens: all 480 shared ones are reusable
    assert (e.sglang.unit, e.sglang.reusable, e.sglang.grid_point) == (64, 480, 448)
    assert (e.sglang.cached, e.sglang.cached_unlimited) == (0, 0)
    assert e.sglang.reason == "state_in_unique_tokens"  # request 0 tracked 512, past 480
    assert (e.vllm.unit, e.vllm.grid_point, e.vllm.cached) == (528, 0, 0)
    assert e.vllm.reason == "below_one_block"


def test_explain_a_repeat(tmp_path: Path) -> None:
    e = explain(_study(tmp_path), 5)
    assert (e.input_len, e.token_match, e.matched_blocks) == (979, 979, 123)
    assert e.known_branch  # the first 979-token request ended there
    assert (e.sglang.reusable, e.sglang.grid_point, e.sglang.cached) == (978, 960, 960)
    assert (e.vllm.reusable, e.vllm.grid_point, e.vllm.cached) == (978, 528, 528)
    assert e.sglang.reason == e.vllm.reason == "hit"
    with pytest.raises(ValueError, match=r"i must be .*\[0, 5\]"):
        explain(_study(tmp_path), 6)
