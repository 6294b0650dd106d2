"""vLLM 0.33's two single-type managers of a KDA/Mamba hybrid in align mode
(``vllm/v1/core/single_type_kv_cache_manager.py``): ``KVGroup`` is ``FullAttentionManager``
(MLA KV pages: the entry at index ``i`` holds tokens ``[iB, (i+1)B)``) and ``StateGroup`` is
``MambaManager`` (ONE state per entry, after some boundary in ``(iB, (i+1)B]`` its key records;
earlier entries nulled as the request moves on, ``remove_skipped_blocks``). One block size for
both (``Platform._align_hybrid_block_size``), hashes every ``u`` tokens; no EAGLE, DCP or KV
connector, synchronous scheduling.
"""

from __future__ import annotations

from collections.abc import Sequence

from kda_core.cache.vllm_blocks._pool import Block, BlockPool


def checkpoint_position(num_tokens: int, unit: int) -> int:
    """``get_mamba_prefill_checkpoint_position`` (no EAGLE, no lookahead): the last ``unit``
    boundary strictly before ``num_tokens`` (one token is left to compute the logits)."""
    return max((num_tokens - 1) // unit * unit, 0)


class _Group:
    """State shared by both managers (``SingleTypeKVCacheManager``)."""

    def __init__(self, pool: BlockPool, group_id: int, block: int, fine: bool) -> None:
        self.pool = pool
        self.group_id = group_id
        self.block = block
        self.fine = fine  # fine-grained (hash-unit) hits are on
        self.req_blocks: dict[str, list[Block]] = {}
        self.num_cached: dict[str, int] = {}
        self.partial_hit: dict[str, tuple[int, Block]] = {}
        self.copies: list[tuple[Block, Block]] = []

    def view(self, hashes: Sequence[int]) -> list[int]:
        """``BlockHashListWithBlockSize``: the hash at each block end."""
        s = self.block // self.pool.unit
        return [hashes[(i + 1) * s - 1] for i in range(len(hashes) // s)]

    def add_hit(self, rid: str, hit: list[Block], hit_tokens: int) -> None:
        """``add_local_computed_blocks``: take the hit blocks; a hit ending inside a block
        marks it for copy-on-write before the request writes there."""
        skipped = max(self.skipped_tokens(hit_tokens) // self.block, 0)
        taken = hit[skipped:]
        self.pool.touch(taken)
        table = [self.pool.null] * skipped + taken
        self.req_blocks[rid] = table
        self.num_cached[rid] = len(table)
        if taken and hit_tokens % self.block:
            idx = hit_tokens // self.block
            self.partial_hit[rid] = (idx, taken[-1])
            self.num_cached[rid] = idx

    def skipped_tokens(self, computed: int) -> int:
        return 0

    def cow(self, rid: str, idx: int, src: Block, dst: Block) -> None:
        """``_apply_cow``: the request writes into a private copy; both ends stay referenced
        until the copy has run (``take_kv_cache_block_copies``)."""
        table = self.req_blocks[rid]
        assert table[idx] is src and src.ref_cnt > 0, "CoW of the request's own hit block"
        table[idx] = dst
        self.copies.append((src, dst))
        dst.ref_cnt += 1

    def cache_full(self, rid: str, hashes: Sequence[int], tokens: int, mask_fn) -> None:
        """``SingleTypeKVCacheManager.cache_blocks``: key the newly full blocks."""
        first = self.num_cached.get(rid, 0)
        end = min(tokens, len(hashes) * self.pool.unit) // self.block
        if first >= end:
            return
        mask = mask_fn(first, end)
        table = self.req_blocks[rid]
        view = self.view(hashes)
        self.pool.cache_full_blocks(table, view, first, end, self.block, self.group_id, mask)
        self.num_cached[rid] = end

    def blocks(self) -> tuple[set[int], set[int]]:
        """(held, free and cached) block ids of this group: in a request's table or keyed."""
        held = {b.block_id for t in self.req_blocks.values() for b in t if not b.is_null}
        keyed = {i for (_, g), bs in self.pool.cached.items() if g == self.group_id for i in bs}
        held |= {i for i in keyed if self.pool.blocks[i].ref_cnt > 0}
        return held, keyed - held

    def pop(self, rid: str) -> list[Block]:
        """``pop_blocks_for_free`` (leading nulls trimmed)."""
        table = self.req_blocks.pop(rid, [])
        self.num_cached.pop(rid, None)
        self.partial_hit.pop(rid, None)
        n = 0
        while n < len(table) and table[n].is_null:
            n += 1
        return table[n:]


class KVGroup(_Group):
    """``FullAttentionManager``: KV pages, hits from the left, a registered prompt tail."""

    def find(self, hashes: Sequence[int], max_len: int) -> tuple[list[Block], int]:
        """``find_longest_cache_hit``: whole cached blocks from the start, then (fine) the
        longest keyed hash boundary inside the first block that is not whole."""
        B, u, g = self.block, self.pool.unit, self.group_id
        hit: list[Block] = []
        for chain in self.view(hashes)[: max_len // B]:
            blk = self.pool.get_cached(chain, g)
            if blk is None:
                break
            hit.append(blk)
        length = len(hit) * B
        if self.fine:
            s = B // u
            lo = len(hit) * s
            hi = min(lo + s - 1, max_len // u, len(hashes))
            for fine in range(hi - 1, lo - 1, -1):
                blk = self.pool.get_cached(hashes[fine], g)
                if blk is not None:
                    hit.append(blk)
                    length = (fine + 1) * u
                    break
        return hit, length

    def num_to_allocate(self, rid: str, num_tokens: int, hit: list[Block], local: int) -> int:
        """``get_num_blocks_to_allocate``: blocks this step would take."""
        required = -(-num_tokens // self.block)
        have = len(self.req_blocks.get(rid, ()))
        if rid in self.num_cached:
            return max(required - have, 0)
        new = max(required - len(hit) - have, 0) + bool(hit and local % self.block)
        return new + sum(b.ref_cnt == 0 and not b.is_null for b in hit)

    def allocate(self, rid: str, num_tokens: int) -> list[Block]:
        """``allocate_new_blocks``: CoW a partially hit tail block, then extend the table."""
        new: list[Block] = []
        if rid in self.partial_hit:
            idx, src = self.partial_hit.pop(rid)
            dst = self.pool.get_new_blocks(1)[0]
            self.cow(rid, idx, src, dst)
            new.append(dst)
        table = self.req_blocks.setdefault(rid, [])
        n = -(-num_tokens // self.block) - len(table)
        if n > 0:
            blocks = self.pool.get_new_blocks(n)
            table.extend(blocks)
            new.extend(blocks)
        return new

    def cache(self, rid: str, hashes: Sequence[int], prompt: int, tokens: int) -> None:
        """``FullAttentionManager.cache_blocks``: full blocks, then the prompt's last hash
        boundary as a partial key on the block holding it (``_cache_partial_tail_block``)."""
        self.cache_full(rid, hashes, tokens, lambda a, b: None)
        u = self.pool.unit
        if self.block == u:
            return
        boundary = min((prompt - 1) // u, len(hashes)) * u
        if boundary == 0 or boundary > tokens or boundary % self.block == 0:
            return
        table = self.req_blocks[rid]
        idx = boundary // self.block
        if idx < len(table):
            self.pool.cache_partial_block(hashes, table[idx], boundary, self.group_id)


class StateGroup(_Group):
    """``MambaManager`` in align mode: one state per table entry, the latest only."""

    def __init__(self, pool: BlockPool, group_id: int, block: int, fine: bool) -> None:
        super().__init__(pool, group_id, block, fine)
        self.this_step: set = set()  # keys cached since the step began (cached_blocks_this_step)
        self.last_state: dict[str, int] = {}
        self.retired: dict[str, int] = {}
        self.allocated: set[str] = set()

    def skipped_tokens(self, computed: int) -> int:
        """``get_num_skipped_tokens``: only the state after the last token is needed."""
        return computed - 1

    def find(self, hashes: Sequence[int], max_len: int) -> tuple[list[Block], int]:
        """``find_longest_cache_hit``: the longest keyed boundary, right to left, at hash
        units when fine-grained (``alignment_tokens < block_size``), else at block ends;
        the hit block sits at table index ``(hit - u) // B`` behind null blocks."""
        B, u, g = self.block, self.pool.unit, self.group_id
        if self.fine:
            for fine in range(min(max_len // u, len(hashes)) - 1, -1, -1):
                blk = self.pool.get_cached(hashes[fine], g)
                if blk is not None:
                    return [self.pool.null] * (fine // (B // u)) + [blk], (fine + 1) * u
            return [], 0
        view = self.view(hashes)
        for i in range(max_len // B - 1, -1, -1):
            blk = self.pool.get_cached(view[i], g)
            if blk is not None:
                return [self.pool.null] * i + [blk], (i + 1) * B
        return [], 0

    def num_to_allocate(self, rid: str, num_tokens: int, hit: list[Block], local: int) -> int:
        """``get_num_blocks_to_allocate`` (align): blocks this step would take."""
        new = -(-num_tokens // self.block) - len(hit) - len(self.req_blocks.get(rid, ()))
        partial = bool(hit and local % self.block) or rid in self.partial_hit
        if partial:
            new = max(new, 0) + 1
        if new > 0:
            new = min(new, 1 + int(partial))
        return new + sum(b.ref_cnt == 0 and not b.is_null for b in hit)

    def remove_skipped(self, rid: str, processed: int) -> None:
        """``remove_skipped_blocks``: free every state block before the running one."""
        if processed - 1 > 0:
            table = self.req_blocks.setdefault(rid, [])
            last = min((processed - 1) // self.block, len(table))
            first = self.retired.get(rid, 0)
            if first < last:
                freed = []
                for i in range(last - 1, first - 1, -1):
                    if not table[i].is_null:
                        freed.append(table[i])
                        table[i] = self.pool.null
                self.pool.free_blocks(freed)
                self.retired[rid] = last
        idx = self.last_state.get(rid)
        if idx is not None and idx < -(-processed // self.block) - 1:
            table = self.req_blocks.setdefault(rid, [])
            if not table[idx].is_null:
                self.pool.free_blocks([table[idx]])
                table[idx] = self.pool.null

    def allocate(self, rid: str, num_tokens: int) -> list[Block]:
        """``allocate_new_blocks`` (align): nulls up to the running entry, one new block
        for it, and a CoW block when a partial key must be preserved: a hit's block is
        copied into the request's own; a producer's own partial key moves to the copy
        (``move_block_hashes``) while the request keeps writing in place."""
        table = self.req_blocks.setdefault(rid, [])
        required = -(-num_tokens // self.block)
        partial = self.partial_hit.pop(rid, None)
        if required <= len(table) and partial is None:
            self.allocated.add(rid)
            return []
        prev = len(table)
        was_allocated = rid in self.allocated
        if prev > 0:
            self.last_state[rid] = prev - 1
        if prev < required - 1:
            table.extend([self.pool.null] * (required - 1 - prev))
        n = max(required - len(table), 0) + (partial is not None)
        new = self.pool.get_new_blocks(n)
        out = table[prev:]
        if partial is not None:
            idx, src = partial
            dst, new = new[0], new[1:]
            if was_allocated:
                assert table[idx] is src, "the producer still writes its own block"
                self.pool.move_keys(src, dst)
                self.copies.append((src, dst))
                src.ref_cnt += 1
            else:
                self.cow(rid, idx, src, dst)
                out = [dst] + out
        table.extend(new)
        self.allocated.add(rid)
        return out + new

    def cache(
        self,
        rid: str,
        hashes: Sequence[int],
        prompt: int,
        tokens: int,
        mask_fn,
    ) -> None:
        """``MambaManager.cache_blocks``: full blocks (under the retention mask), then the
        prompt's last hash boundary when a chunk ends exactly there
        (``_cache_partial_tail_block``): the running block gets that key, and the next
        allocation moves the key to a copy before the state moves on. The keys go into
        ``this_step``: another request's hit on them waits a step (the state is not computed
        before this step's forward)."""
        logged = len(self.pool.log)
        self.cache_full(rid, hashes, tokens, mask_fn)
        self._cache_tail(rid, hashes, prompt, tokens)
        self.this_step.update(self.pool.blocks[i].key for g, _, i in self.pool.log[logged:] if g)

    def _cache_tail(self, rid: str, hashes: Sequence[int], prompt: int, tokens: int) -> None:
        u, B = self.pool.unit, self.block
        if tokens <= 0 or tokens % u or tokens != checkpoint_position(prompt, u):
            return
        table = self.req_blocks.get(rid, [])
        idx = -(-tokens // B) - 1
        if idx >= len(table) or table[idx].is_null or table[idx].key_tokens == tokens:
            return
        src = table[idx]
        key = self.pool.cache_partial_block(hashes, src, tokens, self.group_id)
        if key is not None and tokens % B:
            self.partial_hit[rid] = (idx, src)
            self.num_cached[rid] = idx

    def pop(self, rid: str) -> list[Block]:
        self.allocated.discard(rid)
        self.last_state.pop(rid, None)
        self.retired.pop(rid, None)
        return super().pop(rid)
