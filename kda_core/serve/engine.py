"""``Engine``: serves prompts on TinyHybrid through a KDA-aware radix cache, for real.

One request (``generate``, ``serve.generate.OneRequest``): match, lock, copy-on-write restore of
the deepest checkpoint, replay to the token match, chunked prefill, greedy decode, checkpoints at
the policy's positions (no_buffer snapshots, extra_buffer(_lazy) ping-pong track slots donated to
the checkpoint pool), insert, unlock, KV eviction. Many at once (``serve``, ``serve.loop``): a
scheduler batching chunked prefill and decode under a token budget over one shared state pool
(``state_slots``; INT8 checkpoints: a separate pool, 2 x by default), retraction under KV
pressure, overlap scheduling (``overlap``). ``cache=False`` computes everything from scratch;
tokens and logits agree with the cached run to rounding (tests: atol 1e-9) for every policy,
strategy and budget. ``restore="inconsistent"`` is the teaching mode (MLA at the token match,
KDA at the checkpoint, no replay: the logits drift). All cache calls go through
``serve.cache_ops``. The full walk-through with SGLang references: docs/serving.md.

Left out: sampling other than greedy, host tiers, speculative decoding (``serve.spec``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.cache.pool import (
    MAX_SLOTS,
    STRATEGIES,
    ActivePool,
    CheckpointPool,
    PoolStats,
    StateShape,
)
from kda_core.cache.protocol import DroppedState
from kda_core.cache.radix import RadixStateCache
from kda_core.model import (
    MAX_TOKENS,
    TinyHybrid,
    check_tokens,
)
from kda_core.serve.cache_ops import CacheOps
from kda_core.serve.engine_args import (
    DEFAULT_CHECKPOINT_SLOTS,
    DEFAULT_POLICY,
    MAX_NEW_TOKENS,
    check_policy_chunk,
    legacy_sizes,
    make_policy,
    prompt_tokens,
    shared_sizes,
)
from kda_core.serve.generate import OneRequest
from kda_core.serve.heap import keep_freed_memory
from kda_core.serve.loop import ServeReport, StepRow
from kda_core.serve.loop import serve as _serve
from kda_core.serve.pools import (
    ServePingPong,
    SharedBudget,
    share,
)
from kda_core.serve.report import EngineStats, GenerateReport, StepRecord
from kda_core.serve.request import Request

RESTORE_MODES: tuple[str, ...] = ("exact", "inconsistent")
PHASES: tuple[str, ...] = ("restore", "replay", "prefill", "decode")

__all__ = [
    "DEFAULT_CHECKPOINT_SLOTS",
    "DEFAULT_POLICY",
    "PHASES",
    "RESTORE_MODES",
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
        int8_checkpoints: park checkpoint states as INT8 (conv windows stay native).
        checkpoint_slots: checkpoint pool capacity in [1, 4096] (None:
            ``DEFAULT_CHECKPOINT_SLOTS`` = 256).
        active_slots: active pool capacity (None: the strategy's maximum, 1 or 3); at least
            the slots a request holds up front (1 / 3 / 2). ``extra_buffer_lazy`` with 2 slots
            never gets its on-demand second track slot: those tracks are skipped.
        kv_budget: most MLA KV tokens the tree keeps (None: unlimited); LRU leaves are evicted
            after each insert to get back under it.
        strategy: "no_buffer", "extra_buffer" (default) or "extra_buffer_lazy".
        chunk_size: prefill scheduler step in tokens, [1, 16384]; must suit the policy
            (e.g. vLLM align needs chunk_size >= block_size).
        restore: "exact" or "inconsistent" (teaching mode, see module docstring).
        model: the TinyHybrid to serve (default ``TinyHybrid()``).
        state_slots: one state pool of this many slots for running and cached states (INT8
            off; then ``active_slots`` / ``checkpoint_slots`` must be None), or the active pool
            size with ``int8_checkpoints`` (checkpoint pool: ``checkpoint_slots`` or 2 x this).
            In [slots SGLang reserves per request (3 / 5 / 4 by strategy), 4096]. None: the
            legacy separate pools.
        overlap: SGLang's overlap scheduler (default, as in SGLang): extra_buffer requests
            hold 2 ping-pong track slots and reserve 3 + 2; False: 1 track slot, 3 + 1
            (extra_buffer_lazy requires overlap). See ``serve.lifecycle``.
        before_drop: called with a ``DroppedState`` (``state``: the (S, conv) arrays) before
            the tree drops a cached state: a lower tier may keep a copy.
    """

    def __init__(
        self,
        policy: Any = None,
        cache: bool = True,
        int8_checkpoints: bool = False,
        checkpoint_slots: int | None = None,
        *,
        active_slots: int | None = None,
        kv_budget: int | None = None,
        strategy: str = "extra_buffer",
        chunk_size: int = 64,
        restore: str = "exact",
        model: TinyHybrid | None = None,
        state_slots: int | None = None,
        overlap: bool = True,
        before_drop: Callable[[DroppedState], Any] | None = None,
    ) -> None:
        self.policy = make_policy(policy)
        self.cache_on = check_bool("cache", cache)
        self.int8 = check_bool("int8_checkpoints", int8_checkpoints)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.strategy = strategy
        self.overlap = check_bool("overlap", overlap)
        if strategy == "extra_buffer_lazy" and not overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
        if restore not in RESTORE_MODES:
            raise ValueError(f"restore must be one of {RESTORE_MODES}, got {restore!r}")
        self.restore_mode = restore
        self.chunk_size = check_int("chunk_size", chunk_size, 1, MAX_TOKENS)
        check_policy_chunk(self.policy, self.chunk_size)
        self.state_slots = None
        if state_slots is not None:
            self.state_slots, ck, act = shared_sizes(
                state_slots, active_slots, checkpoint_slots, strategy, overlap, self.int8
            )
        else:
            ck, act = legacy_sizes(checkpoint_slots, active_slots, strategy, overlap)
        self.kv_budget = (
            None if kv_budget is None else check_int("kv_budget", kv_budget, 0, 1 << 40)
        )
        if model is not None and not isinstance(model, TinyHybrid):
            raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
        self.model = model or TinyHybrid()
        keep_freed_memory()  # once per process: the batched passes' temporaries stay paged in
        shape = StateShape.of(self.model)
        self.active = ActivePool(shape, act)
        self.checkpoints = CheckpointPool(shape, ck, int8=self.int8)
        if self.state_slots is not None and not self.int8:
            share(self.active, self.checkpoints, SharedBudget(self.state_slots))
        self.pingpong = ServePingPong(self.active, strategy, overlap)
        if before_drop is not None and not callable(before_drop):
            raise ValueError("before_drop must be callable or None")
        self.cache = CacheOps(self.policy, self.checkpoints, before_drop)
        self.tree: RadixStateCache = self.cache.tree  # read by apps and studies (snapshots)
        self._n = 0  # requests finished (stats)
        self._attempts = 0  # requests started (their slot owner names)
        self._serves = 0
        self._locked: Any = None
        self._tot = dict.fromkeys(
            (
                "state_hits",
                "token_hits",
                "prompt_tokens",
                "restored_tokens",
                "replayed_tokens",
                "prefilled_tokens",
                "decoded_tokens",
                "evicted_states",
                "evicted_kv_tokens",
                "checkpoints_skipped",
            ),
            0,
        )

    # -- helpers -------------------------------------------------------------------------------
    def _tokens(self, prompt: Any) -> list[int]:
        return prompt_tokens(prompt)

    def _ckpt_slot(self) -> tuple[bool, int]:
        """Make room for one checkpoint: evict through the policy. -> (ok, states evicted)."""
        evicted = 0
        while not self.checkpoints.can_allocate(1):
            if not self.cache_on:
                return False, evicted
            n = self.cache.evict_one_state()
            if n == 0:
                return False, evicted
            evicted += n
        return True, evicted

    def _empty_kv(self) -> np.ndarray:
        c = self.model.config
        return np.zeros((0, len(self.model.mla_layers), c.mla_latent))

    # -- the request ---------------------------------------------------------------------------
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
        called at "restored" (the restore node is locked, nothing inserted yet) and "finished"
        (after insert and eviction, slots released) - e.g. to snapshot the tree.

        If anything raises mid-request, the request's slots, pending checkpoints and lock are
        released before the exception propagates (the tree is left as it was).
        """
        try:
            return self._generate(
                prompt, max_new_tokens, restore, step_replay, record_states, reference, observe
            )
        except BaseException:
            self._abort()
            raise

    def _abort(self) -> None:
        rid = f"req{self._attempts}"
        for slot, owner in self.active.owned().items():
            if owner in (rid, rid + ":track"):
                self.active.free(slot)
        for slot, owner in self.checkpoints.owned().items():
            if owner == rid:
                self.checkpoints.free(slot)
        if self._locked is not None:
            self.cache.unlock(self._locked)
            self._locked = None

    def _generate(
        self,
        prompt: Any,
        max_new_tokens: int,
        restore: str | None,
        step_replay: bool,
        record_states: bool,
        reference: bool,
        observe: Callable[[str, Engine], None] | None,
    ) -> GenerateReport:
        """The body of :meth:`generate` (arguments and defaults as documented there)."""
        ids, n_new, mode, step_replay, record_states = self._check_generate(
            prompt, max_new_tokens, restore, step_replay, record_states, reference, observe
        )
        one = OneRequest(self, ids, n_new, mode, step_replay, record_states, reference, observe)
        rep = one.run()
        self._n += 1
        return rep

    def _check_generate(
        self, prompt, max_new_tokens, restore, step_replay, record_states, reference, observe
    ) -> tuple[list[int], int, str, bool, bool]:
        """:meth:`generate`'s arguments, validated once. -> (ids, n_new, restore mode,
        step_replay, record_states)."""
        ids = self._tokens(prompt)
        n_new = check_int("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
        mode = self.restore_mode if restore is None else restore
        if mode not in RESTORE_MODES:
            raise ValueError(f"restore must be one of {RESTORE_MODES}, got {mode!r}")
        record_states = check_bool("record_states", record_states)
        step_replay = check_bool("step_replay", step_replay) or record_states
        check_bool("reference", reference)
        if observe is not None and not callable(observe):
            raise ValueError("observe must be callable or None")
        return ids, n_new, mode, step_replay, record_states

    # -- many requests -------------------------------------------------------------------------
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
                (None: 4 x ``chunk_size``).
            max_running_requests: SGLang's ``--max-running-requests`` in [1, 4096]; the state
                pool caps it at ``sizing.max_running_requests(state_slots, strategy)`` and
                the report carries SGLang's capping message when it does.
            kv_tokens: the MLA KV token pool in [1, 2^40] shared by running requests and the
                tree (None: unlimited). A request needing more than all of it is rejected
                with an SGLang-style message; decodes that would overflow it retract requests.

        Every request's tokens and logits equal its own uncached ``generate`` (to rounding).
        An Engine built without ``state_slots`` keeps the legacy separate pools, whose active
        pool holds one request's slots (unless ``active_slots`` says more): it serves one
        request at a time. Pass ``state_slots`` for the one shared pool that SGLang sizes.
        """
        mbt = 4 * self.chunk_size if max_batch_tokens is None else max_batch_tokens
        mbt = check_int("max_batch_tokens", mbt, 1, 1 << 16)
        mrr = None
        if max_running_requests is not None:
            mrr = check_int("max_running_requests", max_running_requests, 1, MAX_SLOTS)
        kvt = None if kv_tokens is None else check_int("kv_tokens", kv_tokens, 1, 1 << 40)
        if self.restore_mode != "exact":
            raise ValueError("serve needs restore='exact' (the teaching mode is per request)")
        return _serve(self, requests, max_batch_tokens=mbt, max_running_requests=mrr, kv_tokens=kvt)

    def _count(self, r: GenerateReport) -> None:  # one served request into ``stats``
        self._n += 1
        self._count_totals(r)

    def _count_totals(self, r: GenerateReport) -> None:
        t = self._tot
        t["state_hits"] += r.restore_at > 0
        t["token_hits"] += r.token_match > 0
        t["prompt_tokens"] += len(r.prompt)
        t["restored_tokens"] += r.restore_at
        t["replayed_tokens"] += r.replayed
        t["prefilled_tokens"] += r.prefilled
        t["decoded_tokens"] += r.decoded
        t["evicted_states"] += r.evicted_states
        t["evicted_kv_tokens"] += r.evicted_kv_tokens
        t["checkpoints_skipped"] += r.checkpoints_skipped

    # -- hook for kda_core.transfer (restoring a state made elsewhere) ---------------------------
    def adopt_checkpoint(
        self, tokens: list[int], mla_kv: np.ndarray, kda_state: np.ndarray, conv: np.ndarray
    ) -> bool:
        """Put a validated state (S [L, H, K, V], conv [L, W-1, D] and the MLA KV of ``tokens``)
        into the tree as a checkpoint at ``len(tokens)``; the next ``generate`` restores from it.
        Call between requests. Returns False if no checkpoint slot can be made free."""
        if not self.cache_on:
            return False
        ids = check_tokens(tokens, name="tokens")
        self.checkpoints.check_shapes(kda_state, conv)
        ok, _ = self._ckpt_slot()
        if not ok:
            return False
        slot = self.checkpoints.store(np.asarray(kda_state), np.asarray(conv), "tree")
        self.cache.insert(ids, np.asarray(mla_kv), [(len(ids), slot)])
        return True

    # -- views ---------------------------------------------------------------------------------
    def pool_stats(self) -> PoolStats:
        ck = self.checkpoints
        return PoolStats(
            active_capacity=self.active.capacity,
            active_used=self.active.n_used,
            checkpoint_capacity=ck.capacity,
            checkpoint_used=ck.n_used,
            checkpoint_bytes=ck.used_bytes,
            copies=ck.copies,
            donations=ck.donations,
            loads=ck.loads,
            track_writes=self.pingpong.track_writes,
            int8=ck.int8,
        )

    def stats(self) -> EngineStats:
        t = self._tot
        ck = self.checkpoints
        return EngineStats(
            requests=self._n,
            copies=ck.copies,
            donations=ck.donations,
            track_writes=self.pingpong.track_writes,
            tree_states=self.cache.n_states,
            tree_nodes=self.cache.n_nodes,
            tree_kv_tokens=self.cache.kv_tokens,
            **t,
        )

    def check_integrity(self) -> None:
        """Pools, tree, and their agreement: the tree's states are exactly the checkpoint slots
        owned by "tree"; no request holds active slots between requests."""
        self.active.check_integrity()
        self.checkpoints.check_integrity()
        self.cache.check_integrity()
        if self.active.n_used:
            raise AssertionError(f"engine: {self.active.n_used} active slots leaked")
