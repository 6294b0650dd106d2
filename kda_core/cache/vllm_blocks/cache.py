"""``VLLMBlockCache``: vLLM 0.33's prefix cache for a KDA hybrid, block by block: one object
plays ``KVCacheManager`` + ``HybridKVCacheCoordinator`` (``vllm/v1/core/kv_cache_manager.py``,
``kv_cache_coordinator.py``) over one block pool and two groups (MLA KV, KDA state). Its request
API is vLLM's (``add``, ``step``, ``append``, ``finish``; ``lookup``: ``get_computed_blocks``);
it is a ``PrefixCache`` too. docs/policies.md ("vLLM's block table")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy.vllm import aligned_split, checkpoint_position, replay_boundaries
from kda_core.cache.protocol import (
    CacheHandle,
    Evicted,
    HandleError,
    PrefixInsert,
    PrefixMatch,
    SizeInfo,
)
from kda_core.cache.vllm_blocks._groups import KVGroup, StateGroup
from kda_core.cache.vllm_blocks._pool import Block, BlockPool, HashChain, PoolSnapshot

__all__ = ["BlockHit", "Step", "VLLMBlockCache"]


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
    new_blocks: tuple[tuple[int, ...], ...]  # KV, state


_MAX_TOKENS = 1 << 20  # longest request, largest block and chunk (tokens): caps memory
_MAX_BLOCKS = 1 << 16  # most physical blocks in the pool
_NOT_FIRST = ((), (), BlockHit(0, 0, (), None, -1, False, 0))  # a running request: no lookup


@dataclass(slots=True)
class _Request:
    tokens: list[int]
    hashes: list[int]
    prompt_len: int
    computed: int = 0  # 0: not started (a first step computes at least one token)
    junction: int = 0


def _check_tokens(tokens: Any, name: str) -> list[int]:
    try:
        out = list(tokens)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of token ids") from None
    if not 1 <= len(out) <= _MAX_TOKENS:
        raise ValueError(f"{name} must hold 1 to {_MAX_TOKENS} tokens, got {len(out)}")
    return [check_int(f"{name}[{i}]", t, 0) for i, t in enumerate(out)]


class _Handle(CacheHandle):
    """A match's blocks: a lock takes a reference on each (``touch``), an unlock frees them."""

    __slots__ = ("_cache_id", "_blocks", "_keys", "_locks")

    def __init__(self, cache_id: int, tokens: int, blocks: list[Block]) -> None:
        super().__init__(tokens)
        self._blocks = [b for b in blocks if not b.is_null]
        self._cache_id, self._keys, self._locks = cache_id, [b.key for b in self._blocks], 0


