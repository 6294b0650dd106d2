"""vLLM 0.33's two single-type managers of a KDA/Mamba hybrid in align mode
(``vllm/v1/core/single_type_kv_cache_manager.py``): ``KVGroup`` is ``FullAttentionManager``
(MLA KV pages: the entry at index ``i`` holds tokens ``[iB, (i+1)B)``) and ``StateGroup`` is
``MambaManager`` (ONE state per entry, after some boundary in ``(iB, (i+1)B]`` its key records;
earlier entries nulled as the request moves on, ``remove_skipped_blocks``). One block size for
both (``Platform._align_hybrid_block_size``), hashes every ``u`` tokens (``u == B``: no
fine-grained hits); no EAGLE, DCP or KV connector, synchronous scheduling."""

from __future__ import annotations

from collections.abc import Sequence

from kda_core.cache.policy.vllm import retained
from kda_core.cache.vllm_blocks._pool import Block, BlockPool


class _Group:
    """State shared by both managers (``SingleTypeKVCacheManager``); ``retention``:
    ``prefix_cache_retention_interval`` (None: dense)."""

    def __init__(self, pool: BlockPool, group_id: int, block: int, retention: int | None) -> None:
        self.pool = pool
        self.group_id = group_id
        self.block = block
        self.retention = retention
        self.req_blocks: dict[str, list[Block]] = {}
        self.num_cached: dict[str, int] = {}
        self.partial_hit: dict[str, tuple[int, Block]] = {}
        self.copies: list[tuple[Block, Block]] = []

    def add_hit(self, rid: str, hit: Sequence[Block], hit_tokens: int) -> None:
        """``add_local_computed_blocks``: take the hit blocks (a state hit is already nulls
        before its one block, the entries ``get_num_skipped_tokens`` skips); a hit ending
        inside its last block marks it for copy-on-write before the request writes there."""
        self.pool.touch(hit)
        self.req_blocks[rid] = list(hit)
        self.num_cached[rid] = len(hit) - bool(hit_tokens % self.block)
        if hit and hit_tokens % self.block:
            self.partial_hit[rid] = (len(hit) - 1, hit[-1])

    def cow(self, rid: str, idx: int, src: Block, dst: Block) -> None:
        """``_apply_cow``: the request writes into a private copy; both ends stay referenced
        until the copy has run (``take_kv_cache_block_copies``)."""
        table = self.req_blocks[rid]
        assert table[idx] is src and src.ref_cnt > 0, "CoW of the request's own hit block"
        table[idx] = dst
        self.copies.append((src, dst))
        dst.ref_cnt += 1

    def cache_full(self, rid: str, hashes: Sequence[int], tokens: int, reach: tuple) -> None:
        """``cache_blocks`` -> ``BlockPool.cache_full_blocks``: key the newly full blocks with
        their block-end hashes (``BlockHashListWithBlockSize``), under the retention mask
        (``reach``: the reachable boundaries, ``MambaManager.reachable_block_mask``)."""
        first = self.num_cached.get(rid, 0)
        end = tokens // self.block
        if first >= end:
            return
        B, s = self.block, self.block // self.pool.unit
        keep = {t // B * B for t in reach}  # the boundaries on the block grid (u divides B)
        for i, blk in enumerate(self.req_blocks[rid][first:end], first):
            if not blk.is_null and retained((i + 1) * B, B, self.retention, keep):
                self.pool.key_block(blk, (hashes[(i + 1) * s - 1], self.group_id), (i + 1) * B)
        self.num_cached[rid] = end

    def blocks(self) -> tuple[set[int], set[int]]:
        """(held, free and cached) block ids of this group: in a request's table or keyed."""
        held = {b.block_id for t in self.req_blocks.values() for b in t if not b.is_null}
        keyed = {i for (_, g), bs in self.pool.cached.items() if g == self.group_id for i in bs}
        held |= {i for i in keyed if self.pool.blocks[i].ref_cnt > 0}
        return held, keyed - held

    def pop(self, rid: str) -> list[Block]:
        """``pop_blocks_for_free`` (null blocks included: the pool skips them)."""
        self.num_cached.pop(rid, None)
        self.partial_hit.pop(rid, None)
        return self.req_blocks.pop(rid, [])


class KVGroup(_Group):
    """``FullAttentionManager``: KV pages, hits from the left, a registered prompt tail."""

    def find(self, hashes: Sequence[int], max_len: int) -> tuple[list[Block], int]:
        """``find_longest_cache_hit``: whole cached blocks from the start, then the longest
        keyed hash boundary inside the first block that is not whole."""
        B, u, g = self.block, self.pool.unit, self.group_id
        s = B // u  # the hash at each block end: BlockHashListWithBlockSize
        hit: list[Block] = []
        for chain in hashes[s - 1 : max_len // u : s]:
            blk = self.pool.get_cached(chain, g)
            if blk is None:
                break
            hit.append(blk)
        lo = len(hit) * s
        for fine in range(min(lo + s - 1, max_len // u, len(hashes)) - 1, lo - 1, -1):
            blk = self.pool.get_cached(hashes[fine], g)
            if blk is not None:
                return hit + [blk], (fine + 1) * u
        return hit, len(hit) * B

    def num_to_allocate(self, rid: str, num_tokens: int, hit: Sequence[Block], local: int) -> int:
        """``get_num_blocks_to_allocate``: blocks this step would take."""
        have = len(self.req_blocks.get(rid, ()))
        new = max(-(-num_tokens // self.block) - len(hit) - have, 0)
        new += bool(hit and local % self.block)
        return new + sum(b.ref_cnt == 0 and not b.is_null for b in hit)

    def allocate(self, rid: str, num_tokens: int) -> list[Block]:
        """``allocate_new_blocks``: CoW a partially hit tail block, then extend the table."""
        new: list[Block] = []
        if rid in self.partial_hit:
            idx, src = self.partial_hit.pop(rid)
            new = self.pool.get_new_blocks(1)
            self.cow(rid, idx, src, new[0])
        table = self.req_blocks.setdefault(rid, [])
        blocks = self.pool.get_new_blocks(max(-(-num_tokens // self.block) - len(table), 0))
        table.extend(blocks)
        return new + blocks

    def cache(self, rid: str, hashes: Sequence[int], tail: int, tokens: int) -> None:
        """``FullAttentionManager.cache_blocks``: full blocks, then the prompt's last hash
        boundary ``tail`` as a partial key on the block holding it
        (``_cache_partial_tail_block``)."""
        self.cache_full(rid, hashes, tokens, ())
        if 0 < tail <= tokens and tail % self.block:
            key = (hashes[tail // self.pool.unit - 1], self.group_id)
            self.pool.key_block(self.req_blocks[rid][tail // self.block], key, tail)


class StateGroup(_Group):
    """``MambaManager`` in align mode: one state per table entry, the latest only."""

    def __init__(self, pool: BlockPool, group_id: int, block: int, retention: int | None) -> None:
        super().__init__(pool, group_id, block, retention)
        self.this_step: set = set()  # keys cached since the step began (cached_blocks_this_step)
        self.last_state: dict[str, int] = {}
        self.retired: dict[str, int] = {}
        self.allocated: set[str] = set()

    def find(self, hashes: Sequence[int], max_len: int) -> tuple[list[Block], int]:
        """``find_longest_cache_hit``: the longest keyed hash boundary, right to left (hash
        units when fine-grained, else block ends); the hit block sits at table index
        ``(hit - u) // B`` behind null blocks."""
        u = self.pool.unit
        for fine in range(min(max_len // u, len(hashes)) - 1, -1, -1):
            blk = self.pool.get_cached(hashes[fine], self.group_id)
            if blk is not None:
                return [self.pool.null] * (fine * u // self.block) + [blk], (fine + 1) * u
        return [], 0

    def num_to_allocate(self, rid: str, num_tokens: int, hit: Sequence[Block], local: int) -> int:
        """``get_num_blocks_to_allocate`` (align): blocks this step would take."""
        new = -(-num_tokens // self.block) - len(hit) - len(self.req_blocks.get(rid, ()))
        partial = bool(hit and local % self.block) or rid in self.partial_hit
        if partial:
            new = max(new, 0) + 1
        if new > 0:
            new = min(new, 1 + int(partial))
        return new + sum(b.ref_cnt == 0 and not b.is_null for b in hit)

    def remove_skipped(self, rid: str, processed: int) -> None:
        """``remove_skipped_blocks``: null every state block before the running one (tail
        first; ``_remove_blocks_in_range``) and the one allocated two steps ago
        (``last_state_block_idx``); the pool skips the null ones."""
        table = self.req_blocks.setdefault(rid, [])
        first = self.retired.get(rid, 0)
        last = min(max(processed - 1, 0) // self.block, len(table))
        if first < last:
            self.pool.free_blocks(reversed(table[first:last]))
            table[first:last] = [self.pool.null] * (last - first)
            self.retired[rid] = last
        idx = self.last_state.get(rid)
        if idx is not None and idx < -(-processed // self.block) - 1:
            self.pool.free_blocks([table[idx]])
            table[idx] = self.pool.null

    def allocate(self, rid: str, num_tokens: int) -> list[Block]:
        """``allocate_new_blocks`` (align): nulls up to the running entry, one new block
        for it, and a CoW block when a partial key must be preserved: a hit's block is
        copied into the request's own; a producer's own partial key moves to the copy
        (``move_block_hashes``, into ``cached_blocks_this_step``) while the request keeps
        writing in place."""
        table = self.req_blocks.setdefault(rid, [])
        required = -(-num_tokens // self.block)
        partial = self.partial_hit.pop(rid, None)
        if required <= len(table) and partial is None:
            self.allocated.add(rid)
            return []
        prev = len(table)
        if prev > 0:
            self.last_state[rid] = prev - 1
        table.extend([self.pool.null] * (required - 1 - prev))  # none when negative
        n = max(required - len(table), 0) + (partial is not None)
        new = self.pool.get_new_blocks(n)
        out = table[prev:]
        if partial is not None:
            idx, src = partial
            dst, new = new[0], new[1:]
            if rid in self.allocated:  # a running request: the producer of the key
                assert table[idx] is src, "the producer still writes its own block"
                self.pool.move_keys(src, dst)
                self.copies.append((src, dst))
                src.ref_cnt += 1
                if dst.key is not None:  # filled by this step's copy: a hit on it waits a step
                    self.this_step.add(dst.key)
            else:
                self.cow(rid, idx, src, dst)
                out = [dst] + out
        table.extend(new)
        self.allocated.add(rid)
        return out + new

    def cache(self, rid: str, hashes: Sequence[int], tail: int, tokens: int, reach: tuple) -> None:
        """``MambaManager.cache_blocks``: full blocks (under the retention mask), then
        ``_cache_partial_tail_block``: when a chunk ends exactly at the prompt's last hash
        boundary ``tail`` (``get_mamba_prefill_checkpoint_position``), the running block gets
        that key, and the next allocation moves the key to a copy before the state moves on.
        The keys go into ``this_step``: another request's hit on them waits a step (the state
        is not computed before this step's forward)."""
        logged = len(self.pool.log)
        self.cache_full(rid, hashes, tokens, reach)
        idx = -(-tokens // self.block) - 1
        src = self.req_blocks[rid][idx]
        if 0 < tokens == tail and not src.is_null and src.key_tokens != tokens:
            self.pool.key_block(src, (hashes[tail // self.pool.unit - 1], self.group_id), tail)
            if tokens % self.block:
                self.partial_hit[rid] = (idx, src)
                self.num_cached[rid] = idx
        self.this_step.update(self.pool.blocks[i].key for g, _, i in self.pool.log[logged:] if g)

    def pop(self, rid: str) -> list[Block]:
        self.allocated.discard(rid)
        self.last_state.pop(rid, None)
        self.retired.pop(rid, None)
        return super().pop(rid)
