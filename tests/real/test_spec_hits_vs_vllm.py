"""The lab's vLLM rules with speculative decoding (``tests/vllm_spec_rules.py``) against vLLM
0.33's own ``Scheduler`` + ``KVCacheManager`` (``vllm_spec_driver``): on every point of a grid
of block sizes, prompt lengths around block multiples, methods, draft counts, MTP module
counts, hash modes, chunk budgets, retention intervals and prefix-match units, a prompt sent
three times gets the same cold chunk ends, the same cached tokens on its first and second
repeat, and the same stall (the scheduler scheduling 0 tokens forever) as in vLLM.

Also: the flags derive what vLLM derives, vLLM's refusals are the lab's, and the accepted
drafts do not change a repeat's hit. Runs in the real-engine venv (tests/real/).
"""

from __future__ import annotations

import itertools
import warnings

import pytest

pytest.importorskip("vllm.v1.core.sched.scheduler")
pytest.importorskip("torch")

from vllm_spec_driver import RealSpecScheduler, repeat, vllm_config  # noqa: E402

from tests.vllm_spec_rules import (  # noqa: E402
    SpecStallWarning,
    repeat_hits,
    vllm_spec,
)

SPECS = [
    None,
    {"method": "eagle", "num_speculative_tokens": 2},
    {"method": "eagle3", "num_speculative_tokens": 3},
    {"method": "mtp", "num_speculative_tokens": 1},
    {"method": "mtp", "num_speculative_tokens": 2, "n_predict": 1},
    {"method": "mtp", "num_speculative_tokens": 2, "n_predict": 2},
    {"method": "mtp", "num_speculative_tokens": 4, "n_predict": 4},
]
DROP = [{**s, "disable_lookahead_block_hashes": True} for s in SPECS[1:]]
NO_DROP = [{**SPECS[1], "disable_eagle_block_drop": True}]
# DFlash / DSpark never drop (SpeculativeConfig.needs_eagle_block_drop), with or without
# lookahead hashes; DFlash reserves one lookahead slot more (VllmConfig.num_lookahead_tokens)
FILL_IN = [
    {"method": "dflash", "num_speculative_tokens": 3},
    {"method": "dspark", "num_speculative_tokens": 2},
    {"method": "dflash", "num_speculative_tokens": 4, "disable_lookahead_block_hashes": True},
]


def _lengths(U: int) -> list[int]:
    return [U - 1, U, U + 1, U + 2, U + 3, 2 * U - 1, 2 * U, 2 * U + 1, 2 * U + 3, 3 * U + 5]


def _lab(U: int, n: int, chunk: int, flags, unit, retention) -> tuple:
    s = vllm_spec(
        U,
        max_num_batched_tokens=chunk,
        speculative_config=flags,
        prefix_match_unit=unit,
        prefix_cache_retention_interval=retention,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecStallWarning)
        r = repeat_hits(s, n)
    return r.cold_chunks, r.first, r.second, r.stalled


def _grid_agrees(points) -> int:
    bad, n_points = [], 0
    for U, n, chunk, flags, unit, retention in points:
        kw = {"chunk": chunk, "flags": flags, "prefix_match_unit": unit, "retention": retention}
        want = repeat(U, n, **kw)
        got = _lab(U, n, chunk, flags, unit, retention)
        n_points += 1
        if got != want:
            bad.append(((U, n, chunk, flags, unit, retention), got, want))
    assert not bad, f"{len(bad)} of {n_points} points differ, e.g. {bad[:3]}"
    return n_points


@pytest.mark.parametrize("flags", SPECS + DROP + NO_DROP + FILL_IN, ids=repr)
def test_block_16_grid(flags) -> None:
    points = itertools.product(
        [16], _lengths(16), [8, 16, 40], [flags], [None, 8, 4], [None, 0, 32]
    )
    assert _grid_agrees(points) == 10 * 3 * 3 * 3


