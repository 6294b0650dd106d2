"""The worked examples of KDA prefix caching (restore point vs token match, checkpoint
density, fine-grained partial hits), pinned through the public APIs.

Each example runs the lab's own path: a placement policy (``kda_core.policy.make``) says where
checkpoints go, the radix cache protocol (``insert_prefix`` / ``match_prefix``) or the trace
simulator (``kda_core.sim.simulate``) finds the restore point, and vLLM's block model
(``kda_core.cache.vllm_blocks``) answers the fine-grained partial hit. Positions are token
counts: "the state at n" is the state after tokens ``[0, n)``.
"""

from __future__ import annotations

import json

import pytest

from kda_core.cache.radix import RadixStateCache
from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.policy import make
from kda_core.sim import simulate
from kda_core.workloads import parse_mooncake_lines


def _restore(positions: tuple[int, ...], first: list[int], second: list[int], page: int = 1):
    """Insert ``first`` with states at ``positions`` (block keys when page > 1), then match
    ``second``: (token match, restore point, replayed tokens)."""
    cache = RadixStateCache(page, block_keys=page > 1)
    cache.insert_prefix(first, states=[(p, f"S_{p}", 1) for p in positions])
    m = cache.match_prefix(second)
    assert m.state == f"S_{m.restore_at}", "the restore point carries its own state"
    return m.token_match, m.restore_at, m.token_match - m.restore_at


def _trace(block: int, *requests: tuple[int, list[int]]):
    lines = [
        json.dumps({"timestamp": i, "input_length": n, "output_length": 1, "hash_ids": ids})
        for i, (n, ids) in enumerate(requests)
    ]
    return parse_mooncake_lines(lines, name="seed", block_size=block)


def test_states_at_0_4096_8192_and_a_6000_token_match():
    # states only at 0 (the empty prefix), 4096 and 8192; a match of 6000 tokens restores
    # S_4096 and replays 4096..6000
    first = list(range(10_000))
    second = first[:6000] + [-1] * 50
    positions = make("interval", every=4096).checkpoint_positions(10_000)
    assert positions == (4096, 8192)
    assert _restore(positions, first, second) == (6000, 4096, 1904)
    # the same two requests through the simulator (8-token blocks: 6000 = 750 blocks)
    a = list(range(1, 1251))
    trace = _trace(8, (10_000, a), (7000, a[:750] + list(range(5000, 5125))))
    r = simulate(trace, policy=("interval", {"every": 4096}))
    assert r.series.token_match.tolist() == [0, 6000]
    assert r.series.restore_at.tolist() == [0, 4096]
    assert r.series.replayed.tolist() == [0, 1904] and r.replayed_tokens == 1904


def test_15k_shared_with_a_checkpoint_every_10k():
    first = list(range(25_000))
    second = first[:15_000] + [-1] * 100
    positions = make("interval", every=10_000).checkpoint_positions(25_000)
    assert positions == (10_000, 20_000)
    # 15k tokens match, the nearest state is S_10k: 5k tokens are recomputed
    assert _restore(positions, first, second) == (15_000, 10_000, 5000)


@pytest.mark.parametrize(
    "every,restore,replay", [(100_000, 900_000, 5000), (400_000, 800_000, 105_000)]
)
def test_905k_shared_with_states_at_900k_or_only_at_800k(every, restore, replay):
    # a 1M-token request keeps states every `every` tokens and at its end (so its KV reaches
    # past 905k); a second request shares 905k tokens (5000-token blocks: 181 of them)
    a = list(range(1, 201))
    trace = _trace(5000, (1_000_000, a), (910_000, a[:181] + [9999]))
    r = simulate(trace, policy=("interval", {"every": every, "request_end": True}))
    assert r.series.token_match.tolist() == [0, 905_000]
    assert r.series.restore_at.tolist() == [0, restore]
    assert r.series.replayed.tolist() == [0, replay]
    # the radix protocol on block keys gives the same answer
    positions = make("interval", every=every, request_end=True).checkpoint_positions(
        1_000_000, page_size=5000
    )
    assert _restore(positions, a, a[:181] + [9999], page=5000) == (905_000, restore, replay)


def test_4480_inside_4096_partial_hit():
    first = list(range(4481))
    follow = first[:4480] + list(range(10_000, 10_300))
    # vLLM's block table: 4096-token blocks, keys every 64 tokens; the first request's prompt
    # of 4481 tokens leaves a state at 4480 inside the block covering (4096, 8192]
    fine = VLLMBlockCache(4096, 64, num_blocks=8, max_num_batched_tokens=2048)
    fine.serve(first, [1])
    hit = fine.lookup(follow)
    assert (hit.tokens, hit.table_index, hit.partial) == (4480, 1, True)
    coarse = VLLMBlockCache(4096, num_blocks=8, max_num_batched_tokens=2048)
    coarse.serve(first, [1])
    assert coarse.lookup(follow).tokens == 4096  # block-aligned only: back to the block start
    # the lab's vllm policy places the same two states and the radix tree restores 4480
    pol = make("vllm", block_size=4096, partial_hits=True, match_unit=64)
    positions = pol.checkpoint_positions(4481)
    assert positions == (4096, 4480)
    assert _restore(positions, first, follow) == (4480, 4480, 0)
    plain = make("vllm", block_size=4096).checkpoint_positions(4481)
    assert plain == (4096,)
    assert _restore(plain, first, follow) == (4096, 4096, 0)