class VLLMBlockCache:
    """block_size: tokens per block, MLA KV pages and KDA state blocks alike (vLLM:
    ``block_size`` = ``mamba_block_size`` in align mode); prefix_match_unit: tokens per prefix
    hash (``--prefix-match-unit``; None = block_size, no fine-grained hits; divides block_size);
    num_blocks: physical blocks in the shared pool, block 0 the null block;
    max_num_batched_tokens: the chunk budget; retention: ``prefix_cache_retention_interval``
    (None dense, 0, or a multiple of block_size); mamba_cache_mode: only "align" (vLLM 0.33
    caches KDA/Mamba prefixes in no other mode: ``MambaManager.__init__`` asserts it)."""

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
        B = check_int("block_size", block_size, 1, _MAX_TOKENS)
        u = B if prefix_match_unit is None else prefix_match_unit
        u = check_int("prefix_match_unit", u, 1, B)
        if B % u:
            raise ValueError(f"prefix_match_unit={u} must divide block_size={B}")
        if retention is not None:
            retention = check_int("retention", retention, 0, _MAX_TOKENS)
            if retention % B:
                raise ValueError(f"retention must be a multiple of block_size={B}")
        self.block_size, self.unit = B, u
        self.fine = u < B  # partial_hash_hits_enabled
        self.chunk = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, _MAX_TOKENS)
        self.pool = BlockPool(check_int("num_blocks", num_blocks, 2, _MAX_BLOCKS), u)
        self.chain = HashChain(u)
        self.kv = KVGroup(self.pool, 0, B, None)
        self.state = StateGroup(self.pool, 1, B, retention)
        self._reqs: dict[str, _Request] = {}
        self._locked: Counter[int] = Counter()  # block id -> references held through handles

    def _find(self, hashes: list[int], max_len: int) -> tuple[list[Block], list[Block], BlockHit]:
        """``HybridKVCacheCoordinator.find_longest_cache_hit`` (one KV and one state group: one
        pass): -> the KV group's hit blocks, the state hit's blocks, the hit (KV cut to it)."""
        kv, kv_len = self.kv.find(hashes, max_len)
        st, hit = self.state.find(hashes, kv_len)
        B, shared = self.block_size, kv_len if kv_len > hit else 0
        ids, state = tuple(b.block_id for b in kv[: -(-hit // B)]), st[-1].block_id if st else None
        return kv, st, BlockHit(hit, kv_len, ids, state, len(st) - 1, bool(hit % B), shared)

    def lookup(self, tokens: Sequence[int]) -> BlockHit:
        """What a new request with these tokens would hit, read-only (``get_computed_blocks``:
        at most ``len(tokens) - 1`` tokens; the last one is recomputed for its logits)."""
        toks = _check_tokens(tokens, "tokens")
        return self._find(self.chain.peek(toks), len(toks) - 1)[2]

    # vLLM's request API ------------------------------------------------------------------
    def add(self, request_id: str, prompt: Sequence[int]) -> None:
        """Queue a request (``Request``); its lookup runs at its first ``step``."""
        if not isinstance(request_id, str) or request_id in self._reqs:
            raise ValueError(f"request_id must be a new str, got {request_id!r}")
        toks = _check_tokens(prompt, "prompt")
        self._reqs[request_id] = _Request(toks, self.chain.extend([], toks), len(toks))

    def _require_request(self, request_id: Any) -> _Request:
        req = self._reqs.get(request_id) if isinstance(request_id, str) else None
        if req is None:
            raise ValueError(f"request_id {request_id!r} is not in the cache")
        return req

    def append(self, request_id: str, token: int) -> None:
        """Feed back a decoded token (``Request.append_output_token_ids``)."""
        req = self._require_request(request_id)
        if len(req.tokens) >= _MAX_TOKENS:
            raise ValueError(f"a request holds at most {_MAX_TOKENS} tokens")
        req.tokens.append(check_int("token", token, 0))
        self.chain.extend(req.hashes, req.tokens)

    def new_step(self) -> None:  # MambaManager.new_step_starts; the last step's copies ran
        self._release_copies()
        self.state.this_step.clear()

    def _release_copies(self) -> None:
        """Both ends of each copy stay referenced until the step's last request is scheduled
        (``Scheduler.schedule``: ``take_kv_cache_block_copies``, ``_free_cow_retained_blocks``,
        synchronous): the KV group's copies, then the state's."""
        pairs, self.kv.copies, self.state.copies = self.kv.copies + self.state.copies, [], []
        self.pool.free_blocks([b for pair in pairs for b in pair])

    def deferred(self, tokens: Sequence[int]) -> bool:
        """A new request with these tokens waits a step: its state hit, keyed in this step, is
        not computed yet (``MambaManager.get_num_blocks_to_allocate``: cached_blocks_this_step)."""
        return self._waits(self.lookup(tokens))

    def _waits(self, hit: BlockHit) -> bool:
        block = hit.state_block
        return block is not None and self.pool.blocks[block].key in self.state.this_step

    def step(
        self, request_id: str, budget: int | None = None, *, new_step: bool = True
    ) -> Step | None:
        """Schedule the request's next chunk of at most ``budget`` tokens (None: the chunk
        budget): the lookup on its first step, the aligned cut, ``allocate_slots``. Several
        requests in one step: ``new_step`` once, each with ``new_step=False`` (the next
        ``new_step`` or ``finish`` releases their copies). None: the request waits (a first
        step's state hit keyed in this step, or a budget below the chunk budget cut to 0)."""
        req = self._require_request(request_id)
        if check_bool("new_step", new_step):
            self.new_step()
        B, u, first = self.block_size, self.unit, not req.computed
        queued = len(self.kv.copies), len(self.state.copies)
        kv_hit, st_hit, hit = self._find(req.hashes, len(req.tokens) - 1) if first else _NOT_FIRST
        if first and self._waits(hit):
            return None  # not scheduled this step (``deferred``)
        kv_hit = kv_hit[: len(hit.kv_blocks)]  # cut to the state hit
        start = req.computed + hit.tokens
        cap = self.chunk if budget is None else check_int("budget", budget, 1, self.chunk)
        want = min(cap, len(req.tokens) - start)
        if want <= 0:
            raise ValueError(f"request {request_id!r} has computed every token; append one")
        junction = hit.shared_prefix_boundary or req.junction
        n = aligned_split(
            start, want, len(req.tokens), req.prompt_len, B, u, self.fine, self.chunk, junction
        )
        if n <= 0:  # a budget below the chunk budget cut to nothing: the request waits
            return None
        end, kv, state = start + n, self.kv, self.state
        self.pool.log.clear()
        state.remove_skipped(request_id, start)  # the KV group frees nothing
        # KVCacheManager.allocate_slots: get_num_blocks_to_allocate (more than are free: vLLM
        # would not schedule the step, this model does not wait and raises), the hit taken,
        # new blocks, the new keys
        wanted = kv.num_to_allocate(request_id, end, kv_hit, start)
        wanted += state.num_to_allocate(request_id, end, st_hit, start)
        if wanted > len(self.pool.free):
            raise ValueError(
                f"num_blocks={len(self.pool.blocks)} is too small: {wanted} blocks needed, "
                f"{len(self.pool.free)} free"
            )
        if first:
            kv.add_hit(request_id, kv_hit, start)
            state.add_hit(request_id, st_hit, start)
        req.junction, req.computed = junction, end
        new = tuple(tuple(b.block_id for b in g.allocate(request_id, end)) for g in (kv, state))
        cacheable = end if self.fine else end // B * B  # HybridKVCacheCoordinator._align_cacheable
        tail = checkpoint_position(req.prompt_len, u, False, 0)  # the prompt's last boundary
        kv.cache(request_id, req.hashes, tail, cacheable)
        reach = (*replay_boundaries(req.prompt_len, B, False), junction)
        state.cache(request_id, req.hashes, tail, cacheable, reach)
        pairs = kv.copies[queued[0] :] + state.copies[queued[1] :]
        copies = tuple((a.block_id, b.block_id) for a, b in pairs)
        if new_step:  # the step schedules this request only
            self._release_copies()
        state_block = state.req_blocks[request_id][-(-end // B) - 1].block_id
        log = tuple(self.pool.log)
        return Step(start, end, hit if first else None, state_block, log, copies, new)

    def finish(self, request_id: str) -> None:
        """Free the request's blocks, each table tail first (``KVCacheManager.free``): keyed
        blocks stay cached (evictable), the rest are reused first."""
        self._require_request(request_id)
        self._release_copies()  # the step that queued them has ended
        del self._reqs[request_id]
        for group in (self.kv, self.state):
            self.pool.free_blocks(reversed(group.pop(request_id)))

    def serve(self, prompt: Sequence[int], outputs: Sequence[int] = ()) -> tuple[Step, ...]:
        """Run one request to its end: prefill ``prompt`` chunk by chunk, then compute each
        of ``outputs`` as a decoded token, then free it. -> its steps (the first has its hit)."""
        outs = _check_tokens(outputs, "outputs") if len(outputs) else []
        rid = "served"
        while rid in self._reqs:
            rid += "'"
        self.add(rid, prompt)
        steps: list[Step] = []
        try:
            for token in [None, *outs]:
                if token is not None:
                    self.append(rid, token)
                while not steps or steps[-1].end < len(self._reqs[rid].tokens):
                    steps.append(self.step(rid))  # type: ignore[arg-type]
        finally:
            self.finish(rid)
        return tuple(steps)

    def tables(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block tables (KV, state) as physical ids (0: the null block)."""
        self._require_request(request_id)
        return tuple(
            [b.block_id for b in g.req_blocks.get(request_id, ())] for g in (self.kv, self.state)
        )

    # the cache protocol -------------------------------------------------------------------
    def match_prefix(self, key: Any, *, touch: bool = True, split: bool = False) -> PrefixMatch:
        """``find_longest_cache_hit`` over all of ``key``: ``restore_at`` where KV and state
        agree (``state``: its state block; ``kv``: the KV block ids before it), ``token_match``
        the KV group's own hit. ``touch`` sends the hit's free blocks to the back of the free
        queue (evicted last); blocks are never split."""
        toks = _check_tokens(key, "key")
        check_bool("split", split)
        kv, st, h = self._find(self.chain.peek(toks), len(toks))
        if check_bool("touch", touch):
            self.pool.touch(kv + st)  # a reference taken and given back: the free ones go
            self.pool.free_blocks(kv + st)  # to the free queue's back (they are keyed)
        restore = _Handle(id(self), h.tokens, kv[: len(h.kv_blocks)] + st[-1:])
        branch, path = h.shared_prefix_boundary or None, _Handle(id(self), h.kv_tokens, kv)
        return PrefixMatch(
            h.kv_tokens, h.tokens, h.state_block, 0, h.kv_blocks, branch, h.partial, restore, path
        )

    def lock_handle(self, handle: CacheHandle, unlock: bool = False) -> None:
        """Take (or give back) one reference on each of the handle's blocks."""
        if not isinstance(handle, _Handle) or handle._cache_id != id(self):
            raise HandleError("handle must be a handle this cache's match_prefix returned")
        if [b.key for b in handle._blocks] != handle._keys:
            raise HandleError("handle is stale: one of its blocks was evicted")
        if check_bool("unlock", unlock):
            if handle._locks <= 0:
                raise HandleError("handle is not locked (unlock without lock, or twice)")
            self.pool.free_blocks(handle._blocks)
        else:
            self.pool.touch(handle._blocks)
        handle._locks += -1 if unlock else 1
        self._locked.update({b.block_id: -1 if unlock else 1 for b in handle._blocks})  # adds

    def insert_prefix(
        self, key: Any, kv: Any = None, states: Any = (), *, state_bytes: int = 0
    ) -> PrefixInsert:
        """vLLM keys blocks as a request computes them: inserting a prefix is serving ``key``
        as a prompt (``serve``). The table holds no payloads (the engine holds the blocks'
        contents): ``kv``, ``states`` stay empty. ``new``: the state keys registered."""
        if kv is not None or states or state_bytes:
            raise ValueError("kv, states: the block table keys blocks, it holds no payloads")
        steps = self.serve(key)
        new = tuple(sorted({t for st in steps for g, t, _ in st.registered if g == 1}))
        hit = steps[0].start  # the first step starts at its hit
        return PrefixInsert(hit, steps[-1].end - hit, new, (), 0, None)

    def read_kv(self, key: Any, length: int) -> tuple:
        """The KV block ids covering ``key[:length]`` (inside the KV group's hit)."""
        toks = _check_tokens(key, "key")
        blocks, kv_len = self.kv.find(self.chain.peek(toks), len(toks))
        n = check_int("length", length, 0, kv_len)
        return tuple(b.block_id for b in blocks[: -(-n // self.block_size)])

    def evict(self, kv_tokens: int = 0, *, states: int = 0, state_bytes: int = 0) -> Evicted:
        """Drop the keys of free cached blocks from the free queue's LRU end (as
        ``get_new_blocks`` does when it reuses them): state blocks, then KV blocks."""
        check_int("state_bytes", state_bytes, 0)  # states are blocks here: not sized
        n, keys = self.pool.evict_free(1, check_int("states", states, 0))
        want = -(-check_int("kv_tokens", kv_tokens, 0) // self.block_size)
        kv, more = self.pool.evict_free(0, want)
        return Evicted(n, 0, kv * self.block_size, keys + more, 0)

    @property
    def size_info(self) -> SizeInfo:
        """KV tokens of held / free cached KV blocks (state bytes: not modelled)."""
        held, free = self.kv.blocks()
        return SizeInfo(len(free) * self.block_size, len(held) * self.block_size, 0, 0)

    @property
    def kv_tokens(self) -> int:
        return sum(self.size_info[:2])

    state_bytes = 0  # a block is a page of the pool: the lab does not size it here

    @property
    def n_states(self) -> int:
        """State blocks held or cached."""
        return sum(map(len, self.state.blocks()))

    @property
    def n_nodes(self) -> int:
        """Prefix entries (keys) in the pool."""
        return sum(len(bs) for bs in self.pool.cached.values())

    def reset(self) -> int:
        """Drop every block and key (not while a request holds blocks). -> state blocks."""
        if self._reqs or any(self._locked.values()):
            raise ValueError("reset: requests or handles still hold blocks")
        n = self.n_states
        kw = {"num_blocks": len(self.pool.blocks), "max_num_batched_tokens": self.chunk}
        self.__init__(self.block_size, self.unit, retention=self.state.retention, **kw)
        return n

    def check_integrity(self) -> None:
        """Each block's references are its table entries, handle locks and queued copies, the
        free queue holds exactly the unreferenced blocks, every key names a block that has it."""
        refs = self._locked.copy()  # the null block's count is never checked
        for g in (self.kv, self.state):  # a queued copy's two ends; the request tables
            refs.update(b.block_id for t in [*g.copies, *g.req_blocks.values()] for b in t)
        self.pool.check_integrity(refs)

    def stats(self) -> SizeInfo:
        """The sizes (``export`` has the blocks, keys and the eviction count)."""
        return self.size_info

    def export(self) -> PoolSnapshot:
        """The pool as plain data: blocks, prefix entries, request tables, free order."""
        tables = {rid: tuple(map(tuple, self.tables(rid))) for rid in self._reqs}
        return self.pool.snapshot(self.chain.depth, self.block_size, tables)
