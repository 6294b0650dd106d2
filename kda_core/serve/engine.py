"""``Engine``: serves prompts on TinyHybrid through a prefix cache, for real.

The engine owns the model, the state pools, the prefix cache (the radix tree the policy's
options shape, or vLLM's block table) and the policy, and only calls down: ``serve`` runs the
one serving loop (``serve._loop``, nano-vllm's ``LLMEngine.step``); ``generate`` is ``serve``
of one request. Tokens and logits equal the uncached run (``cache=False``) to rounding (tests:
atol 1e-9). docs/serving.md. Left out: sampling other than greedy, host tiers (``kda_core.
transfer`` hooks ``before_drop``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.cache.protocol import DroppedState, PrefixCache
from kda_core.cache.radix import RadixStateCache
from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.model import MAX_TOKENS, TinyHybrid, check_tokens
from kda_core.serve._args import (
    DEFAULT_POLICY,
    PAGE_SIZE,
    RESTORE_MODES,
    Parts,
    Request,
    ServeConfig,
    check_block_cache,
    check_model,
    check_modes,
    check_policy_chunk,
    check_requests,
    check_spec,
    make_policy,
    pool_sizes,
    request_state,
)
from kda_core.serve._graphs import check_graph_bs
from kda_core.serve._heap import keep_freed_memory
from kda_core.serve._loop import Loop
from kda_core.serve._pools import StatePools, copy_rows
from kda_core.serve._slots import MAX_SLOTS, make_unified
from kda_core.serve._state import Trace
from kda_core.serve.report import CachedCheckpoint, EngineStats, GenerateReport, ServeReport

__all__ = ["DEFAULT_POLICY", "Engine", "GenerateReport", "Request"]


class Engine:
    """Serves prompts on TinyHybrid through a KDA-aware prefix cache (see the module docstring).

    Args:
        policy: a ``kda_core.policy`` Policy (copied), a name, or None (``DEFAULT_POLICY``).
            Marconi's ``alpha="auto"`` stays at 0 (its tuning replays a trace: ``kda_core.sim``).
        cache: False computes every request from scratch.
        int8_checkpoints: checkpoints as INT8 in their own pool (conv windows stay native).
        checkpoint_slots: most checkpoints cached, [1, 4096] (None: the shared pool's room;
            with INT8, SGLang's ``2 * state_slots``).
        kv_budget: most MLA KV tokens cached (None: unlimited); LRU leaves go after each request.
        strategy: "no_buffer", "extra_buffer" (default), "extra_buffer_lazy" or "auto"
            (resolved as SGLang does, ``strategy_notes`` its log lines: ``_args.check_modes``).
        chunk_size: prefill step in tokens, [1, 16384]; must suit the policy.
        restore: "exact" or "inconsistent" (the teaching mode, ``generate`` only).
        model: the TinyHybrid to serve (default ``TinyHybrid()``).
        state_slots: the one pool for running and cached states, from what SGLang reserves per
            request (``sizing.request_slots``) to 4096; None: ``DEFAULT_STATE_SLOTS``.
        overlap: SGLang's overlap scheduler (2 ping-pong track slots instead of 1). None: on,
            except no_buffer with the cache (True raises there, SGLang's assertion).
        before_drop: called with a ``DroppedState`` (``state``: the (S, conv) arrays) before a
            cached state is dropped: a lower tier may keep a copy.
        cuda_graph_bs: decode on fixed shapes (SGLang's ``cuda_graph_bs``, ``serve._graphs``);
            the largest caps the running requests. None: eager decode.
        unified_memory: bytes of one buffer for state slots and MLA KV (SGLang's
            ``--enable-unified-memory``, ``serve._slots``). None: separate pools.
        block_cache: a ``VLLMBlockCache`` (owned from here on) as the prefix cache, served by the
            same loop (``serve._blocks``); the radix-only options are refused with it.
        speculative: ``SpecConfig``'s fields as a dict (ReplaySSM, ``serve.spec``): a decoding
            request verifies its pending token and D - 1 drafts in one step and commits the
            accepted prefix by exact replay. None: one token per decode step. With the cache and
            an extra-buffer strategy the sglang policy's ``track_interval`` must be >= D (SGLang's
            start-up assertion)."""

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
        # without the radix cache SGLang reserves one state slot per request, whatever the
        # strategy (kv_cache_configurator.py ``_calculate_mamba_ratio``: ``sizing`` "radix_off")
        slots = self.strategy if self.cache_on else "radix_off"
        n, ck = pool_sizes(state_slots, checkpoint_slots, slots, self.overlap, self.int8)
        kv_budget = None if kv_budget is None else check_int("kv_budget", kv_budget, 0, 1 << 40)
        self.model = check_model(model, before_drop)
        self._before_drop = before_drop
        self.blocks = check_block_cache(
            block_cache, self.cache_on, self.int8, kv_budget, unified_memory, restore
        )
        spec = check_spec(
            speculative, self.policy, self.strategy, self.cache_on, self.blocks is not None
        )
        unified = make_unified(
            unified_memory,
            self.model,
            slots,
            self.overlap,
            self.int8,
            state_slots,
            lambda: self.loop.scheduler.kv_used(),  # the KV in use, read when a slot is taken
        )
        keep_freed_memory()  # once per process: the batched passes' temporaries stay paged in
        self.pools = StatePools(self.model, n, ck, slots, self.overlap, self.int8, unified)
        self.state_slots = self.pools.state_slots  # a unified buffer sets it (``serve._slots``)
        # the policy names the options of the cache it runs on; the hooks are the pools'
        self.cache: PrefixCache = self.blocks or RadixStateCache(
            PAGE_SIZE,
            **self.policy.cache_options(),
            on_free_state=self.pools.drop_cached,
            kv_slice=copy_rows,
            before_drop=None if before_drop is None else self._offer_dropped,
        )
        self.graph_bs = check_graph_bs(cuda_graph_bs)
        modes = (self.cache_on, slots, self.int8, self.overlap, self.chunk_size)
        extras = (kv_budget, self.graph_bs, self.blocks is not None, spec)
        config = ServeConfig(*modes, *extras)
        self.loop = Loop(Parts(self.model, self.pools, self.cache, self.policy, config))

    def _offer_dropped(self, d: DroppedState) -> None:
        """``before_drop`` sees the state as arrays (S, conv), not as a pool slot."""
        assert self._before_drop is not None
        self._before_drop(d._replace(state=self.pools.checkpoints.buffers(d.state)))

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

        ``restore`` overrides the restore mode; ``step_replay`` replays one token per model call;
        ``record_states`` keeps every replay step's KDA states (implies ``step_replay``);
        ``reference`` also runs the uncached model and reports the logits' distance.
        ``observe(stage, engine)`` is called at "restored" (restore point locked, nothing inserted)
        and "finished". If anything raises mid-request, its slots, pending checkpoints and lock are
        released first (what it inserted in flight stays cached)."""
        r = request_state(0, prompt, max_new_tokens)
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
        r.trace = Trace(mode, step_replay, record_states, reference, seen)
        r.stepwise = True  # the trace sees every step's state
        rep = self.loop.serve([r], self._batch_tokens(None), None, None).reports[0]
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
        """Serve ``Request``s with continuous batching (``arrival``: the step it arrives at).

        ``max_batch_tokens``: tokens per step, decodes included, [1, 65536] (None: 4 x
        ``chunk_size``; the block table's ``max_num_batched_tokens``).
        ``max_running_requests``: SGLang's ``--max-running-requests``, capped by the state
        pool (``sizing.max_running_requests``; the report carries SGLang's message).
        ``kv_tokens``: the MLA KV pool shared by running requests and the cache (None:
        unlimited); a request needing more than all of it is rejected, decodes that would
        overflow it retract requests. Every request's tokens and logits equal its own
        uncached ``generate`` (to rounding)."""
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
        return self.loop.serve(check_requests(requests), mbt, mrr, kvt)

    def _batch_tokens(self, max_batch_tokens: Any) -> int:
        b = self.blocks
        if max_batch_tokens is None:
            return b.chunk if b is not None else 4 * self.chunk_size
        # a block no wider than the chunk budget is prefilled in whole blocks
        least = b.block_size if b is not None and b.block_size <= b.chunk else 1
        return check_int("max_batch_tokens", max_batch_tokens, least, 1 << 16)

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
        ck.shape.check(kda_state, conv)
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
            copies=ck.copies,
            donations=ck.donations,
            track_writes=self.pools.pingpong.track_writes,
            tree_states=self.cache.n_states,
            tree_nodes=self.cache.n_nodes,
            tree_kv_tokens=self.cache.kv_tokens,
            **self.loop.totals,
        )

    def check_integrity(self) -> None:
        """Pools, cache, and their agreement: the cache's states are exactly the checkpoint
        slots owned by "cache"; no request holds state slots between requests."""
        self.cache.check_integrity()
        blocks = self.blocks is not None  # the block table keeps its states in its blocks
        self.pools.check_integrity(
            [] if blocks else [v.state for v in self.cache.export() if v.has_state]
        )
