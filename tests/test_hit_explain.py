"""``studies.hit_requests.explain``: every request's token match split into parts that add up
(restored from a saved state = the engine column, taken by a budget, no state up to the grid
point, short of one grid unit, the last prompt token), with the facts each part cites: who
saved the state it restores from, and where the nearest deeper state lies.

Checked three ways: hand-built token traces whose numbers are derived in the comments; every
request of both bundled traces, with and without budgets (the parts are never negative, sum
to the token match and start with the engine column; the reason label agrees with the facts);
and the facts against a brute-force replay over all pairs of requests, built from the
simulator's own per-request series and the policy's placement.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kda_core.cache import policy as policy_mod
from kda_core.sim import checkpoint_bytes, simulate
from kda_core.studies.hit_reasons import REASONS, hit_reasons
from kda_core.studies.hit_requests import explain
from kda_core.workloads import bundled_trace, load_trace


def tokens(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def token_study(tmp_path: Path, prompts: list[list[int]], **kw: object):
    path = tmp_path / "prompts.jsonl"
    rows = [{"token_ids": p, "timestamp": 1000 * i} for i, p in enumerate(prompts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return hit_reasons(load_trace(path, "token-ids", block_size=8), **kw)


def test_partial_restores_explained_by_hand(tmp_path: Path) -> None:
    # SGLang, page 8, grid 64, one 8192-token chunk per prompt: a prompt's state sits at its
    # chunk's last grid point, or at the branch point floor(match / 64) * 64 when the prompt
    # leaves an earlier path (that point replaces the chunk end).
    # 0: A, 3000 tokens: state at 2944.            1: A[:1000] + own: state at 960 (branch).
    # 2: A[:2000] + own: match 2000, restores 960 (request 1's, on A's path); A's 2944 lies
    #    past the 2000 it shares. Short (2 x 960 <= 2000): the reason of request 17 in the
    #    report, and 960 + 1024 (no state up to 1984) + 16 (short of a 64 grid) = 2000.
    # 3: A[:2500] + own: match 2496 (312 whole 8-token blocks), restores 1984 (request 2's
    #    branch state): a hit, yet 512 tokens to 2496 have no state; A's 2944 is past them.
    # 4: S, 612 tokens: state at 576.   5: S[:512] + V (2500): state at 512 (branch) only.
    # 6: S[:512] + V[:2000] + own: match 2512, restores 512; nobody saved a state past 512 on
    #    this path (request 5, the first to share it, kept only its branch state): the
    #    reason is no state at the branch point, not "states in request-unique tokens".
    a, s, v = tokens(0, 3000), tokens(100_000, 512), tokens(200_000, 2500)
    prompts = [a, a[:1000] + tokens(10_000, 2000), a[:2000] + tokens(20_000, 500)]
    prompts += [a[:2500] + tokens(30_000, 400), s + tokens(300_000, 100), s + v]
    prompts.append(s + v[:2000] + tokens(400_000, 300))
    r = token_study(tmp_path, prompts, vllm={"block_size": 512})
    assert r.token_match.tolist() == [0, 1000, 2000, 2496, 0, 512, 2512]
    assert r.sglang.cached.tolist() == [0, 0, 960, 1984, 0, 0, 512]
    want = {  # request: (reason, source, deeper, deeper_source, where, parts)
        2: ("state_in_unique_tokens", 1, 2944, 0, "past_match", (960, 0, 1024, 16, 0)),
        3: ("hit", 2, 2944, 0, "past_match", (1984, 0, 512, 0, 0)),
        6: ("no_state_at_branch", 5, 0, -1, "none", (512, 0, 1984, 16, 0)),
    }
    for i, (reason, src, deeper, dsrc, where, parts) in want.items():
        e = explain(r, i).sglang
        assert (e.reason, e.source, e.deeper, e.deeper_source, e.deeper_at) == (
            reason,
            src,
            deeper,
            dsrc,
            where,
        )
        assert tuple(e.parts.values()) == parts
    assert explain(r, 6).sharer == 5


def test_the_last_token_and_a_budget_by_hand(tmp_path: Path) -> None:
    # an identical 1024-token prompt: the only state (1024) ends the prompt and the lookup
    # covers 1023 tokens: no state to 960 (grid 64), 63 short of a grid unit, 1 last token
    p = tokens(0, 1024)
    e = explain(token_study(tmp_path, [p, p], vllm={"block_size": 512}), 1)
    assert (e.sglang.deeper, e.sglang.deeper_at, e.sglang.deeper_source) == (1024, "last_token", 0)
    assert tuple(e.sglang.parts.values()) == (0, 0, 960, 63, 1)
    # vLLM (block 512) restores 512 of it; the next 511 are short of one 512-token block
    assert tuple(e.vllm.parts.values()) == (512, 0, 0, 511, 1)
    # a one-state budget: request 1 (unrelated) evicts request 0's 1536; request 2 would
    # restore 1536 from request 0's state: all 1536 taken by the state budget
    a = tokens(0, 1536)
    r = token_study(
        tmp_path,
        [a, tokens(50_000, 1536), a + tokens(90_000, 512)],
        state_budget_bytes=checkpoint_bytes("kimi-k3", 8),
    )
    e = explain(r, 2).sglang
    assert (e.cached, e.cached_unlimited, e.source, e.evicted_by) == (
        0,
        1536,
        0,
        "evicted_state_budget",
    )
    assert tuple(e.parts.values()) == (0, 1536, 0, 0, 0)


CASES = [
    ("conversation", {}),
    ("conversation", {"state_budget_bytes": 1 << 30}),
    ("synthetic", {}),
    ("synthetic", {"state_budget_bytes": 1 << 30}),
    ("synthetic", {"state_budget_bytes": 2 << 30, "kv_budget_bytes": 20 << 30}),
    ("synthetic", {"state_budget_bytes": 1 << 30, "host_bytes": 4 << 30}),
]


@pytest.mark.parametrize(("name", "budgets"), CASES)
def test_every_bundled_request_adds_up(name: str, budgets: dict) -> None:
    r = hit_reasons(bundled_trace(name), **budgets)
    unique, taken = REASONS.index("state_in_unique_tokens"), REASONS[5:]
    gaps = 0
    for i in range(len(r.input_len)):
        x = explain(r, i)
        for e, col in ((x.sglang, r.sglang), (x.vllm, r.vllm)):
            parts = e.parts
            assert min(parts.values()) >= 0, (i, e)
            assert sum(parts.values()) == r.token_match[i], (i, e)
            assert parts["restored"] == col.cached[i]  # the engine column
            assert (parts["evicted"] > 0) == (e.evicted_by in taken), (i, e)
            if col.reason[i] == unique:  # the label says what the facts say
                assert e.deeper_at == "past_match" and e.deeper > e.token_match, (i, e)
            if parts["no_state"]:
                gaps += 1
                assert e.deeper == 0 or e.deeper > e.reusable, (i, e)
    assert gaps > 0  # the traces have requests that restore short of their grid point


def _brute_facts(fine, pol, match: np.ndarray) -> dict[str, list[int]]:
    """The facts over all pairs of requests: request j's states from the simulator's own
    series (its token match and restore point) through the policy's placement; request i
    reaches j's state at p when they share p tokens (whole blocks) and p < input."""
    s = simulate(fine, pol, outputs=False, cap_lookup=True).series
    g, n = fine.block_size, len(fine)
    keys = [fine.blocks[fine.offsets[i] : fine.offsets[i + 1]] for i in range(n)]
    L = fine.input_len.tolist()
    saved = [pol.plan(L[j], int(s.token_match[j]), int(s.restore_at[j]), None, g) for j in range(n)]
    names = ("restore_at", "source", "deeper", "deeper_source", "sharer")
    out: dict[str, list[int]] = {k: [] for k in names}
    for i in range(n):
        top = -(-int(match[i]) // g)  # the blocks of the token match
        best, below, sharers, savers = 0, [], [], []
        for j in range(i):
            k = min(len(keys[i]), len(keys[j]))
            neq = np.flatnonzero(keys[i][:k] != keys[j][:k])
            common = int(neq[0]) if len(neq) else k  # whole blocks shared
            best = max([best, *(p for p in saved[j] if p <= common * g and p < L[i])])
            savers.append((j, common))
            if top and common >= top:  # j shares the whole match: its states below it
                sharers.append(j)
                below += [(p, j) for p in saved[j] if p >= top * g]
        src = [j for j, common in savers if best and best in saved[j] and common * g >= best]
        deeper = min(below, default=(0, -1))
        out["restore_at"].append(best)
        out["source"].append(src[0] if src else -1)
        out["deeper"].append(deeper[0])
        out["deeper_source"].append(deeper[1])
        out["sharer"].append(sharers[0] if sharers else -1)
    return out


def _mix(seed: int, n: int = 40) -> list[list[int]]:
    """Seeded prompts on three system prompts (64-token multiples): resends of an earlier
    prompt (whose lookup stops one block short), follow-ups extending one, new tails."""
    rng = np.random.default_rng(seed)
    systems = [tokens(1_000_000 * (k + 1), 64 * int(rng.integers(1, 7))) for k in range(3)]
    out: list[list[int]] = []
    for i in range(n):
        roll = rng.random()
        if out and roll < 0.25:
            out.append(list(out[int(rng.integers(len(out)))]))
        elif out and roll < 0.5:
            base = out[int(rng.integers(len(out)))]
            out.append(base + tokens(5_000_000 + 1000 * i, 64 * int(rng.integers(1, 5))))
        else:
            tail = tokens(7_000_000 + 1000 * i, 64 * int(rng.integers(1, 9)))
            out.append(systems[int(rng.integers(3))] + tail)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_facts_on_resends_and_follow_ups(tmp_path: Path, seed: int) -> None:
    # a resend's lookup stops a block short, so its token match is one block less: the
    # branch state it saves there is what the next sharer restores (SGLang)
    path = tmp_path / "mix.jsonl"
    rows = [{"token_ids": p, "timestamp": i} for i, p in enumerate(_mix(seed))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = load_trace(path, "token-ids", block_size=64)
    r = hit_reasons(trace, vllm={"block_size": 256})
    for e in (r.sglang, r.vllm):
        want = _brute_facts(trace, policy_mod.make(e.engine, **e.params), r.token_match)
        assert want["restore_at"] == e.cached_unlimited.tolist()
        assert want["source"] == e.source.tolist() and want["deeper"] == e.deeper.tolist()


@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_the_facts_against_a_brute_force_replay(name: str) -> None:
    trace = bundled_trace(name).head(400)
    r = hit_reasons(trace)
    fine = trace.refined(256)  # gcd(512, vLLM's 768-token block)
    for e in (r.sglang, r.vllm):
        pol = policy_mod.make(e.engine, **e.params)
        want = _brute_facts(fine, pol, r.token_match)
        assert want["restore_at"] == e.cached_unlimited.tolist()
        assert want["source"] == e.source.tolist()
        assert want["deeper"] == e.deeper.tolist()
        assert want["deeper_source"] == e.deeper_source.tolist()
        assert want["sharer"] == r.sharer.tolist()
    assert (r.sglang.deeper > 0).sum() > 10  # the replay has deeper states to compare
