"""SGLang 0.5.23's prefix-cache rules with speculative decoding (``tests/sglang_spec_rules.py``):
values worked by hand from the SGLang functions each rule names; the same rules against
SGLang's own code in tests/real/test_spec_vs_sglang.py."""

from __future__ import annotations

import pytest

from tests import sglang_spec_rules as S


def test_eagle_keys_bigrams_only_without_a_state_component() -> None:
    assert S.tree_bigram_keys(True, True) is False  # hybrid tree: is_eagle dropped
    assert S.tree_bigram_keys(True, False) is True
    assert S.tree_bigram_keys(False, False) is False
    assert S.bigram_match(10, True) == 9
    assert S.bigram_match(10, False) == 10
    assert S.bigram_match(0, True) == 0


def test_track_interval_rule() -> None:
    S.check_track_interval(256, 4)
    S.check_track_interval(8, None, 4)
    with pytest.raises(ValueError, match="mamba_track_interval must be >= "):
        S.check_track_interval(3, 4)
    with pytest.raises(ValueError, match="multiple of page_size=4"):
        S.check_track_interval(6, None, 4)
    with pytest.raises(ValueError, match="speculative_num_draft_tokens"):
        S.check_track_interval(8, 0)


def test_accepted_runs_take_every_boundary_when_shorter_than_the_grid() -> None:
    # committed 100 -> 104 -> 108 -> 112: the runs cross 104 and 112
    assert S.spec_track_points(100, [3, 3, 3], 8) == (104, 112)
    assert S.track_points_one_token(100, 12, 8) == (104, 112)


def test_a_run_longer_than_the_grid_loses_a_boundary() -> None:
    # 100 -> 110 crosses 104 and 108; only the last is tracked
    assert S.spec_track_points(100, [9], 4) == (108,)
    assert S.track_points_one_token(100, 10, 4) == (104, 108)


def test_finish_time_fallback() -> None:
    assert S.finished_checkpoint(128, 64, 100) == 64  # past the key: the other slot
    assert S.finished_checkpoint(128, 64, 100, ping_pong=1) is None
    assert S.finished_checkpoint(128, 110, 100) is None
    assert S.finished_checkpoint(64, None, 100) == 64
    assert S.finished_checkpoint(None, None, 5) == 0


def test_replayssm_finish_len() -> None:
    # KDA: 36 decode steps after a 64-token prompt, the ring of 16 wraps twice: 4 unflushed
    assert S.replayssm_finish_len(100, 64, 16) == 96
    # GDN also flushes at the step whose length is a multiple of 8 (64); 2 steps after it
    assert S.replayssm_finish_len(66, 60, 16, is_kda=False, interval=8) == 64
    with pytest.raises(ValueError, match="prompt_len"):
        S.replayssm_finish_len(10, 12, 4)


def test_lengths_checked() -> None:
    with pytest.raises(ValueError, match="accepted\\[1\\]"):
        S.spec_track_points(10, [1, -1], 4)
    with pytest.raises(ValueError, match="grid"):
        S.spec_track_points(10, [1], 0)
