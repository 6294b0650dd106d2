"""vLLM 0.33's prefix-cache rules with speculative decoding (``tests/vllm_spec_rules.py``):
values worked by hand from the vLLM functions each rule names. The same rules are compared
with vLLM's own ``Scheduler`` and ``KVCacheManager`` on a grid in
tests/real/test_spec_hits_vs_vllm.py."""

from __future__ import annotations

import pytest

from tests.vllm_spec_rules import (
    SpecStallWarning,
    checkpoint_position,
    prefill_chunks,
    repeat_hits,
    replay_boundaries,
    vllm_spec,
)

EAGLE = {"method": "eagle", "num_speculative_tokens": 2}
DROP = {**EAGLE, "disable_lookahead_block_hashes": True}
MTP3 = {"method": "mtp", "num_speculative_tokens": 3, "n_predict": 3}
DFLASH = {"method": "dflash", "num_speculative_tokens": 3}


@pytest.mark.parametrize(
    ("cfg", "kv", "want"),
    [
        # (drop, hash lookahead, prefill lookahead, KV lookahead, speculative blocks)
        (None, False, (False, 0, 0, 0, 0)),
        (EAGLE, False, (False, 1, 1, 2, 2)),  # lookahead hashes replace the drop
        (DROP, False, (True, 0, 1, 2, 2)),
        (EAGLE, True, (True, 0, 1, 2, 2)),  # a KV connector keeps the legacy hashes
        ({**EAGLE, "disable_eagle_block_drop": True}, False, (False, 0, 1, 2, 2)),
        (MTP3, False, (False, 3, 3, 3, 3)),  # multi-module MTP reads k tokens ahead
        ({**MTP3, "n_predict": 1}, False, (False, 1, 1, 3, 3)),  # one module run k times
        ({**MTP3, "disable_lookahead_block_hashes": True}, False, (True, 0, 3, 3, 3)),
        # DFlash / DSpark draft from the target's hidden state: never the drop, so no
        # lookahead hashes either; DFlash's bonus query takes one KV slot more
        (DFLASH, False, (False, 0, 1, 4, 3)),
        (DFLASH, True, (False, 0, 1, 4, 3)),
        ({**DFLASH, "method": "dspark"}, False, (False, 0, 1, 3, 3)),
    ],
)
def test_what_the_flags_turn_on(cfg: dict | None, kv: bool, want: tuple) -> None:
    s = vllm_spec(16, speculative_config=cfg, kv_transfer_config=kv)
    got = (s.drop, s.hash_lookahead, s.prefill_lookahead, s.lookahead, s.speculative_blocks)
    assert got == want


def test_replayssm_writes_no_per_draft_state_blocks() -> None:
    assert vllm_spec(16, speculative_config=EAGLE, replayssm=True).speculative_blocks == 0


def test_checkpoint_position_by_hand() -> None:
    assert checkpoint_position(33, 16, False, 0) == 32  # (33 - 1) // 16 * 16
    assert checkpoint_position(32, 16, False, 0) == 16  # the last token is recomputed
    assert checkpoint_position(32, 16, True, 0) == 16  # 32 - one block
    assert checkpoint_position(17, 16, True, 0) == 0
    assert checkpoint_position(50, 16, False, 3) == 32  # (50 - 3) // 16 * 16


def test_replay_boundaries_by_hand() -> None:
    assert replay_boundaries(32, 16, False) == (31,)
    assert replay_boundaries(32, 16, True) == (0, 16)  # resend 16 - 16, extension 32 - 16
    assert replay_boundaries(33, 16, True) == (16,)


def test_chunks_stop_at_the_last_cacheable_boundary() -> None:
    s = vllm_spec(16, max_num_batched_tokens=64)
    assert prefill_chunks(s, 33) == ((32, 33), False)


def test_a_multi_module_mtp_prefill_that_stalls() -> None:
    # chunk 1: 16 tokens cut to 14 (no chunk may end 1 < 3 tokens before the end); chunk 2:
    # 3 tokens cut at the block boundary 16, then to 0 by the same rule: stalled
    s = vllm_spec(16, max_num_batched_tokens=16, speculative_config=MTP3)
    assert prefill_chunks(s, 17) == ((14,), True)
    with pytest.warns(SpecStallWarning, match="stalls"):
        r = repeat_hits(s, 17)
    assert r.stalled and r.first is None and r.second is None


def test_a_wider_budget_does_not_stall() -> None:
    s = vllm_spec(16, max_num_batched_tokens=32, speculative_config=MTP3)
    assert prefill_chunks(s, 33) == ((16, 33), False)


