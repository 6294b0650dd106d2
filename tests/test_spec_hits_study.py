"""``studies.spec_hits``: a resent prompt's cached tokens per engine with drafts and without,
values from vLLM 0.33's and SGLang 0.5.23's laws (docs/hit_reasons.md, "Speculative
decoding"), worked by hand."""

from __future__ import annotations

import pytest

from kda_core.studies.spec_hits import spec_hits

LENGTHS = [31, 32, 33, 48, 49, 129]
EAGLE = {"method": "eagle", "num_speculative_tokens": 2}


def test_the_drop_by_hand() -> None:
    # vLLM, block 16, the trailing-block drop: floor(n / 16) * 16 - 16
    # (v1/kv_cache_interface.py: get_mamba_prefill_checkpoint_position, then
    # v1/core/kv_cache_coordinator.py: find_longest_cache_hit drops one block); without
    # drafts floor((n - 1) / 16) * 16 (the input - 1 lookup)
    drop = {**EAGLE, "disable_lookahead_block_hashes": True}
    r = spec_hits(LENGTHS, speculative_config=drop, block_size=16)
    assert r.vllm.tolist() == [0, 16, 16, 32, 32, 112]
    assert r.vllm_no_drafts.tolist() == [16, 16, 32, 32, 48, 128]
    # short = at most half the shared tokens: 0 of 31 (16 without drafts is not short), 16
    # of 33 (32 without); 16 of 32 is short without drafts too; 32 of 49 is a hit
    assert r.vllm_reason == (
        "lost_to_speculative_decoding",
        "no_state_at_branch",
        "lost_to_speculative_decoding",
        "hit",
        "hit",
        "hit",
    )
    # SGLang (grid 64): its hybrid tree keys the same with drafts; a resend restores the
    # state at floor(n / 64) * 64 below n: 0 for n < 65, 128 for 129
    assert r.sglang.tolist() == r.sglang_no_drafts.tolist() == [0, 0, 0, 0, 0, 128]
    assert r.sglang_draft_tokens == 3  # speculative_hook._handle_eagle_family: steps + 1


def test_lookahead_hashes() -> None:
    # the default (lookahead block hashes): EAGLE reads 1 token ahead, the same as the
    # input - 1 lookup: nothing lost; multi-module MTP with 3 drafts reads 3:
    # floor((n - 3) / 16) * 16 (VllmConfig.num_hash_lookahead_tokens)
    r = spec_hits(LENGTHS, speculative_config=EAGLE, block_size=16)
    assert r.vllm.tolist() == r.vllm_no_drafts.tolist() == [16, 16, 32, 32, 48, 128]
    mtp3 = {"method": "mtp", "num_speculative_tokens": 3, "n_predict": 3}
    r = spec_hits(LENGTHS, speculative_config=mtp3, block_size=16)
    assert r.vllm.tolist() == [16, 16, 16, 32, 32, 112]


def test_default_lengths_and_refusals() -> None:
    r = spec_hits(speculative_config=EAGLE, block_size=16)  # around 1 .. 4 blocks
    assert r.prompt_len.tolist() == [15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65]
    with pytest.raises(ValueError, match="prompt_lens"):
        spec_hits([0], speculative_config=EAGLE, block_size=16)
    with pytest.raises(ValueError, match="prompt_lens must hold"):
        spec_hits([], speculative_config=EAGLE, block_size=16)
    with pytest.raises(ValueError, match="speculative_config"):
        spec_hits([32], speculative_config={"method": "medusa", "num_speculative_tokens": 2})
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        spec_hits([32], speculative_config={"method": "eagle"}, block_size=16)
