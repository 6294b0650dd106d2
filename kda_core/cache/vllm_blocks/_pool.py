"""vLLM 0.33's block pool (``vllm/v1/core/block_pool.py`` ``BlockPool``,
``BlockHashToBlockMap``; ``kv_cache_utils.py`` ``KVCacheBlock``, ``FreeKVCacheBlockQueue``,
``hash_block_tokens``): equal physical blocks shared by both groups, block 0 the null block; a
key is a prefix's chained hash at a hash-unit boundary plus the group id (a block has a
primary key and maybe more; one key may name several blocks, the first answers). Hashes are
interned chain ids, not sha256: equal prefixes get equal ids, no two prefixes collide.
``BlockPool.snapshot`` hands the pool out as frozen dataclasses (``PoolSnapshot``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Key = tuple[int, int]
"""(chain id of a prefix at a hash-unit boundary, KV cache group id)."""


class HashChain:
    """Interned prefix hashes at ``unit`` tokens: ``hash_block_tokens(parent, unit tokens)``."""

    def __init__(self, unit: int) -> None:
        self.unit = unit
        self._ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.depth: list[int] = [0]  # depth[chain id] = hash units in that prefix

    def extend(self, hashes: list[int], tokens: Sequence[int], intern: bool = True) -> list[int]:
        """Append the hashes of ``tokens``' full units past ``hashes`` (only full units are
        hashed: ``get_request_block_hasher``). ``intern=False``: intern nothing, stop at the
        first unit never seen (no key can exist past it)."""
        u = self.unit
        for start in range(len(hashes) * u, len(tokens) - u + 1, u):
            item = (hashes[-1] if hashes else 0, tuple(tokens[start : start + u]))
            chain = self._ids.get(item)
            if chain is None:
                if not intern:
                    break
                chain = self._ids[item] = len(self.depth)
                self.depth.append(len(hashes) + 1)
            hashes.append(chain)
        return hashes

    def peek(self, tokens: Sequence[int]) -> list[int]:
        """The known hashes of ``tokens`` (``extend`` interning nothing)."""
        return self.extend([], tokens, intern=False)


@dataclass(slots=True, eq=False)
class Block:
    """One physical block (``KVCacheBlock``): id, references, primary key and its tokens."""

    block_id: int
    ref_cnt: int = 0
    key: Key | None = None
    key_tokens: int | None = None
    is_null: bool = False


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


class BlockPool:
    """Blocks, the key -> blocks map, extra keys per block, and the free queue."""

    def __init__(self, num_blocks: int, unit: int) -> None:
        self.unit = unit
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(1, num_blocks))
        self.cached: dict[Key, dict[int, Block]] = {}
        self.extra_keys: dict[int, set[Key]] = {}
        self.null = self.blocks[0]
        self.null.is_null = True
        self.evictions = 0
        self.log: list[tuple[int, int, int]] = []  # keys added: (group, tokens, block id)

    def get_cached(self, chain_id: int, group: int) -> Block | None:
        """``get_cached_block`` for one group: the first block inserted under the key."""
        blocks = self.cached.get((chain_id, group))
        return next(iter(blocks.values())) if blocks else None

    def key_block(self, block: Block, key: Key, tokens: int) -> None:
        """Key ``block`` as holding the prefix of ``tokens`` tokens (``cache_full_blocks``,
        ``cache_partial_block``, ``_insert_block_hash``): the first key becomes primary, later
        ones extra; a block keyed at fewer tokens loses its old keys first (its contents
        moved on)."""
        if block.block_id in self.cached.get(key, ()):
            return
        if block.key_tokens is not None and block.key_tokens < tokens:
            self.remove_keys(block)
        if block.key is None:
            block.key, block.key_tokens = key, tokens
        else:
            self.extra_keys.setdefault(block.block_id, set()).add(key)
        self.cached.setdefault(key, {})[block.block_id] = block
        self.log.append((key[1], tokens, block.block_id))

    def remove_keys(self, block: Block) -> list[Key]:
        """``_remove_cached_block_hashes``: drop every key of ``block``; return them."""
        keys = self.keys_of(block)
        self.extra_keys.pop(block.block_id, None)
        for key in keys:
            del self.cached[key][block.block_id]
            if not self.cached[key]:
                del self.cached[key]
        block.key = block.key_tokens = None
        return keys

    def move_keys(self, src: Block, dst: Block) -> None:
        """``move_block_hashes``: re-point every key of ``src`` at ``dst`` (a CoW copy)."""
        assert dst.key is None and dst.block_id not in self.extra_keys, "fresh CoW target"
        tokens = src.key_tokens
        for key in self.remove_keys(src):
            assert tokens is not None, "a keyed block has a token count"
            self.key_block(dst, key, tokens)

    def get_new_blocks(self, n: int) -> list[Block]:
        """``get_new_blocks``: pop ``n`` blocks off the free queue's front, evicting keys."""
        if n > len(self.free):
            raise ValueError(f"the pool has {len(self.free)} free blocks, {n} needed")
        out = []
        for _ in range(n):
            block = self.blocks[self.free.popitem(last=False)[0]]
            if self.remove_keys(block):
                self.evictions += 1
            assert block.ref_cnt == 0, "a free block has no references"
            block.ref_cnt = 1
            out.append(block)
        return out

    def touch(self, blocks: Iterable[Block]) -> None:
        """``touch``: a hit takes a reference (a free cached block leaves the queue)."""
        for block in blocks:
            if block.is_null:
                continue
            if block.ref_cnt == 0:
                del self.free[block.block_id]
            block.ref_cnt += 1

    def free_blocks(self, ordered: Iterable[Block]) -> None:
        """``free_blocks``: unkeyed blocks go to the queue's front (reused first), keyed ones
        to its back (LRU: evicted last), each list in the given order."""
        first, last = [], []
        for block in ordered:
            if block.is_null:
                continue
            block.ref_cnt -= 1
            assert block.ref_cnt >= 0, "freed more often than referenced"
            if block.ref_cnt == 0:
                (first if block.key is None else last).append(block)
        for block in reversed(first):
            self.free[block.block_id] = None
            self.free.move_to_end(block.block_id, last=False)
        for block in last:
            self.free[block.block_id] = None

    def keys_of(self, block: Block) -> list[Key]:
        """Every key of ``block``, primary first."""
        keys = [block.key] if block.key is not None else []
        return keys + sorted(self.extra_keys.get(block.block_id, ()))

    def evict_free(self, group: int, n: int) -> tuple[int, int]:
        """Drop the keys of up to ``n`` free cached blocks of ``group`` from the queue's LRU
        end; a dropped block moves to the front (reused first). -> (blocks, keys dropped)."""
        done = keys = 0
        for bid in list(self.free):
            if done >= n:
                break
            b = self.blocks[bid]
            if b.key is not None and b.key[1] == group:
                keys += len(self.remove_keys(b))
                self.free.move_to_end(bid, last=False)
                self.evictions += 1
                done += 1
        return done, keys

    def check_integrity(self, refs: dict[int, int]) -> None:
        """``refs``: each block's expected references; raise ``AssertionError``."""
        for b in self.blocks[1:]:
            if b.ref_cnt != refs.get(b.block_id, 0) or (not b.ref_cnt) != (b.block_id in self.free):
                raise AssertionError(f"vllm blocks: block {b.block_id} has {b.ref_cnt} references")
        for key, held in self.cached.items():
            for bid, blk in held.items():
                if blk.key != key and key not in self.extra_keys.get(bid, ()):
                    raise AssertionError(f"vllm blocks: block {bid} lacks its key {key}")

    def snapshot(self, depth: list[int], block_size: int, tables: dict) -> PoolSnapshot:
        """The pool as plain data (``depth[chain id]``: hash units in that prefix)."""
        u = self.unit
        rank = {bid: i for i, bid in enumerate(self.free)}
        blocks = tuple(
            PhysicalBlock(
                b.block_id,
                b.ref_cnt,
                tuple(depth[k[0]] * u for k in self.keys_of(b)),
                rank.get(b.block_id, -1),
            )
            for b in self.blocks[1:]
        )
        entries = tuple(
            PrefixEntry(key[1], depth[key[0]] * u, key[0], bid, blk.key == key)
            for key, held in self.cached.items()
            for bid, blk in held.items()
        )
        free = tuple(self.free)
        return PoolSnapshot(block_size, u, blocks, entries, tables, free, self.evictions)
