"""What the vLLM block model hands out: a hit, a scheduled step, a request's record, and a
read-only snapshot of the pool (plain frozen dataclasses a view or the engine can use)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockHit:
    """One lookup (``KVCacheManager.get_computed_blocks``).

    tokens: the hit length, where the MLA KV and the KDA state agree (the restore point);
    kv_tokens: the KV group's own hit before the state group cut it; kv_blocks: physical ids
    serving the KV prefix; state_block: the physical block holding the state after exactly
    ``tokens`` tokens (None without a hit); table_index: its entry in the request's state
    block table (``(tokens - unit) // block_size``; the entries before it are null);
    partial: the hit ends inside a block (``tokens % block_size``), so the request copies
    that block before writing (copy-on-write); shared_prefix_boundary: the KV hit when it
    runs past the state hit (vLLM's ``request.shared_prefix_boundary``), else 0.
    """

    tokens: int
    kv_tokens: int
    kv_blocks: tuple[int, ...]
    state_block: int | None
    table_index: int
    partial: bool
    shared_prefix_boundary: int


@dataclass(frozen=True)
class Step:
    """One scheduled chunk of one request: tokens ``[start, end)``.

    hit: the lookup, on the request's first step only; state_block: the physical block the
    state after ``end`` is written to; registered: prefix keys added this step as
    ``(group, tokens, block_id)`` (group 0 = KV, 1 = state); copies: ``(src, dst)`` block
    copies queued this step (copy-on-write of a partial hit, or a producer's partial key
    moved to a copy); new_blocks: blocks taken from the pool per group.
    """

    start: int
    end: int
    hit: BlockHit | None
    state_block: int
    registered: tuple[tuple[int, int, int], ...]
    copies: tuple[tuple[int, int], ...]
    new_blocks: tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class RequestRecord:
    """A request served from admission to its free: its hit and every step."""

    request_id: str
    prompt_len: int
    hit: BlockHit
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class PrefixEntry:
    """A logical prefix entry: the key at ``tokens`` of group ``group`` -> ``block_id``."""

    group: int
    tokens: int
    chain_id: int
    block_id: int
    primary: bool


@dataclass(frozen=True)
class PhysicalBlock:
    """A physical block: references, its keys' token boundaries, its place in the free
    queue (0 = evicted first; -1 when in use)."""

    block_id: int
    ref_cnt: int
    key_tokens: tuple[int, ...]
    free_rank: int


@dataclass(frozen=True)
class PoolSnapshot:
    """The whole pool: blocks (null block excluded), entries, request tables, counters."""

    block_size: int
    unit: int
    blocks: tuple[PhysicalBlock, ...]
    entries: tuple[PrefixEntry, ...]
    tables: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]
    free: tuple[int, ...]
    evictions: int
