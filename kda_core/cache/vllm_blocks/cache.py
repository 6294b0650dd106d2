"""``VLLMBlockCache``: vLLM 0.33's prefix cache for a KDA hybrid, block by block.

One object plays ``KVCacheManager`` + ``HybridKVCacheCoordinator``
(``vllm/v1/core/kv_cache_manager.py``, ``kv_cache_coordinator.py``) over one block pool and two
groups (MLA KV, KDA state), plus the chunk cut of ``Scheduler._mamba_block_aligned_split``
(``vllm/v1/core/sched/scheduler.py``) for a synchronous scheduler serving one request per
step. Requests are added, stepped chunk by chunk, fed their decoded tokens and finished;
``lookup`` answers what a new prompt would hit without changing anything; ``export`` is a
read-only snapshot for views. docs/policies.md ("vLLM's block table").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kda_core._checks import check_int
from kda_core.cache.policy.vllm import aligned_split, reachable_mask
from kda_core.cache.vllm_blocks._groups import KVGroup, StateGroup
from kda_core.cache.vllm_blocks._pool import Block, BlockPool, HashChain
from kda_core.cache.vllm_blocks.records import (
    BlockHit,
    PhysicalBlock,
    PoolSnapshot,
    PrefixEntry,
    RequestRecord,
    Step,
)

__all__ = ["MAX_BLOCKS", "MAX_TOKENS", "VLLMBlockCache"]

MAX_TOKENS = 1 << 20
"""Longest request (tokens) and largest block / chunk the model accepts (caps memory)."""
MAX_BLOCKS = 1 << 16
"""Most physical blocks in the pool."""


class _Request:
    __slots__ = ("rid", "tokens", "prompt_len", "hashes", "computed", "junction", "started")

    def __init__(self, rid: str, tokens: list[int], hashes: list[int]) -> None:
        self.rid = rid
        self.tokens = tokens
        self.prompt_len = len(tokens)
        self.hashes = hashes
        self.computed = 0
        self.junction = 0
        self.started = False


def _check_tokens(tokens: Any, name: str) -> list[int]:
    try:
        out = list(tokens)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of token ids") from None
    if not 1 <= len(out) <= MAX_TOKENS:
        raise ValueError(f"{name} must hold 1 to {MAX_TOKENS} tokens, got {len(out)}")
    return [check_int(f"{name}[{i}]", t, 0) for i, t in enumerate(out)]


class VLLMBlockCache:
    """vLLM 0.33's block-level prefix cache of a KDA hybrid (align mode).

    block_size: tokens per block, the same for the MLA KV pages and the KDA state blocks
    (vLLM: ``block_size`` = ``mamba_block_size`` in align mode); prefix_match_unit: tokens
    per prefix hash (``--prefix-match-unit``; None = block_size, no fine-grained hits; must
    divide block_size); num_blocks: physical blocks in the shared pool, block 0 the null
    block; max_num_batched_tokens: the chunk budget; retention:
    ``prefix_cache_retention_interval`` (None dense, 0, or a multiple of block_size);
    mamba_cache_mode: only "align" (vLLM 0.33 caches KDA/Mamba prefixes in no other mode:
    ``MambaManager.__init__`` asserts it, and ``partial_hash_hits_enabled`` requires it).
    """

    def __init__(
        self,
        block_size: int = 64,
        prefix_match_unit: int | None = None,
        *,
        num_blocks: int = 512,
        max_num_batched_tokens: int = 2048,
        retention: int | None = None,
        mamba_cache_mode: str = "align",
    ) -> None:
        if mamba_cache_mode != "align":
            raise ValueError(
                f"mamba_cache_mode must be 'align' (vLLM 0.33 caches KDA/Mamba prefixes only "
                f"in align mode, so no partial hits either), got {mamba_cache_mode!r}"
            )
        B = check_int("block_size", block_size, 1, MAX_TOKENS)
        u = B if prefix_match_unit is None else prefix_match_unit
        u = check_int("prefix_match_unit", u, 1, B)
        if B % u:
            raise ValueError(f"prefix_match_unit={u} must divide block_size={B}")
        if retention is not None:
            retention = check_int("retention", retention, 0, MAX_TOKENS)
            if retention % B:
                raise ValueError(f"retention must be a multiple of block_size={B}")
        self.block_size, self.unit, self.retention = B, u, retention
        self.fine = u < B  # partial_hash_hits_enabled
        chunk = max_num_batched_tokens
        self.chunk = check_int("max_num_batched_tokens", chunk, 1, MAX_TOKENS)
        self.pool = BlockPool(check_int("num_blocks", num_blocks, 2, MAX_BLOCKS), u)
        self.chain = HashChain(u)
        self.kv = KVGroup(self.pool, 0, B, self.fine)
        self.state = StateGroup(self.pool, 1, B, self.fine)
        self._reqs: dict[str, _Request] = {}
        self._served = 0

    # lookup ----------------------------------------------------------------------------
    def _find(self, hashes: list[int], max_len: int) -> tuple[list[Block], list[Block], int, int]:
        """``HybridKVCacheCoordinator.find_longest_cache_hit`` for one KV and one state group
        (a simple hybrid: one pass): the KV hit bounds the state lookup, the state hit cuts
        the KV blocks. Returns KV blocks, state blocks, the hit and the KV group's own hit."""
        kv_blocks, kv_len = self.kv.find(hashes, max_len)
        state_blocks, hit = self.state.find(hashes, kv_len)
        return kv_blocks[: -(-hit // self.block_size)], state_blocks, hit, kv_len

    def _hit(self, kv: list[Block], st: list[Block], hit: int, kv_len: int) -> BlockHit:
        return BlockHit(
            tokens=hit,
            kv_tokens=kv_len,
            kv_blocks=tuple(b.block_id for b in kv),
            state_block=st[-1].block_id if st else None,
            table_index=len(st) - 1,
            partial=bool(hit % self.block_size),
            shared_prefix_boundary=kv_len if kv_len > hit else 0,
        )

    def lookup(self, tokens: Sequence[int]) -> BlockHit:
        """What a new request with these tokens would hit (``get_computed_blocks``: at most
        ``len(tokens) - 1`` tokens, the last one is recomputed for its logits). Read-only."""
        toks = _check_tokens(tokens, "tokens")
        hashes = self.chain.peek(toks)
        return self._hit(*self._find(hashes, len(toks) - 1))

    # one request ------------------------------------------------------------------------
    def add(self, request_id: str, prompt: Sequence[int]) -> None:
        """Queue a request (``Request``); its lookup runs at its first ``step``."""
        if not isinstance(request_id, str) or request_id in self._reqs:
            raise ValueError(f"request_id must be a new str, got {request_id!r}")
        toks = _check_tokens(prompt, "prompt")
        hashes: list[int] = []
        self.chain.extend(hashes, toks)
        self._reqs[request_id] = _Request(request_id, toks, hashes)

    def _require_request(self, request_id: Any) -> _Request:
        req = self._reqs.get(request_id) if isinstance(request_id, str) else None
        if req is None:
            raise ValueError(f"request_id {request_id!r} is not in the cache")
        return req

    def append(self, request_id: str, token: int) -> None:
        """Feed back a decoded token (``Request.append_output_token_ids``)."""
        req = self._require_request(request_id)
        if len(req.tokens) >= MAX_TOKENS:
            raise ValueError(f"a request holds at most {MAX_TOKENS} tokens")
        req.tokens.append(check_int("token", token, 0))
        self.chain.extend(req.hashes, req.tokens)

    def step(self, request_id: str) -> Step:
        """Schedule the request's next chunk: the lookup on its first step, the aligned
        cut, ``allocate_slots`` (blocks, copy-on-write, keys) and the copies' release."""
        req = self._require_request(request_id)
        B = self.block_size
        found = None if req.started else self._find(req.hashes, len(req.tokens) - 1)
        hits = found[2] if found else 0
        start = req.computed + hits
        want = min(self.chunk, len(req.tokens) - start)
        if want <= 0:
            raise ValueError(f"request {request_id!r} has computed every token; append one")
        junction = found[3] if found and found[3] > hits else req.junction
        fine, unit, chunk = self.fine, self.unit, self.chunk
        n = aligned_split(
            start, want, len(req.tokens), req.prompt_len, B, unit, fine, chunk, junction
        )
        if n <= 0:
            raise ValueError(f"block_size={B} does not fit max_num_batched_tokens={self.chunk}")
        self.pool.log.clear()
        self.state.remove_skipped(request_id, start)  # the KV group frees nothing
        self._require_room(req, start, start + n, found)
        req.started, req.junction = True, junction
        new = self._allocate(req, start, n, found)
        req.computed = start + n
        copies = self._release_copies()
        table = self.state.req_blocks[request_id]
        return Step(
            start=start,
            end=req.computed,
            hit=self._hit(*found) if found else None,
            state_block=table[-(-req.computed // B) - 1].block_id,
            registered=tuple(self.pool.log),
            copies=copies,
            new_blocks=new,
        )

    def _require_room(self, req: _Request, start: int, need: int, found: tuple | None) -> None:
        """``get_num_blocks_to_allocate`` against the free blocks: vLLM would not schedule
        the step (``allocate_slots`` returns None); a one-request model cannot wait."""
        kv_hit, st_hit = (found[0], found[1]) if found else ([], [])
        wanted = self.kv.num_to_allocate(req.rid, need, kv_hit, start)
        wanted += self.state.num_to_allocate(req.rid, need, st_hit, start)
        if wanted > self.pool.num_free():
            raise ValueError(
                f"num_blocks={len(self.pool.blocks)} is too small: this step needs {wanted} "
                f"blocks, {self.pool.num_free()} are free or evictable"
            )

    def _allocate(
        self, req: _Request, start: int, n: int, found: tuple | None
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``KVCacheManager.allocate_slots`` for ``n`` new tokens after ``start`` computed."""
        rid, need = req.rid, start + n
        kv_hit, st_hit = (found[0], found[1]) if found else ([], [])
        if found is not None:
            self.kv.add_hit(rid, kv_hit, start)
            self.state.add_hit(rid, st_hit, start)
        new_kv = self.kv.allocate(rid, need)
        new_state = self.state.allocate(rid, need)
        cacheable = min(need, len(req.tokens))
        if not self.fine:  # HybridKVCacheCoordinator._align_cacheable
            cacheable = cacheable // self.block_size * self.block_size
        self.kv.cache(rid, req.hashes, req.prompt_len, cacheable)
        self.state.cache(rid, req.hashes, req.prompt_len, cacheable, self._mask_fn(req))
        return tuple(b.block_id for b in new_kv), tuple(b.block_id for b in new_state)

    def _mask_fn(self, req: _Request):
        """The retention mask for this request's state blocks (None = keep all)."""
        if self.retention is None:
            return lambda first, end: None
        align = self.unit if self.fine else self.block_size
        reach = [req.prompt_len - 1] + ([req.junction] if req.junction else [])
        B, retention = self.block_size, self.retention
        return lambda first, end: reachable_mask(first, end, B, align, retention, reach)

    def _release_copies(self) -> tuple[tuple[int, int], ...]:
        """``take_kv_cache_block_copies``: the step's copies run, then both ends of each are
        released (``Scheduler._free_cow_retained_blocks``, synchronous)."""
        pairs = self.kv.copies + self.state.copies
        self.kv.copies, self.state.copies = [], []
        self.pool.free_blocks([b for pair in pairs for b in pair])
        return tuple((a.block_id, b.block_id) for a, b in pairs)

    def finish(self, request_id: str) -> None:
        """Free the request's blocks, each group's table tail first (``KVCacheManager.free``):
        keyed blocks stay cached (evictable), the rest are reused first."""
        self._require_request(request_id)
        del self._reqs[request_id]
        for group in (self.kv, self.state):
            self.pool.free_blocks(reversed(group.pop(request_id)))

    def serve(self, prompt: Sequence[int], outputs: Sequence[int] = ()) -> RequestRecord:
        """Run one request to its end: prefill ``prompt`` chunk by chunk, then compute each
        of ``outputs`` as a decoded token, then free it."""
        outs = _check_tokens(outputs, "outputs") if len(outputs) else []
        self._served += 1
        rid = f"request-{self._served}"
        while rid in self._reqs:
            rid += "'"
        self.add(rid, prompt)
        steps = []
        try:
            for token in [None, *outs]:
                if token is not None:
                    self.append(rid, token)
                while True:
                    steps.append(self.step(rid))
                    if steps[-1].end == len(self._reqs[rid].tokens):
                        break
        finally:
            self.finish(rid)
        hit = steps[0].hit
        assert hit is not None, "the first step carries the lookup"
        return RequestRecord(rid, len(prompt), hit, tuple(steps))

    # read-only views -------------------------------------------------------------------
    def export(self) -> PoolSnapshot:
        """The pool as plain data: blocks, prefix entries, request tables, free order."""
        pool, u = self.pool, self.unit
        rank = {bid: i for i, bid in enumerate(pool.free)}
        blocks = tuple(
            PhysicalBlock(
                b.block_id,
                b.ref_cnt,
                tuple(self.chain.depth[k[0]] * u for k in pool.keys_of(b)),
                rank.get(b.block_id, -1),
            )
            for b in pool.blocks[1:]
        )
        entries = tuple(
            PrefixEntry(key[1], self.chain.depth[key[0]] * u, key[0], bid, blk.key == key)
            for key, held in pool.cached.items()
            for bid, blk in held.items()
        )
        tables = {
            rid: tuple(
                tuple(b.block_id for b in g.req_blocks.get(rid, ())) for g in (self.kv, self.state)
            )
            for rid in self._reqs
        }
        return PoolSnapshot(
            self.block_size, u, blocks, entries, tables, tuple(pool.free), pool.evictions
        )