@pytest.mark.parametrize(
    ("cfg", "n", "want"),
    [
        (None, 33, 32),  # floor((n - 1) / U) * U
        (EAGLE, 33, 32),  # lookahead hashes: no loss
        (DROP, 33, 16),  # the drop: floor(n / U) * U - U
        (DROP, 32, 16),  # vllm#52244's law says 0 here; 0.33 keeps the extension boundary
        (DROP, 31, 0),
        (MTP3, 33, 16),  # the state at 16 is the checkpoint boundary (n - 3) // 16 * 16
        ({**DFLASH, "disable_lookahead_block_hashes": True}, 33, 32),  # nothing to drop
    ],
)
def test_repeat_hits_by_hand(cfg: dict | None, n: int, want: int) -> None:
    s = vllm_spec(16, max_num_batched_tokens=32, speculative_config=cfg)
    r = repeat_hits(s, n)
    assert (r.first, r.second, r.stalled) == (want, want, False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"speculative_config": {"method": "medusa", "num_speculative_tokens": 2}}, "method"),
        ({"speculative_config": {"method": "mtp", "num_speculative_tokens": 0}}, "num_spec"),
        ({"speculative_config": {"method": "mtp"}}, "num_speculative_tokens"),
        ({"speculative_config": {**EAGLE, "draft": 1}}, "unknown keys"),
        ({"speculative_config": {**EAGLE, "n_predict": 0}}, "n_predict"),
        ({"speculative_config": {**EAGLE, "disable_eagle_block_drop": 1}}, "disable_eagle"),
        ({"prefix_match_unit": 5}, "prefix_match_unit"),
        ({"prefix_cache_retention_interval": 24}, "multiple of block_size"),
        ({"speculative_config": {**MTP3, "num_speculative_tokens": 20, "n_predict": 20}}, ">="),
        ({"speculative_config": EAGLE, "max_num_batched_tokens": 2}, "max_num_batched_tokens"),
        ({"speculative_config": [1]}, "speculative_config"),
    ],
)
def test_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        vllm_spec(16, **kwargs)


def test_lengths_are_checked() -> None:
    s = vllm_spec(16)
    with pytest.raises(ValueError, match="prompt_len"):
        repeat_hits(s, 0)
    with pytest.raises(ValueError, match="hit"):
        prefill_chunks(s, 10, hit=10)


def test_partial_hits_only_in_align_mode() -> None:
    from tests.vllm_spec_rules import partial_hits_enabled

    assert partial_hits_enabled("align", 64, 16) is True
    assert partial_hits_enabled("align", 64, 64) is False
    assert partial_hits_enabled("all", 64, 16) is False  # the lab's "all" placement must agree
    with pytest.raises(ValueError, match="mamba_cache_mode"):
        partial_hits_enabled("none", 64, 16)


def test_the_mla_tail_key_a_later_unit_replaces() -> None:
    # U = 16, u = 4, multi-module MTP k = 4: the resend hashes (15 - 4) // 4 = 2 units (8);
    # the producer's MLA tail key moves from 8 to 12 (limit 14) in the same block: no hit
    mtp4 = {"method": "mtp", "num_speculative_tokens": 4, "n_predict": 4}
    s = vllm_spec(16, max_num_batched_tokens=8, speculative_config=mtp4, prefix_match_unit=4)
    assert repeat_hits(s, 15).first == 0
    # one module (hash lookahead 1): the resend's tail is the limit's unit, so it stays
    one = vllm_spec(16, max_num_batched_tokens=8, speculative_config=EAGLE, prefix_match_unit=4)
    assert repeat_hits(one, 15).first == 12


@pytest.mark.parametrize(("U", "u"), [(16, 16), (16, 4), (48, 48), (48, 12)])
def test_the_closed_forms_in_the_docs(U: int, u: int) -> None:
    """docs/hit_reasons.md's laws for a resend, against the rules above (one chunk budget
    wider than the prompt, default retention): a = the hit grid."""
    a = u
    cases = {
        None: lambda n: (n - 1) // a * a,
        "eagle": lambda n: (n - 1) // a * a,
        "drop": lambda n: max(n // a - 1, 0) * a,
        "mtp3": lambda n: (n - 3) // a * a,
    }
    flags = {None: None, "eagle": EAGLE, "drop": DROP, "mtp3": MTP3}
    checked = 0
    for name, law in cases.items():
        s = vllm_spec(
            U, max_num_batched_tokens=8 * U, speculative_config=flags[name], prefix_match_unit=u
        )
        for n in range(1, 6 * U):
            r = repeat_hits(s, n, warn=False)
            if r.stalled or (name == "mtp3" and u < U):
                continue  # multi-module MTP with sub-block units: see the docs
            assert r.first == r.second == max(law(n), 0), (name, n)
            checked += 1
    assert checked >= 3 * (6 * U - 1)
