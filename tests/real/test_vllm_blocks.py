"""Differential: ``kda_core.cache.vllm_blocks.VLLMBlockCache`` against vLLM 0.33's own
``KVCacheManager`` (``vllm_blocks_driver.RealBlockCache``), step by step.

The same request sequences go through both; after every scheduled step the two must agree on
the chunk ``[start, end)``, the lookup (hit length, KV block ids, the state block id and its
table index, the shared-prefix boundary), the block holding the new state, the queued copies,
the new block ids per group, and the whole pool: every prefix entry (group, prefix, block id,
primary or not), every reference count, the free queue's order and the request tables; and
whether a new request arriving in that step would wait for it (``cached_blocks_this_step``).

Runs in the real-engine venv (tests/real/); skipped elsewhere.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("vllm.v1.core.kv_cache_manager")
torch = pytest.importorskip("torch")

from vllm_blocks_driver import RealBlockCache  # noqa: E402

from kda_core.cache.vllm_blocks import VLLMBlockCache  # noqa: E402

PROBE = 1 << 19  # a token no workload uses: a probe request diverges right after the prefix


class Pair:
    """One model and one real cache with the same configuration, driven together."""

    def __init__(self, **cfg) -> None:
        self.model = VLLMBlockCache(**cfg)
        self.real = RealBlockCache(**cfg)
        self.unit = self.real.unit
        self.prefix: dict[int, tuple[int, ...]] = {}  # model chain id -> prefix tokens
        self.steps = self.lookups = self.deferrals = self.batched = self.copied = 0

    def _remember(self, tokens: list[int]) -> None:
        for i, chain in enumerate(self.model.chain.peek(tokens)):
            self.prefix.setdefault(chain, tuple(tokens[: (i + 1) * self.unit]))

    def _model_snapshot(self) -> dict:
        snap = self.model.export()
        entries = {(e.group, self.prefix[e.chain_id], e.block_id, e.primary) for e in snap.entries}
        return {
            "entries": entries,
            "refs": tuple(b.ref_cnt for b in snap.blocks),
            "free": snap.free,
            "tables": snap.tables,
        }

    def check_pool(self, where: str) -> None:
        got, want = self._model_snapshot(), self.real.snapshot()
        for field in ("entries", "refs", "free", "tables"):
            assert got[field] == want[field], f"{where}: pools differ in {field}"

    def lookup(self, tokens: list[int]) -> int:
        got, want = self.model.lookup(tokens), self.real.lookup(tokens)
        self.lookups += 1
        mine = {
            "tokens": got.tokens,
            "kv_blocks": got.kv_blocks,
            "state_block": got.state_block,
            "table_index": got.table_index,
            "shared_prefix_boundary": got.shared_prefix_boundary,
        }
        assert mine == want, f"lookup of {len(tokens)} tokens differs"
        return got.tokens

    def serve(self, rid: str, prompt: list[int], outputs: list[int]) -> list[dict]:
        """Prefill ``prompt`` then compute each of ``outputs``; compare after every step."""
        self.model.add(rid, prompt)
        self.real.add(rid, prompt)
        tokens = list(prompt)
        self._remember(tokens)
        steps = []
        for token in [None, *outputs]:
            if token is not None:
                self.model.append(rid, token)
                self.real.append(rid, token)
                tokens.append(token)
                self._remember(tokens)
            while True:
                got, want = self.model.step(rid), self.real.step(rid)
                self.steps += 1
                mine = _fields(got) | {"copies": got.copies}
                assert mine == want, f"{rid} step {len(steps)} differs"
                self.check_pool(f"{rid} after step {len(steps)}")
                for probe in (prompt + [PROBE], tokens + [PROBE]):  # a new request, same step
                    deferred = self.model.deferred(probe)
                    assert deferred == self.real.deferred(probe), f"{rid}: deferral differs"
                    self.deferrals += deferred
                steps.append(mine)
                if got.end == len(tokens):
                    break
        self.model.finish(rid)
        self.real.finish(rid)
        self.check_pool(f"{rid} freed")
        return steps

    def add(self, rid: str, prompt: list[int]) -> None:
        self.model.add(rid, prompt)
        self.real.add(rid, prompt)
        self._remember(prompt)

    def schedule(self, rids: list[str]) -> list:
        """One step over several requests, in order; then the next step begins on both (the
        copies of this one have been released) and the pools are compared. -> the steps."""
        self.model.new_step()
        self.batched += len(rids) > 1
        got = [self.model.step(rid, new_step=False) for rid in rids]
        want, copies = self.real.schedule(rids)
        assert [_fields(g) for g in got] == want, f"step of {rids} differs"
        assert sorted(c for g in got if g for c in g.copies) == sorted(copies)
        self.model.new_step()
        self.real.mgr.new_step_starts()
        self.check_pool(f"after the step of {rids}")
        self.copied += len(rids) > 1 and any(g and g.copies for g in got)
        return got


def _fields(step) -> dict | None:
    """A model ``Step`` as the real driver reports it (without its copies)."""
    if step is None:
        return None
    hit = step.hit
    return {
        "start": step.start,
        "end": step.end,
        "hit": None
        if hit is None
        else {
            "tokens": hit.tokens,
            "kv_blocks": hit.kv_blocks,
            "state_block": hit.state_block,
            "table_index": hit.table_index,
            "shared_prefix_boundary": hit.shared_prefix_boundary,
        },
        "state_block": step.state_block,
        "new_blocks": step.new_blocks,
    }


def test_96_of_a_128_token_block():
    # a prompt of 97 tokens registers the state after 96 tokens (its last 32-token boundary
    # before the token recomputed for logits) in the block covering tokens (0, 128]
    pair = Pair(block_size=128, prefix_match_unit=32, num_blocks=64)
    first = list(range(97))
    pair.serve("a", first, [500, 501])
    other = first[:96] + [900 + i for i in range(40)]
    assert pair.lookup(other) == 96
    hit = pair.model.lookup(other)
    assert (hit.table_index, hit.partial, len(hit.kv_blocks)) == (0, True, 1)
    steps = pair.serve("b", other, [600])
    assert steps[0]["hit"]["tokens"] == 96
    # block-aligned only (prefix_match_unit = block): the same requests hit nothing
    coarse = Pair(block_size=128, num_blocks=64)
    coarse.serve("a", first, [500, 501])
    assert coarse.lookup(other) == 0


def test_4480_inside_4096():
    # 4096-token blocks, 64-token match unit: a first request of 4481 tokens leaves states at
    # 4096 (a block end) and 4480 (its prompt's last unit boundary, inside block 1)
    pair = Pair(block_size=4096, prefix_match_unit=64, num_blocks=16, max_num_batched_tokens=2048)
    first = [7 + (i % 50_000) for i in range(4481)]
    steps = pair.serve("turn-1", first, [1, 2, 3])
    assert [s["end"] for s in steps][:4] == [2048, 4096, 4480, 4481]
    follow = first[:4480] + [60_000 + i for i in range(300)]
    assert pair.lookup(follow) == 4480
    hit = pair.model.lookup(follow)
    assert (hit.table_index, hit.partial) == (1, True)
    assert pair.serve("turn-2", follow, [4])[0]["hit"]["tokens"] == 4480
    # without fine-grained hits the same follow-up restores at the block end, 4096
    coarse = Pair(block_size=4096, num_blocks=16, max_num_batched_tokens=2048)
    coarse.serve("turn-1", first, [1, 2, 3])
    assert coarse.lookup(follow) == 4096


def test_a_step_releases_its_copies_after_its_last_request():
    # vLLM releases the copies' blocks once every request of the step is scheduled
    # (Scheduler.schedule: take_kv_cache_block_copies, then _free_cow_retained_blocks): "a"
    # copies its hit's partial blocks, then "b", later in the same step, frees its first state
    # block; the copies' sources go to the free queue after it
    pair = Pair(block_size=16, prefix_match_unit=4, num_blocks=40, max_num_batched_tokens=16)
    first = list(range(22))
    pair.serve("x", first, [])  # keys the state at 16 and the prompt's tail at 20
    pair.add("b", [100 + i for i in range(64)])
    pair.schedule(["b"])
    pair.schedule(["b"])
    pair.add("a", first[:20] + [500 + i for i in range(10)])
    pair.schedule(["a", "b"])
    assert pair.model.lookup(first[:20] + [7]).partial  # the hit "a" copied


def test_a_request_hitting_a_state_keyed_in_its_step_waits():
    # "a" keys the state after its prompt's last unit boundary (36) in a step; "b", scheduled
    # after it in that step, hits it: vLLM does not schedule "b" (MambaManager.
    # get_num_blocks_to_allocate: cached_blocks_this_step; the state is computed by this
    # step's forward), and "b" hits it in the next step
    pair = Pair(block_size=16, prefix_match_unit=4, num_blocks=40, max_num_batched_tokens=32)
    prompt = list(range(40))
    pair.add("a", prompt)
    pair.schedule(["a"])
    pair.add("b", prompt[:38] + [900 + i for i in range(20)])
    assert [s and s.end for s in pair.schedule(["a", "b"])] == [36, None]
    assert pair.schedule(["b"])[0].hit.tokens == 36


def _workload(rng: random.Random, n: int, block: int) -> list[tuple[list[int], list[int]]]:
    """Shared system prompts, branches, resends and multi-turn growth, lengths around the
    block and unit boundaries."""
    systems = [[rng.randrange(1000) for _ in range(rng.randrange(1, 3 * block))] for _ in range(3)]
    history: list[list[int]] = []
    out = []
    for _ in range(n):
        kind = rng.random()
        if history and kind < 0.25:  # next turn of an earlier conversation
            prompt = rng.choice(history) + [
                rng.randrange(1000) for _ in range(rng.randrange(1, block))
            ]
        elif history and kind < 0.35:  # an identical resend
            prompt = list(rng.choice(history))
        else:
            prompt = rng.choice(systems) + [
                rng.randrange(1000) for _ in range(rng.randrange(0, 2 * block))
            ]
        prompt = prompt or [1]
        outputs = [rng.randrange(1000) for _ in range(rng.randrange(0, block + 2))]
        history.append(prompt + outputs)
        out.append((prompt, outputs))
    return out


CONFIGS = [
    # (block, unit, chunk, num_blocks, retention)
    (16, 4, 16, 40, None),
    (16, 4, 48, 24, None),
    (16, 8, 8, 40, None),
    (16, 16, 32, 40, None),
    (32, 8, 64, 30, 0),
    (32, 4, 24, 48, 64),
    (64, 16, 256, 32, None),
    (64, 64, 48, 32, 128),
    (16, 2, 64, 64, None),
    (48, 16, 32, 36, 96),
    (128, 32, 2048, 40, None),
]


def _pair(block: int, unit: int, chunk: int, num_blocks: int, retention: int | None) -> Pair:
    return Pair(
        block_size=block,
        prefix_match_unit=unit,
        num_blocks=num_blocks,
        max_num_batched_tokens=chunk,
        retention=retention,
    )


@pytest.mark.parametrize("block,unit,chunk,num_blocks,retention", CONFIGS)
def test_random_sequences_agree_step_by_step(block, unit, chunk, num_blocks, retention):
    rng = random.Random(block * 1000 + unit * 10 + chunk)
    pair = _pair(block, unit, chunk, num_blocks, retention)
    hits = []
    for i, (prompt, outputs) in enumerate(_workload(rng, 60, block)):
        hits.append(pair.lookup(prompt + [0]))
        pair.serve(f"r{i}", prompt, outputs)
    assert pair.steps > 100
    assert any(hits), "the workload must produce hits"
    assert pair.deferrals > 0, "some probe must hit a state keyed in the same step"
    assert pair.model.pool.evictions > 0 or num_blocks > 32


@pytest.mark.parametrize("block,unit,chunk,num_blocks,retention", CONFIGS)
def test_random_batched_steps_agree(block, unit, chunk, num_blocks, retention):
    # up to three requests per step, a new one anywhere in the step's order: one whose state
    # hit was keyed earlier in the step waits (cached_blocks_this_step)
    rng = random.Random(block * 7 + unit * 3 + chunk)
    pair = _pair(block, unit, chunk, 2 * num_blocks, retention)
    waiting = list(enumerate(_workload(rng, 40, block)))
    active: dict[str, tuple[list[int], list[int]]] = {}  # rid -> (tokens, outputs left)
    while waiting or active:
        batch = list(active)
        if waiting and len(active) < 3:
            i, (prompt, outputs) = waiting.pop(0)
            pair.add(f"r{i}", prompt)
            active[f"r{i}"] = (list(prompt), list(outputs))
            batch.insert(rng.randrange(len(batch) + 1), f"r{i}")
        for rid, step in zip(batch, pair.schedule(batch)):
            tokens, outputs = active[rid]
            if step is not None and step.end == len(tokens):
                if outputs:
                    tokens.append(outputs.pop(0))
                    pair.model.append(rid, tokens[-1])
                    pair.real.append(rid, tokens[-1])
                    pair._remember(tokens)
                else:
                    del active[rid]
                    pair.model.finish(rid)
                    pair.real.finish(rid)
                    pair.check_pool(f"{rid} freed")
    assert pair.batched > 20, "steps of several requests"
    assert pair.copied > 0 or unit == block, "some of them copy (partial hits need unit < block)"
