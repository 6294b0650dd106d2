"""What the vLLM block model hands out: a hit, a scheduled step, a request's record, and a
snapshot of the pool, as frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockHit:
    """One lookup (``KVCacheManager.get_computed_blocks``). tokens: the restore point (MLA KV and
    KDA state agree); kv_tokens: the KV group's own hit; state_block: the block holding the state
    after ``tokens`` (None: no hit) at ``table_index`` (``(tokens - unit) // block_size``, nulls
    before it); partial: the hit ends inside a block (copy-on-write before writing);
    shared_prefix_boundary: vLLM's ``request.shared_prefix_boundary`` (the KV hit past the state
    hit), else 0."""

    tokens: int
    kv_tokens: int
    kv_blocks: tuple[int, ...]
    state_block: int | None
    table_index: int
    partial: bool
    shared_prefix_boundary: int


@dataclass(frozen=True)
class Step:
    """One scheduled chunk of one request, tokens ``[start, end)``: the lookup (first step only),
    the block the state after ``end`` goes to, the prefix keys registered ``(group, tokens,
    block_id)`` (group 0 KV, 1 state), the block copies queued ``(src, dst)`` and the new blocks."""

    start: int
    end: int
    hit: BlockHit | None
    state_block: int
    registered: tuple[tuple[int, int, int], ...]
    copies: tuple[tuple[int, int], ...]
    new_blocks: tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class RequestRecord:
    """A request from admission to its free: its hit and every step."""

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
    queue (0: evicted first; -1: in use)."""

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