@pytest.mark.parametrize("flags", SPECS[1:] + DROP[:2] + FILL_IN[:1], ids=repr)
def test_block_48_grid(flags) -> None:
    # block wider than the chunk (40: a block advances within itself) and a wide chunk
    points = itertools.product([48], _lengths(48), [40, 200], [flags], [None, 12], [0, 96])
    assert _grid_agrees(points) == 10 * 2 * 2 * 2


def test_the_grid_holds_stalls_and_repeat_gains() -> None:
    """The grid is not trivial: multi-module MTP stalls on it, and the drop costs hits."""
    mtp = SPECS[5]
    assert repeat(16, 17, chunk=16, flags=mtp)[3]  # stalled
    assert not repeat(16, 17, chunk=16, flags=SPECS[4])[3]  # one module: no stall
    assert repeat(16, 33, chunk=40, flags=SPECS[1])[1:3] == (32, 32)
    assert repeat(16, 33, chunk=40, flags=DROP[0])[1:3] == (16, 16)
    assert repeat(16, 33, chunk=40, flags=FILL_IN[2])[1:3] == (32, 32)  # no drop, hashes off


@pytest.mark.parametrize("accept", ["all", "none"])
def test_accepted_drafts_do_not_change_a_repeat(accept: str) -> None:
    for flags in (SPECS[1], SPECS[5], DROP[0]):
        for n in _lengths(16):
            got = repeat(16, n, chunk=40, flags=flags, accept=accept)
            assert got == _lab(16, n, 40, flags, None, 0)


@pytest.mark.parametrize("kv_transfer", [False, True])
@pytest.mark.parametrize("flags", SPECS + DROP + NO_DROP + FILL_IN, ids=repr)
def test_flags_derive_what_vllm_derives(flags, kv_transfer: bool) -> None:
    cfg = vllm_config(16, 64, flags, kv_transfer=kv_transfer)
    lab = vllm_spec(
        16, max_num_batched_tokens=64, speculative_config=flags, kv_transfer_config=kv_transfer
    )
    assert lab.hash_lookahead == cfg.num_hash_lookahead_tokens
    assert lab.prefill_lookahead == cfg.num_prefill_lookahead_tokens
    assert lab.lookahead == cfg.num_lookahead_tokens
    if not kv_transfer:  # a connector would make the scheduler build one
        sched = RealSpecScheduler(16, chunk=64, flags=flags).sched
        assert lab.drop == sched.use_eagle_block_drop


def test_multi_module_mtp_refused_below_its_draft_count() -> None:
    flags = {"method": "mtp", "num_speculative_tokens": 20, "n_predict": 20}
    with pytest.raises(ValueError, match="scheduler_block_size"):
        RealSpecScheduler(16, chunk=64, flags=flags)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        vllm_spec(16, max_num_batched_tokens=64, speculative_config=flags)


def test_a_budget_below_the_drafts_refused() -> None:
    flags = {"method": "eagle", "num_speculative_tokens": 4}
    with pytest.raises(ValueError, match="enough slots"):
        vllm_config(16, 4, flags)
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        vllm_spec(16, max_num_batched_tokens=4, speculative_config=flags)


def test_partial_hits_only_for_align_mode_mamba() -> None:
    import torch
    from vllm.v1.core.kv_cache_utils import partial_hash_hits_enabled
    from vllm.v1.kv_cache_interface import KVCacheGroupSpec, MambaSpec, MLAAttentionSpec

    from tests.vllm_spec_rules import partial_hits_enabled

    for mode, U, u in itertools.product(("align", "all"), (16, 64), (4, 16, 64)):
        if U % u:
            continue
        groups = [
            KVCacheGroupSpec(
                ["mla"],
                MLAAttentionSpec(block_size=U, num_kv_heads=1, head_size=1, dtype=torch.float32),
            ),
            KVCacheGroupSpec(
                ["kda"],
                MambaSpec(
                    block_size=U, shapes=((1,),), dtypes=(torch.float32,), mamba_cache_mode=mode
                ),
            ),
        ]
        assert partial_hits_enabled(mode, U, u) == partial_hash_hits_enabled(groups, u)
