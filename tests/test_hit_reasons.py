"""``studies.hit_reasons``: SGLang's and vLLM's cached tokens per request and the reason a
request got no hit, on hand-built token traces whose answers are derived in the comments.

The real reported cases (vLLM issues, numbers from the threads):

* vllm-project/vllm#40696: Qwen3.5-4B, vLLM raises the block to 528 tokens; requests sharing a
  ~480-token prefix get 0 % hits, a 552-token prompt has 528 cached (24 recomputed), a
  979-token one 528 (451 recomputed);
* vllm-project/vllm#45238: block 528, ~2200-token prompts; align mode checkpoints at chunk ends
  (1584 with a 2048-token chunk) and the last block boundary (2112); a 1600-token shared prefix
  holds 1584 and hits, a 1500-token one holds neither and gets 0/64 hits on the vLLM build
  reported there, which had no shared-prefix junction (``shared_prefix=False`` here).

tests/real/test_hit_reasons_vs_vllm.py runs the same prompts through vLLM 0.33's own
``KVCacheManager`` and scheduler split and checks the vLLM column request by request.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from trace_checks import validate

from kda_core.sim import checkpoint_bytes
from kda_core.studies.hit_reasons import REASONS, hit_reasons
from kda_core.workloads import bundled_trace, ideal_prefix_tokens, load_trace


def token_trace(tmp_path: Path, prompts: list[list[int]], block: int):
    """A token-ids trace of these prompts (one second apart), hashed in ``block``-token blocks."""
    path = tmp_path / "prompts.jsonl"
    rows = [{"token_ids": p, "timestamp": 1000 * i} for i, p in enumerate(prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_trace(path, "token-ids", block_size=block)


def tokens(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def reasons(e) -> list[str]:
    return [REASONS[k] for k in e.reason]


def test_prompts_shorter_than_the_raised_block(tmp_path: Path) -> None:
    # vllm#40696 with block 528: a 480-token shared prefix is below one block (0 cached); a
    # 552-token prompt sent twice has 528 cached (floor(551 / 528) * 528) and a 979-token one
    # 528 (floor(978 / 528) * 528: 451 recomputed, not short since 2 * 528 > 979)
    shared = tokens(0, 480)
    prompts = [shared + tokens(10_000, 40), shared + tokens(20_000, 40)]
    prompts += [tokens(30_000, 552)] * 2 + [tokens(40_000, 979)] * 2
    trace = token_trace(tmp_path, prompts, 8)
    r = hit_reasons(trace, vllm={"block_size": 528})
    assert r.vllm.unit == 528
    assert r.token_match.tolist() == [0, 480, 0, 552, 0, 979]
    assert r.vllm.cached.tolist() == [0, 0, 0, 528, 0, 528]
    assert reasons(r.vllm) == [
        "first_occurrence",
        "below_one_block",
        "first_occurrence",
        "hit",
        "first_occurrence",
        "hit",
    ]
    # SGLang (page 8, grid 64, chunk 8192): request 0 tracks only 512 = floor(520/64)*64,
    # past the shared 480: request 1 restores nothing, its state sits in request 0's unique
    # tokens (request 1 then tracks the branch point 448 for later ones). The repeats track
    # 512 (of 552) and 960 (of 979): cached 512 and 960.
    assert r.sglang.cached.tolist() == [0, 0, 0, 512, 0, 960]
    assert reasons(r.sglang)[:2] == ["first_occurrence", "state_in_unique_tokens"]
    assert not r.known_branch[1]


def _chunk_end_case(tmp_path: Path, shared_len: int, n: int = 6):
    shared = tokens(0, shared_len)
    prompts = [shared + tokens(100_000 * (i + 1), 2200 - shared_len) for i in range(n)]
    return token_trace(tmp_path, prompts, 4)


@pytest.mark.parametrize("junction", [False, True])
def test_checkpoint_in_request_unique_tokens(tmp_path: Path, junction: bool) -> None:
    # vllm#45238, block 528, chunk 2048: a 2200-token prompt checkpoints at 1584 (the first
    # chunk, 2048 floored to the block) and 2112 (the last cacheable boundary)
    vllm = {"block_size": 528, "max_num_batched_tokens": 2048, "shared_prefix": junction}
    r = hit_reasons(_chunk_end_case(tmp_path, 1600), vllm=vllm)
    assert r.vllm.cached.tolist() == [0] + [1584] * 5  # 1584 lies inside the shared 1600
    r = hit_reasons(_chunk_end_case(tmp_path, 1500), vllm=vllm)
    got = r.vllm.cached.tolist()
    assert reasons(r.vllm)[:2] == ["first_occurrence", "state_in_unique_tokens"]
    if junction:
        # vLLM 0.33: request 1 finds KV to 1500 and no state, so it stops a chunk at the
        # junction floor(1500 / 528) * 528 = 1056 and later requests restore there
        assert got == [0, 0] + [1056] * 4
        assert reasons(r.vllm)[2:] == ["hit"] * 4
    else:
        # the build of the report: nothing ever checkpoints inside the shared 1500 (0/64);
        # from request 2 on the branch at 1500 is known and still holds no state
        assert got == [0] * 6
        assert reasons(r.vllm)[2:] == ["no_state_at_branch"] * 4
        assert r.known_branch.tolist() == [False, False] + [True] * 4


def test_evicted_for_the_state_budget(tmp_path: Path) -> None:
    # SGLang page 8: request 0 (1536 tokens) tracks 1536; request 1 (unrelated) evicts it
    # under a one-checkpoint budget; request 2 extends request 0 and restores 1536 without
    # the budget, nothing with it
    a = tokens(0, 1536)
    prompts = [a, tokens(50_000, 1536), a + tokens(90_000, 512)]
    trace = token_trace(tmp_path, prompts, 8)
    ck = checkpoint_bytes("kimi-k3", 8)
    r = hit_reasons(trace, state_budget_bytes=ck)
    assert r.sglang.cached_unlimited.tolist() == [0, 0, 1536]
    assert r.sglang.cached.tolist() == [0, 0, 0]
    assert reasons(r.sglang) == ["first_occurrence", "first_occurrence", "evicted_state_budget"]
    # with a KV budget too, each budget alone is tried: the state budget alone is short
    r2 = hit_reasons(trace, state_budget_bytes=ck, kv_budget_bytes=1 << 40)
    assert reasons(r2.sglang)[2] == "evicted_state_budget"


def test_identical_prompt_is_capped_at_input_minus_one(tmp_path: Path) -> None:
    # both engines look up at most input - 1 tokens: a repeat of a 1024-token prompt cannot
    # restore the state at 1024; SGLang (grid 64) falls back to its previous state, none here
    # (the first request tracked 1024 only), vLLM (block 512) to 512
    p = tokens(0, 1024)
    r = hit_reasons(token_trace(tmp_path, [p, p], 8), vllm={"block_size": 512})
    assert r.token_match.tolist() == [0, 1024]
    assert r.vllm.cached.tolist() == [0, 512]
    assert r.sglang.cached.tolist() == [0, 0]
    # the first request ended at 1024: a node boundary the engine saw, with no state it can use
    assert r.known_branch.tolist() == [False, True]
    assert reasons(r.sglang)[1] == "no_state_at_branch"


def test_shares_and_the_bundled_trace() -> None:
    trace = bundled_trace("conversation").head(1500)
    r = hit_reasons(trace)
    assert np.array_equal(r.token_match, ideal_prefix_tokens(trace))
    assert r.vllm.unit == 768  # Kimi K3 at TP8: vLLM raises the block to 768 tokens
    req, tok = r.share_arrays()
    for row, name in enumerate(("sglang", "vllm")):
        e = getattr(r, name)
        uncached = trace.input_len - e.cached
        for k in range(len(REASONS)):  # naive counts
            mine = [i for i in range(len(trace)) if e.reason[i] == k]
            assert req[row, k] == pytest.approx(len(mine) / len(trace))
            assert tok[row, k] == pytest.approx(sum(uncached[mine]) / uncached.sum())
        assert np.all(e.cached <= np.maximum(r.token_match, 0))
        assert np.all(e.cached <= e.cached_unlimited)  # no budget: the same run
        short = 2 * e.cached <= r.token_match
        assert np.array_equal(e.reason > 0, short)
    # the trace's 512-token common prefix is below vLLM's 768-token block
    below = r.vllm.reason == REASONS.index("below_one_block")
    assert below.any() and np.all(r.token_match[below] < 768)


def test_refined_blocks_keep_the_match() -> None:
    trace = bundled_trace("conversation").head(400)
    fine = trace.refined(256)
    validate(fine)
    assert fine.block_size == 256
    assert np.array_equal(ideal_prefix_tokens(fine), ideal_prefix_tokens(trace))


def test_refused_inputs(tmp_path: Path) -> None:
    path = tmp_path / "lengths.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,5\n")
    trace = load_trace(path, "azure")
    with pytest.raises(ValueError, match="cannot be computed"):
        hit_reasons(trace)
    with pytest.raises(ValueError, match="trace must be"):
        hit_reasons("x")  # type: ignore[arg-type]
    small = bundled_trace("conversation").head(5)
    with pytest.raises(ValueError, match="model must be"):
        hit_reasons(small, model="nope")
    with pytest.raises(ValueError, match="vllm: "):
        hit_reasons(small, vllm={"mode": "sideways"})
    with pytest.raises(ValueError, match="sglang: "):
        hit_reasons(small, sglang={"track_interval": 0})


def test_a_lengths_only_trace_flags_every_hit_rate(tmp_path: Path) -> None:
    # BurstGPT-style lengths: simulate still gives memory (each request's own KV and states)
    # but flags its hit rates (NaN, prefix_info False, a plain note); the studies refuse
    from kda_core.sim import simulate
    from kda_core.sim.tiers import simulate_tiers
    from kda_core.studies.density import density_sweep, hit_timeline, policy_sweep

    path = tmp_path / "burst.csv"
    head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    rows = [f"{i},ChatGPT,{600 + i},5,{605 + i},Conversation log\n" for i in range(4)]
    path.write_text(head + "".join(rows))
    trace = load_trace(path, "burstgpt")
    assert not trace.has_prefix_info
    r = simulate(trace)
    assert not r.prefix_info
    rates = ("token_hit_rate", "state_hit_rate", "request_token_hit_rate")
    for field in (*rates, "request_state_hit_rate", "mean_replay_per_hit"):
        assert np.isnan(getattr(r, field)), field
    # memory still holds: the last request's 603 tokens of KV (27,648 B a token, Kimi K3 TP8)
    # are all held after its insert, and its states were stored
    assert r.peak_kv_bytes >= 603 * r.kv_bytes_per_token
    assert r.checkpoints_stored > 0
    assert simulate(bundled_trace("conversation").head(3)).prefix_info
    for fn in (density_sweep, policy_sweep, hit_timeline, simulate_tiers):
        with pytest.raises(ValueError, match="cannot be computed"):
            fn(trace)


def test_a_host_tier_that_keeps_last_states_only(tmp_path: Path) -> None:
    # SGLang, 512-token chunks, a device budget of 3 states: A (1536 tokens) tracks 512, 1024,
    # 1536 and writes 1536 to the host; unrelated B and E evict A's device states. D extends A:
    # 1536 from the host, or 0 when a one-state host holds only E's. C shares A's first 1024:
    # 1024 without budgets; with an unlimited host 0 (host: A's 1536 and D's 2048, device: D's
    # 1536 loaded back and 2048), with the one-state host 1024 (D, restoring nothing, kept 512,
    # 1024, 1536 on the device)
    a = tokens(0, 1536)
    prompts = [a, tokens(50_000, 1536), tokens(60_000, 1536), a + tokens(90_000, 512)]
    prompts.append(a[:1024] + tokens(80_000, 512))
    trace = token_trace(tmp_path, prompts, 8)
    ck = checkpoint_bytes("kimi-k3", 8)
    kw = {"sglang": {"chunked_prefill_size": 512}, "state_budget_bytes": 3 * ck}
    big = hit_reasons(trace, host_bytes=1 << 40, **kw)
    assert big.sglang.cached_unlimited.tolist() == [0, 0, 0, 1536, 1024]
    assert big.sglang.cached.tolist() == [0, 0, 0, 1536, 0]
    assert reasons(big.sglang)[3:] == ["hit", "host_last_state_only"]
    one = hit_reasons(trace, host_bytes=ck, **kw)
    assert one.sglang.cached.tolist() == [0, 0, 0, 0, 1024]
    assert reasons(one.sglang)[3:] == ["evicted_host_budget", "hit"]
    # without a host the device budget is the reason
    dev = hit_reasons(trace, **kw)
    assert reasons(dev.sglang)[3] == "evicted_state_budget"
    with pytest.raises(ValueError, match="host_bytes needs state_budget_bytes"):
        hit_reasons(trace, host_bytes=ck)
    with pytest.raises(ValueError, match="host_bytes must be"):
        hit_reasons(trace, host_bytes=-1, state_budget_bytes=ck)


def test_the_command_on_a_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from kda_core.studies import hit_reasons as mod

    shared = tokens(0, 480)
    prompts = [shared + tokens(10_000, 40), shared + tokens(20_000, 40)]
    assert len(token_trace(tmp_path, prompts, 8)) == 2  # writes prompts.jsonl
    mod._main(["--file", str(tmp_path / "prompts.jsonl"), "--block-size", "8", "--requests", "1"])
    out = capsys.readouterr().out
    assert "vLLM block 768 tokens" in out and "| `below_one_block` |" in out
    assert out.strip().endswith(
        "request 1: input 520, shared 480; sglang 0 (state_in_unique_tokens), "
        "vllm 0 (below_one_block)"
    )
    with pytest.raises(SystemExit):
        mod._main(["--file", str(tmp_path / "prompts.jsonl"), "--requests", "2"])


def test_a_hit_lost_to_speculative_decoding(tmp_path: Path) -> None:
    # vLLM 0.33, block 16, EAGLE with the trailing-block drop (lookahead hashes disabled). A
    # resent 40-token prompt: the prefill keys its state at the checkpoint boundary
    # floor(40/16)*16 - 16 = 16 (v1/kv_cache_interface.py:
    # get_mamba_prefill_checkpoint_position), the attention group matches 32 and drops one
    # block (v1/core/kv_cache_coordinator.py: HybridKVCacheCoordinator.find_longest_cache_hit,
    # eagle_proof_margin): 16 cached, 32 = floor(39/16)*16 without drafts. A resent 48-token
    # prompt loses nothing: 48 - 16 = 32 = floor(47/16)*16.
    a, b = tokens(0, 40), tokens(1000, 48)
    trace = token_trace(tmp_path, [a, a, b, b], 8)
    drop = {"method": "eagle", "num_speculative_tokens": 2, "disable_lookahead_block_hashes": True}
    r = hit_reasons(trace, vllm={"block_size": 16, "speculative_config": drop})
    assert r.vllm.cached.tolist() == [0, 16, 0, 32]
    assert r.vllm.cached_no_drafts.tolist() == [0, 32, 0, 32]
    want = ["first_occurrence", "lost_to_speculative_decoding", "first_occurrence", "hit"]
    assert reasons(r.vllm) == want
    # lookahead block hashes (the default): the hash of the block ending at 32 covers token 33,
    # so the 40-token resend still restores floor((40 - 1) / 16) * 16 = 32
    eagle = {"method": "eagle", "num_speculative_tokens": 2}
    r = hit_reasons(trace, vllm={"block_size": 16, "speculative_config": eagle})
    assert r.vllm.cached.tolist() == [0, 32, 0, 32]
    assert "lost_to_speculative_decoding" not in reasons(r.vllm)
    assert r.sglang.cached_no_drafts is None  # SGLang without draft flags


def test_sglang_drafts_need_the_track_interval(tmp_path: Path) -> None:
    # arg_groups/mamba_hook.validate_mamba_extra_buffer: the interval holds a verify window
    trace = token_trace(tmp_path, [tokens(0, 40)] * 2, 8)
    with pytest.raises(ValueError, match="track_interval must be >= speculative_num_draft"):
        hit_reasons(trace, sglang={"track_interval": 2, "speculative_num_draft_tokens": 4})
    r = hit_reasons(trace, sglang={"speculative_num_draft_tokens": 4})
    assert r.sglang.cached_no_drafts.tolist() == r.sglang.cached.tolist() == [0, 0]
