"""Each public report of lost prefix-cache hits under speculative decoding, placed on vLLM 0.33
with its own numbers: vLLM's own ``Scheduler`` (``vllm_spec_driver``) and the lab's rules
(``tests/vllm_spec_rules.py``) give the same cached tokens, and the test says whether the
report holds in 0.33 and with which flags. The table is in docs/hit_reasons.md
("Speculative decoding"). Runs in the real-engine venv (tests/real/)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm.v1.core.sched.scheduler")

from vllm_spec_driver import RealSpecScheduler, repeat  # noqa: E402

from tests.vllm_spec_rules import repeat_hits, vllm_spec  # noqa: E402

MTP = {"method": "mtp", "num_speculative_tokens": 2}  # one MTP module run twice
DROP = {**MTP, "disable_lookahead_block_hashes": True}


def both(U: int, n: int, flags, *, chunk: int = 8192, unit: int | None = None) -> tuple:
    """(first, second) repeat hits from vLLM, checked equal to the lab's."""
    real = repeat(U, n, chunk=chunk, flags=flags, prefix_match_unit=unit)[1:3]
    s = vllm_spec(U, max_num_batched_tokens=chunk, speculative_config=flags, prefix_match_unit=unit)
    lab = repeat_hits(s, n)
    assert (lab.first, lab.second) == real
    return real


def test_54360_the_law_holds_only_in_the_drop_mode() -> None:
    # 18,219-token prompt, U = 2144: without drafts floor((n-1)/U)*U = 17152
    U, n = 2144, 18219
    assert both(U, n, None) == (17152, 17152)
    assert both(U, n, MTP) == (17152, 17152)  # 0.33's lookahead hashes: no loss
    law = max(0, (n - 1) // U - 1) * U  # the reporter's (and #52244's) law
    assert both(U, n, DROP) == (law, law) == (15008, 15008)
    # at an exact multiple of U 0.33 keeps one block more than the law
    m = 3 * U
    assert both(U, m, DROP) == (2 * U, 2 * U) != (max(0, (m - 1) // U - 1) * U,) * 2


def test_52244_the_table_on_033() -> None:
    # Qwen3.5-122B, a 1072-token GDN page, --prefix-match-unit 67; the PR's table (an older
    # build) cached 0, 0, 0, 1072, 2144 on replay, "ceiling" ((n - 1) // 67 - 1) * 67
    U, u = 1072, 67
    lengths = (1072, 2000, 2144, 3000, 3500)
    # 0.33, lookahead hashes: (n - 1) // 67 * 67, one unit above the PR's ceiling
    assert [both(U, n, MTP, unit=u)[0] for n in lengths] == [1005, 1943, 2077, 2948, 3484]
    # 0.33, the drop: (n // 67 - 1) * 67 (the ceiling, or one unit more where 67 divides n)
    assert [both(U, n, DROP, unit=u)[0] for n in lengths] == [1005, 1876, 2077, 2881, 3417]


def test_53504_the_first_repeat_hits_in_033() -> None:
    # MTP with num_speculative_tokens=2, the default sparse retention (0), 8192-token chunks
    U, n = 1664, 7850
    no_spec = both(U, n, None)
    assert both(U, n, MTP) == no_spec == (6656, 6656)
    assert both(U, n, DROP) == (4992, 4992)  # the drop costs a block, not the first repeat


def test_53670_the_drop_costs_one_block() -> None:
    U, n = 1648, 3100  # a ~3.1k-token shared prefix, 1,648-token alignment unit
    assert both(U, n, MTP) == (1648, 1648)
    assert both(U, n, DROP) == (0, 0)  # 1,648 tokens recomputed per hit
    no_drop = {**DROP, "disable_eagle_block_drop": True}
    assert both(U, n, no_drop) == (1648, 1648)


def test_45238_spec_does_not_flip_hits_to_zero_in_033() -> None:
    U, n = 896, 2528  # four identical 2528-token prompts, 896-token attention block
    assert both(U, n, None) == both(U, n, MTP) == (1792, 1792)
    assert both(U, n, DROP) == (896, 896)


def test_57128_mamba_ignores_the_drop_but_the_hit_is_capped() -> None:
    U, n = 16, 50
    real = RealSpecScheduler(U, chunk=16, flags=DROP, retention=None)
    prompt = list(range(1000, 1000 + n))
    real.serve("cold", prompt)
    coord = real.sched.kv_cache_manager.coordinator
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    req = Request("probe", prompt, SamplingParams(max_tokens=1), None, block_hasher=real.hasher)
    _, per_group = coord.find_longest_cache_hit_per_group(req.block_hashes, n - 1)
    _, hit, _ = coord.find_longest_cache_hit(req.block_hashes, n - 1)
    assert per_group == (32, 48)  # MLA drops a block; the KDA group ignores drop_eagle_block
    assert hit == 32  # the reconciled hit is the MLA group's
    assert real.serve("repeat", prompt).hit == 32


def test_ascend_16639_upstream_counts_the_hits() -> None:
    U, n = 1536, 3000  # hash block 1536, a shared prefix under 2 x 1536
    real = RealSpecScheduler(U, chunk=8192, flags=MTP, log_stats=True)
    prompt = list(range(1000, 1000 + n))
    real.serve("cold", prompt)
    assert real.counted_hits == 0
    assert real.serve("repeat", prompt).hit == 1536
    assert real.counted_hits == 1536  # what vllm:prefix_cache_hits_total adds
    assert both(U, n, DROP) == (0, 0)  # "under 2 x the block gets nothing": the drop mode
