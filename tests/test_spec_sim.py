"""The simulator with vLLM's speculative decoding (``VLLMPolicy(speculative_config=...)``): a
prompt sent three times restores what ``vllm_spec_rules.repeat_hits`` says vLLM 0.33 does (those
rules agree with vLLM's own ``Scheduler`` + ``KVCacheManager`` on a grid in
tests/real/test_spec_hits_vs_vllm.py). The fast pass refuses drafts and ``method="auto"``
falls back to the radix tree."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from kda_core.cache import policy as P
from kda_core.sim import simulate
from kda_core.workloads import load_trace
from tests.vllm_spec_rules import SpecStallWarning, repeat_hits, vllm_spec

EAGLE = {"method": "eagle", "num_speculative_tokens": 2}
FLAGS = {
    "none": None,
    "eagle": EAGLE,
    "drop": {**EAGLE, "disable_lookahead_block_hashes": True},
    "mtp1": {"method": "mtp", "num_speculative_tokens": 3},
    "mtp3": {"method": "mtp", "num_speculative_tokens": 3, "n_predict": 3},
    "mtp3-drop": {
        "method": "mtp",
        "num_speculative_tokens": 3,
        "n_predict": 3,
        "disable_lookahead_block_hashes": True,
    },
}


def repeats(tmp_path: Path, n: int, times: int = 3):
    """A token-ids trace of one ``n``-token prompt sent ``times`` times, blocks of 1 token."""
    path = tmp_path / f"repeat{n}.jsonl"
    rows = [{"token_ids": list(range(n)), "timestamp": 1000 * i} for i in range(times)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_trace(path, "token-ids", block_size=1)


@pytest.mark.parametrize("name", sorted(FLAGS))
@pytest.mark.parametrize(("U", "chunk", "retention"), [(16, 64, 0), (16, 32, None), (8, 16, 16)])
def test_repeats_restore_what_vllm_restores(
    tmp_path: Path, name: str, U: int, chunk: int, retention: int | None
) -> None:
    flags = FLAGS[name]
    rules = vllm_spec(
        U,
        max_num_batched_tokens=chunk,
        speculative_config=flags,
        prefix_cache_retention_interval=retention,
    )
    pol = P.make(
        "vllm",
        block_size=U,
        max_num_batched_tokens=chunk,
        retention=retention,
        speculative_config=flags,
    )
    for n in (U - 1, U, U + 1, 2 * U - 1, 2 * U, 2 * U + 1, 3 * U + 2, 5 * U):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SpecStallWarning)
            want = repeat_hits(rules, n, warn=False)
            if want.stalled:
                continue  # the simulator warns and plans what it reached (test below)
            r = simulate(repeats(tmp_path, n), pol, outputs=False, cap_lookup=True)
        got = r.series.restore_at.tolist()
        assert got == [0, want.first, want.second], (name, U, chunk, retention, n)


def test_the_drop_by_hand(tmp_path: Path) -> None:
    # vllm#54360's law with block 16: a 33-token prompt resent restores floor(33/16)*16 - 16
    # = 16 with the drop (kv_cache_interface.get_mamba_prefill_checkpoint_position), 32 =
    # floor(32/16)*16 with lookahead hashes or no drafts
    trace = repeats(tmp_path, 33, 2)
    hits = {}
    for name in ("none", "eagle", "drop"):
        flags = FLAGS[name]
        pol = P.make("vllm", block_size=16, max_num_batched_tokens=64, speculative_config=flags)
        hits[name] = simulate(trace, pol, outputs=False, cap_lookup=True).series.restore_at[1]
    assert hits == {"none": 32, "eagle": 32, "drop": 16}


def test_the_fast_pass_refuses_drafts_and_auto_falls_back(tmp_path: Path) -> None:
    trace = repeats(tmp_path, 33, 2)
    pol = P.make("vllm", block_size=16, speculative_config=FLAGS["drop"])
    with pytest.raises(ValueError, match="speculative decoding"):
        simulate(trace, pol, outputs=False, cap_lookup=True, method="fast")
    auto = simulate(trace, pol, outputs=False, cap_lookup=True)
    twin = simulate(trace, pol, outputs=False, cap_lookup=True, method="twin")
    assert auto.series.restore_at.tolist() == twin.series.restore_at.tolist() == [0, 16]


def test_a_stalled_prefill_warns_in_the_simulator(tmp_path: Path) -> None:
    # multi-module MTP, 3 drafts, block 16, budget 16, a 17-token prompt: the first chunk is
    # cut to 14 (Scheduler._reserve_prefill_lookahead), the next stops at the block boundary
    # 16 and is cut to 0: vLLM schedules nothing, ever (the repeat rules agree: stalled)
    flags = FLAGS["mtp3"]
    assert repeat_hits(
        vllm_spec(16, max_num_batched_tokens=16, speculative_config=flags), 17, warn=False
    ).stalled
    pol = P.make("vllm", block_size=16, max_num_batched_tokens=16, speculative_config=flags)
    with pytest.warns(SpecStallWarning, match="stalls"):
        simulate(repeats(tmp_path, 17, 1), pol, outputs=False, cap_lookup=True)
