"""vLLM's block table for a KDA hybrid, drawn: logical prefix entries apart from physical
blocks, and the fine-grained partial hit (``kda_core.cache.vllm_blocks``, vLLM 0.33 in align
mode; docs/policies.md, "vLLM's block table").

``block_table(block_size, unit, prompt, outputs, shared)`` serves two requests through
``VLLMBlockCache`` and returns what its ``export()`` shows after each. Request A is ``prompt``
distinct tokens then ``outputs`` decoded ones; request B shares A's first ``shared`` tokens and
goes on with new ones. The same two requests also go through a cache whose prefix keys are whole
blocks (``prefix_match_unit = block_size``), so B's hit is shown both ways: with hash units
finer than the block (vLLM's ``partial_hash_hits_enabled``) the hit can end inside a block.

Two cases of the seed are presets (``PRESETS``): a 128-token block with 32-token units, where
B resumes at 96 (A's prompt stops a chunk at its last unit boundary, 96, and the state there
keeps a key) and block-only keys find nothing; and a 4,096-token block with 64-token units,
where B resumes at 4,480 inside the second block and block-only keys at 4,096.
"""

from __future__ import annotations

from dataclasses import dataclass

from kda_core._checks import check_int
from kda_core.cache.vllm_blocks import BlockHit, PoolSnapshot, Step, VLLMBlockCache

__all__ = ["PRESETS", "BlockTable", "block_table"]

_MAX_PROMPT = 1 << 15  # tokens of request A (the study runs in well under a second)
_MAX_OUTPUTS = 256
PRESETS: dict[str, dict[str, int]] = {
    "96 of a 128-token block": dict(block_size=128, unit=32, prompt=97, outputs=40, shared=120),
    "4,480 inside 4,096-token blocks": dict(
        block_size=4096, unit=64, prompt=4481, outputs=2, shared=4480
    ),
}
_B_EXTRA = 40  # B's own tokens after the shared prefix


@dataclass(frozen=True)
class BlockTable:
    """Two requests through vLLM's block model.

    steps_a / steps_b: each request's scheduled chunks (``Step``: tokens, keys registered,
    copies); after_a / after_b: the pool after each request (``PoolSnapshot``: physical blocks
    with the token boundaries of their keys, every logical prefix entry); hit / coarse_hit: B's
    lookup with unit-sized keys and with block-sized keys; shared_blocks: physical blocks of
    ``after_b`` that serve more than one logical prefix, as (block id, group, key boundaries)
    (group 0 = MLA KV, 1 = KDA state); events: the steps of both requests that registered a
    key or copied a block, as (request "A" / "B", step), the rest being plain decode steps.
    """

    block_size: int
    unit: int
    prompt: int
    outputs: int
    shared: int
    b_len: int
    steps_a: tuple[Step, ...]
    steps_b: tuple[Step, ...]
    after_a: PoolSnapshot
    after_b: PoolSnapshot
    hit: BlockHit
    coarse_hit: BlockHit
    shared_blocks: tuple[tuple[int, int, tuple[int, ...]], ...]
    events: tuple[tuple[str, Step], ...]


def _groups(snap: PoolSnapshot) -> dict[int, int]:
    """Physical block id -> the group its entries belong to."""
    return {e.block_id: e.group for e in snap.entries}


def block_table(
    block_size: int = 128,
    unit: int = 32,
    prompt: int = 97,
    outputs: int = 40,
    shared: int = 120,
    *,
    chunk: int = 2048,
) -> BlockTable:
    """Serve request A (``prompt`` + ``outputs`` tokens) then request B (A's first ``shared``
    tokens + 40 new ones) through ``VLLMBlockCache(block_size, unit)`` and through the same
    cache with block-sized keys; ``chunk`` is ``max_num_batched_tokens``."""
    B = check_int("block_size", block_size, 1, _MAX_PROMPT)
    u = check_int("unit", unit, 1, B)
    if B % u:
        raise ValueError(f"unit={u} must divide block_size={B}")
    p = check_int("prompt", prompt, 2, _MAX_PROMPT)
    n_out = check_int("outputs", outputs, 0, _MAX_OUTPUTS)
    s = check_int("shared", shared, 1, p + n_out)
    chunk = check_int("chunk", chunk, 1, _MAX_PROMPT)
    a_prompt = list(range(p))
    a_out = list(range(p, p + n_out))
    b_tokens = (a_prompt + a_out)[:s] + list(range(_MAX_PROMPT + _MAX_OUTPUTS, 1 << 20))[:_B_EXTRA]
    blocks = min(4 * (-(-(p + n_out + s + _B_EXTRA) // B)) + 8, 1 << 16)
    fine = VLLMBlockCache(B, u, num_blocks=blocks, max_num_batched_tokens=chunk)
    coarse = VLLMBlockCache(B, num_blocks=blocks, max_num_batched_tokens=chunk)
    steps_a = fine.serve(a_prompt, a_out)
    coarse.serve(a_prompt, a_out)
    after_a = fine.export()
    hit, coarse_hit = fine.lookup(b_tokens), coarse.lookup(b_tokens)
    steps_b = fine.serve(b_tokens, [])
    after_b = fine.export()
    group = _groups(after_b)
    multi = tuple(
        (b.block_id, group[b.block_id], tuple(sorted(b.key_tokens)))
        for b in after_b.blocks
        if len(b.key_tokens) > 1
    )
    return BlockTable(
        block_size=B,
        unit=u,
        prompt=p,
        outputs=n_out,
        shared=s,
        b_len=len(b_tokens),
        steps_a=steps_a,
        steps_b=steps_b,
        after_a=after_a,
        after_b=after_b,
        hit=hit,
        coarse_hit=coarse_hit,
        shared_blocks=multi,
        events=tuple(
            (name, st)
            for name, steps in (("A", steps_a), ("B", steps_b))
            for st in steps
            if st.registered or st.copies or st.hit is not None
        ),
    )
