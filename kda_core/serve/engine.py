"""``Engine``: serves prompts on TinyHybrid through a prefix cache, for real.

The engine owns the model, the state pools (one shared pool for running and cached states;
INT8 checkpoints: a separate pool, as SGLang), the prefix cache (the KDA-aware radix tree the
policy's options shape, or vLLM's block table) and the policy, and only calls down: ``serve``
runs the one serving loop (``serve._loop``: schedule -> run -> post-process, nano-vllm's
``LLMEngine.step``), ``generate(prompt)`` is ``serve`` of one request with a ``Trace`` on it.
``cache=False`` computes everything from scratch; tokens and logits agree with the cached run
to rounding (tests: atol 1e-9) for every policy, strategy and budget. The walk-through with
SGLang references: docs/serving.md. Left out: sampling other than greedy, host tiers
(``kda_core.transfer`` hooks ``before_drop``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.cache.protocol import DroppedState, PrefixCache
from kda_core.cache.radix import RadixStateCache
from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.model import MAX_TOKENS, TinyHybrid, check_tokens
from kda_core.serve import _loop as loop
from kda_core.serve._args import (
    DEFAULT_POLICY,
    MAX_NEW_TOKENS,
    PAGE_SIZE,
    RESTORE_MODES,
    Parts,
    ServeConfig,
    check_block_cache,
    check_model,
    check_modes,
    check_policy_chunk,
    check_requests,
    make_policy,
    pool_sizes,
    prompt_tokens,
)
from kda_core.serve._graphs import check_graph_bs
from kda_core.serve._heap import keep_freed_memory
from kda_core.serve._loop import Loop
from kda_core.serve._pools import StatePools, copy_rows
from kda_core.serve._slots import MAX_SLOTS
from kda_core.serve._state import RequestState, Totals
from kda_core.serve._trace import Trace
from kda_core.serve._unified import make_unified
from kda_core.serve.report import (
    CachedCheckpoint,
    EngineStats,
    GenerateReport,
    ServeReport,
    StepRecord,
    StepRow,
)
from kda_core.serve.request import Request
from kda_core.serve.spec import SpecConfig

__all__ = [
    "DEFAULT_POLICY",
    "Engine",
    "EngineStats",
    "GenerateReport",
    "Request",
    "ServeReport",
    "StepRow",
    "StepRecord",
]


class Engine:
    """Serves prompts on TinyHybrid through a KDA-aware radix cache (see the module docstring).

    Args:
        policy: a ``kda_core.policy`` Policy (copied), a policy name, or None
            (``DEFAULT_POLICY``). Marconi's ``alpha="auto"`` stays at its starting 0 here
            (the tuning replays a trace: ``kda_core.sim`` runs it).
        cache: use the radix cache (False: every request computed from scratch).
        int8_checkpoints: park checkpoint states as INT8 in their own pool (conv windows stay
            native); the state pool then holds running states only.
        checkpoint_slots: the most checkpoints the tree holds, in [1, 4096] (None: as many as
            the shared pool has room for; with INT8, SGLang's ``2 * state_slots``).
        kv_budget: most MLA KV tokens the tree keeps (None: unlimited); LRU leaves are evicted
            after each request to get back under it.
        strategy: "no_buffer", "extra_buffer" (default), "extra_buffer_lazy" or "auto"
            (SGLang's resolution: extra_buffer with overlap, else no_buffer; the lab's KV page
            is one token). ``strategy_notes`` holds what SGLang would log for the resolution.
        chunk_size: prefill scheduler step in tokens, [1, 16384]; must suit the policy
            (e.g. vLLM align needs chunk_size >= block_size).
        restore: "exact" or "inconsistent" (the teaching mode, ``generate`` only).
        model: the TinyHybrid to serve (default ``TinyHybrid()``).
        state_slots: the one state pool for running and cached states, in [the slots SGLang
            reserves per request (``sizing.request_slots``: 3 / 5 / 4 by strategy), 4096];
            None: ``DEFAULT_STATE_SLOTS`` (256).
        overlap: SGLang's overlap scheduler: extra_buffer requests hold 2 ping-pong track
            slots and reserve 3 + 2; False: 1 track slot, 3 + 1. None (default): on, as in
            SGLang, except for no_buffer with the cache, which turns it off (True raises
            there, SGLang's assertion); extra_buffer_lazy requires it. See
            ``serve._args.check_modes`` and ``serve._lifecycle``.
        before_drop: called with a ``DroppedState`` (``state``: the (S, conv) arrays) before
            the tree drops a cached state: a lower tier may keep a copy.
        cuda_graph_bs: decode on fixed shapes (``serve._graphs``): the captured batch sizes
            (SGLang's ``cuda_graph_bs``; each in [1, 4096]); an all-decode step runs on the
            smallest one that holds it, the padding rows on the sink; the largest caps the
            running requests (``cuda_graph_max_bs``). None: eager decode.
        unified_memory: bytes of one buffer for the state slots (from the low end) and the MLA
            KV (from the high end), SGLang's ``--enable-unified-memory`` (``serve._unified``);
            admission and eviction under that one budget; ``serve``'s ``kv_tokens`` and
            ``state_slots`` are then the buffer's. None: the separate pools.
        block_cache: a ``kda_core.cache.vllm_blocks.VLLMBlockCache`` (owned by the engine
            from here on): the prefix cache is vLLM's block table instead of the radix tree,
            served by the same loop (``serve._blocks``); the policy, strategy, INT8 pool,
            ``kv_budget`` and ``unified_memory`` do not apply (refused when set).
        speculative: decode speculatively (ReplaySSM, ``serve.spec``): a dict of
            ``SpecConfig``'s fields (``draft`` "noisy" / "ngram" / a callable, ``draft_tokens``
            D, ``ring_len``, ``noise``, ``seed``). A decoding request verifies its pending token
            and D - 1 drafts in one runner step and commits the accepted prefix by exact replay;
            it hits and inserts like any other. None: one token per decode step.
    """

    def __init__(
        self,
        policy: Any = None,
        cache: bool = True,
        int8_checkpoints: bool = False,
        checkpoint_slots: int | None = None,
        *,
        kv_budget: int | None = None,
        strategy: str = "extra_buffer",
        chunk_size: int = 64,
        restore: str = "exact",
        model: TinyHybrid | None = None,
        state_slots: int | None = None,
        overlap: bool | None = None,
        before_drop: Callable[[DroppedState], Any] | None = None,
        cuda_graph_bs: Sequence[int] | None = None,
        unified_memory: int | None = None,
        block_cache: VLLMBlockCache | None = None,
        speculative: dict | None = None,
    ) -> None:
        self.policy = make_policy(policy)
        self.cache_on = check_bool("cache", cache)
        self.int8 = check_bool("int8_checkpoints", int8_checkpoints)
        self.strategy, self.overlap, self.restore_mode, self.strategy_notes = check_modes(
            strategy, overlap, restore, self.cache_on
        )
        self.chunk_size = check_int("chunk_size", chunk_size, 1, MAX_TOKENS)
        check_policy_chunk(self.policy, self.chunk_size)
        self.state_slots, ck = pool_sizes(
            state_slots, checkpoint_slots, self.strategy, self.overlap, self.int8
        )
        kvb = kv_budget
        self.kv_budget = None if kvb is None else check_int("kv_budget", kvb, 0, 1 << 40)
        self.model = check_model(model, before_drop)
        self._before_drop = before_drop
        self.blocks = check_block_cache(
            block_cache, self.cache_on, self.int8, self.kv_budget, unified_memory, restore
        )
        self.spec = SpecConfig.of(speculative)
        if self.spec is not None and self.blocks is not None:
            raise ValueError("speculative: not with block_cache (vLLM's spec blocks: not modelled)")
        # the policy names the options of the cache it runs on; the hooks are ours
        self.cache: PrefixCache = self.blocks or RadixStateCache(
            PAGE_SIZE,
            **self.policy.cache_options(),
            on_free_state=self._drop_cached,
            kv_slice=copy_rows,
            before_drop=None if before_drop is None else self._offer_dropped,
        )
        unified = make_unified(
            unified_memory,
            self.model,
            self.strategy,
            self.overlap,
            self.int8,
            state_slots,
            self._kv_in_use,
        )
        keep_freed_memory()  # once per process: the batched passes' temporaries stay paged in
        self.pools = StatePools(
            self.model, self.state_slots, ck, self.strategy, self.overlap, self.int8, unified
        )
        self.state_slots = self.pools.state_slots
        self.graph_bs = check_graph_bs(cuda_graph_bs)
        modes = (self.cache_on, self.strategy, self.int8, self.overlap, self.chunk_size)
        extras = (self.kv_budget, self.graph_bs, self.blocks is not None, self.spec)
        config = ServeConfig(*modes, *extras)
        self.parts = Parts(self.model, self.pools, self.cache, self.policy, config)
        self.loop = Loop(self.parts)
        self.totals = Totals()

    # -- the cache's hooks and the unified budget's KV figure (constructor arguments) -------
    def _drop_cached(self, slot: int, nbytes: int) -> None:
        self.pools.drop_cached(slot, nbytes)

    def _offer_dropped(self, d: DroppedState) -> None:
        """``before_drop`` sees the state as arrays (S, conv), not as a pool slot."""
        assert self._before_drop is not None
        self._before_drop(d._replace(state=self.pools.checkpoints.buffers(d.state)))

    def _kv_in_use(self) -> int:
        return self.loop.scheduler.kv_used()

    # -- requests ------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Any,
        max_new_tokens: int = 8,
        *,
        restore: str | None = None,
        step_replay: bool = False,
        record_states: bool = False,
        reference: bool = False,
        observe: Callable[[str, Engine], None] | None = None,
    ) -> GenerateReport:
        """Serve one prompt (text or token ids); greedy decode ``max_new_tokens`` in [1, 4096].

        ``restore`` overrides the engine's restore mode for this request; ``step_replay``
        replays one token per model call (a step record per token); ``record_states`` keeps the
        KDA states of every replay step (implies ``step_replay``); ``reference`` also runs the
        uncached model and reports the logits' distance to it. ``observe(stage, engine)`` is
        called at "restored" (the restore point is locked, nothing inserted yet) and "finished"
        (after insert and eviction, slots released) - e.g. to snapshot the tree.

        If anything raises mid-request, the request's slots, pending checkpoints and lock are
        released before the exception propagates (what it inserted in flight stays cached).
        """
        ids = prompt_tokens(prompt)
        n_new = check_int("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        mode = self.restore_mode if restore is None else restore
        if mode not in RESTORE_MODES or (self.blocks is not None and mode != "exact"):
            allowed = ("exact",) if self.blocks is not None else RESTORE_MODES
            raise ValueError(f"restore must be one of {allowed}, got {mode!r}")
        record_states = check_bool("record_states", record_states)
        step_replay = check_bool("step_replay", step_replay) or record_states
        check_bool("reference", reference)
        if observe is not None and not callable(observe):
            raise ValueError("observe must be callable or None")
        seen = None if observe is None else (lambda stage: observe(stage, self))
        r = RequestState(0, ids, n_new, 0)
        r.trace = Trace(mode, step_replay, record_states, reference, seen)
        r.stepwise = True  # the trace sees every step's state
        rep = self._serve([r], self._batch_tokens(None), None, None).reports[0]
        assert rep is not None
        return rep

    def serve(
        self,
        requests: Any,
        *,
        max_batch_tokens: int | None = None,
        max_running_requests: int | None = None,
        kv_tokens: int | None = None,
    ) -> ServeReport:
        """Serve ``Request``s concurrently (continuous batching; see ``kda_core/serve/``).

        Args:
            requests: a sequence of ``Request(prompt, max_new_tokens, arrival=0)``, at most
                4096; ``arrival`` is the scheduler step it arrives at (>= 0).
            max_batch_tokens: tokens per scheduler step, decodes included, in [1, 65536]
                (None: 4 x ``chunk_size``; the block table's ``max_num_batched_tokens``).
            max_running_requests: SGLang's ``--max-running-requests`` in [1, 4096]; the state
                pool caps it at ``sizing.max_running_requests(state_slots, strategy)`` and
                the report carries SGLang's capping message when it does.
            kv_tokens: the MLA KV token pool in [1, 2^40] shared by running requests and the
                tree (None: unlimited). A request needing more than all of it is rejected
                with an SGLang-style message; decodes that would overflow it retract requests.

        Every request's tokens and logits equal its own uncached ``generate`` (to rounding).
        """
        mbt = self._batch_tokens(max_batch_tokens)
        mrr = None
        if max_running_requests is not None:
            mrr = check_int("max_running_requests", max_running_requests, 1, MAX_SLOTS)
        kvt = None if kv_tokens is None else check_int("kv_tokens", kv_tokens, 1, 1 << 40)
        if kvt is not None and self.pools.unified is not None:
            raise ValueError("kv_tokens: with unified_memory the KV side is the buffer's")
        if kvt is not None and self.blocks is not None:
            raise ValueError("kv_tokens: the block table's KV is its blocks'")
        if self.restore_mode != "exact":
            raise ValueError("serve needs restore='exact' (the teaching mode is per request)")
        return self._serve(check_requests(requests), mbt, mrr, kvt)

    def _batch_tokens(self, max_batch_tokens: Any) -> int:
        b = self.blocks
        if max_batch_tokens is None:
            return b.chunk if b is not None else 4 * self.chunk_size
        # a block no wider than the chunk budget is prefilled in whole blocks
        least = b.block_size if b is not None and b.block_size <= b.chunk else 1
        return check_int("max_batch_tokens", max_batch_tokens, least, 1 << 16)

    def _serve(
        self, states: list[RequestState], mbt: int, mrr: int | None, kvt: int | None
    ) -> ServeReport:
        return loop.serve(
            self.parts,
            self.loop,
            states,
            self.totals,
            max_batch_tokens=mbt,
            max_running_requests=mrr,
            kv_tokens=kvt,
        )

    def adopt_checkpoint(
        self, tokens: list[int], mla_kv: np.ndarray, kda_state: np.ndarray, conv: np.ndarray
    ) -> bool:
        """Put a validated state (S [L, H, K, V], conv [L, W-1, D] and the MLA KV of ``tokens``)
        into the cache as a checkpoint at ``len(tokens)``; the next request restores from it.
        Call between requests. Returns False if no checkpoint slot can be made free."""
        if not self.cache_on:
            return False
        self._require_radix("adopt_checkpoint")
        ids = check_tokens(tokens, name="tokens")
        ck = self.pools.checkpoints
        ck.check_shapes(kda_state, conv)
        while not ck.can_allocate(1):
            if self.cache.evict(states=1).states == 0:
                return False
        slot = ck.store(np.asarray(kda_state), np.asarray(conv), "cache")
        res = self.cache.insert_prefix(ids, np.asarray(mla_kv), [(len(ids), slot)])
        if res.existed:  # the cache had a state there already: ours goes
            ck.free(slot)
        return True

    def cached_checkpoint(self, tokens: list[int]) -> CachedCheckpoint | None:
        """The checkpoint the cache holds exactly at ``len(tokens)`` (None: none there), read
        without touching the cache: its MLA KV, S, conv window, slot and the deepest
        checkpoint before it (``restore_at``). For a transfer (``kda_core.transfer``)."""
        self._require_radix("cached_checkpoint")
        ids = check_tokens(tokens, name="tokens")
        m = self.cache.match_prefix(ids, touch=False)
        if m.restore_at != len(ids) or not self.cache_on:
            return None
        S, conv = self.pools.checkpoints.buffers(m.state)
        parent = self.cache.match_prefix(ids[:-1], touch=False).restore_at if len(ids) > 1 else 0
        return CachedCheckpoint(m.kv, S, conv, m.state, parent)

    def _require_radix(self, name: str) -> None:
        if self.blocks is not None:
            raise ValueError(f"{name}: the block table's states are its blocks' (no transfer)")

    def restore_point(self, tokens: list[int]) -> int:
        """The deepest checkpoint boundary the cache holds on ``tokens`` (0: none); read-only."""
        ids = check_tokens(tokens, name="tokens", allow_empty=True)
        return self.cache.match_prefix(ids, touch=False).restore_at if ids else 0

    def clear(self) -> int:
        """Flush the cache between requests: every cached state and its checkpoint slot goes
        (shared pool or INT8 pool). -> slots freed. As SGLang's ``Scheduler.flush_cache``,
        refused while a request holds slots."""
        if self.pools.active.n_used:
            raise ValueError(
                "clear: cache not flushed because there are pending requests "
                f"({self.pools.active.n_used} state slots held)"
            )
        return self.cache.reset()

    # -- views ---------------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        """Totals over every finished request, and the pools and cache now."""
        ck = self.pools.checkpoints
        return EngineStats(
            requests=self.totals.requests,
            copies=ck.copies,
            donations=ck.donations,
            track_writes=self.pools.pingpong.track_writes,
            tree_states=self.cache.n_states,
            tree_nodes=self.cache.n_nodes,
            tree_kv_tokens=self.cache.kv_tokens,
            **self.totals.counts,
        )

    def check_integrity(self) -> None:
        """Pools, cache, and their agreement: the cache's states are exactly the checkpoint
        slots owned by "cache"; no request holds state slots between requests."""
        self.cache.check_integrity()
        blocks = self.blocks is not None  # the block table keeps its states in its blocks
        self.pools.check_integrity(
            [] if blocks else [v.state for v in self.cache.export() if v.has_state]
        )
