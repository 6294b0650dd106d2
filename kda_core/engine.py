"""A real caching engine for TinyHybrid: match, restore, replay, prefill, decode, track, donate.

Per request (``Engine.generate``), following SGLang's MambaRadixCache flow (engines.md §1.3-1.9,
seed §3-§5):

1. tokenize (text -> UTF-8 bytes, or a token list), open the request's active slots
   (``PingPong.open``: 1 / 3 / 2 slots for no_buffer / extra_buffer / extra_buffer_lazy);
2. ``match(prompt[:-1])`` (the last prompt token is always computed: its logits are the first
   output) -> ``token_match`` and ``restore_at`` (deepest checkpoint on the path);
3. restore at ``restore_at``: lock the node's state, copy-on-write the checkpoint into the
   private active slot (INT8: dequantize), MLA KV from the tree for exactly ``[0,
   restore_at)`` - never further, so every branch stands at one boundary;
4. replay ``[restore_at, token_match)`` and prefill ``[token_match, len(prompt))`` in scheduler
   steps of ``chunk_size`` tokens counted from ``restore_at``, cut at checkpoint positions;
5. greedy decode ``max_new_tokens`` tokens (the last one is not consumed);
6. checkpoints at the policy's positions (``policy.checkpoint_positions`` with the consumed
   length as ``total_len``): no_buffer snapshots (copy) mid-request and donates its active slot
   at the request end; extra_buffer(_lazy) writes ping-pong track slots and donates them (no
   copy) to the checkpoint pool when overwritten and at the end;
7. on finish insert the consumed tokens, their MLA KV and the checkpoints into the tree (the
   tree cuts the key at the deepest checkpoint); checkpoints the tree already had are freed;
8. under pressure: a full checkpoint pool evicts one state through the policy and retries
   (a checkpoint is skipped if nothing is evictable); a KV budget evicts LRU leaves after
   insert.

``cache=False`` runs the same steps without the tree (prefill in ``chunk_size`` chunks from 0):
tokens and logits agree with the cached run to rounding (tests: atol 1e-9) for every policy and
budget. ``int8_checkpoints=True`` parks states as INT8: the restore error is reported
(``restore_error``) and, with ``reference=True``, the logits' distance to an uncached run.
``restore="inconsistent"`` (teaching mode) restores the MLA KV at the token match but KDA at the
checkpoint and skips the replay: the logits drift (and nothing is inserted).

Trace: one ``TraceStep`` per model call (per token during replay when ``step_replay``), with
the state norm and, for the restore and replay steps, two relative Frobenius distances of all
KDA states ``S [L, H, K, V]`` (conv windows not included):

* ``dist_to_match`` - to the state this request reaches at the token match by replaying from
  the restored checkpoint; exactly 0 at the match by construction. It equals the uncached
  state there only when the restore is exact: with ``int8_checkpoints`` the replayed state
  carries the quantization error of the restored checkpoint.
* ``dist_to_uncached`` - to the state an uncached run holds at the token match (the prompt's
  first ``token_match`` tokens prefilled from zero: one extra prefill, computed only when
  ``step_replay`` / ``record_states`` is requested; nan otherwise). At the match it is ~1e-16
  for exact restores and the propagated INT8 error for INT8 restores.

``record_states`` keeps the stacked KDA states of every replay step.

Defaults: ``checkpoint_slots=None`` means ``DEFAULT_CHECKPOINT_SLOTS`` (256; TinyHybrid's
native checkpoint is ~0.25 MB, so at most ~64 MB however long a session runs; up to
``MAX_SLOTS`` = 4096 on request). Policies are copied at construction (two engines built from
one Policy object never share mutable state such as Marconi's counters). Marconi's
``alpha="auto"`` is simulator-only (``kda_core.sim`` runs the tuning replays): the engine
rejects it. The policy's placement is checked against ``chunk_size`` at construction.

Many requests at once: ``Engine.serve(requests)`` (``kda_core/serve/``: a scheduler that batches
chunked prefill and decode under a token budget, admits by state slots, retracts under KV
pressure, and a runner that executes each step as one packed TinyHybrid pass). With
``state_slots`` the running and cached states share one pool of that many slots (SGLang's
``MambaPool``; INT8 off) or, with ``int8_checkpoints``, the active pool has ``state_slots``
and the INT8 checkpoint pool ``checkpoint_slots`` (default 2 x ``state_slots``, SGLang's
``int8_mamba_ckpt_size`` default). Without ``state_slots`` the pools are the legacy pair sized
by ``active_slots`` / ``checkpoint_slots``, and ``serve`` runs as many requests at once as the
active pool holds.

Left out: overlap scheduling, sampling other than greedy, host tiers, speculative decoding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from kda_core import policy as policy_mod
from kda_core import sizing
from kda_core._checks import check_int
from kda_core.model import (
    MAX_TOKENS,
    TOKENIZER_FINGERPRINT,
    VOCAB,
    KDALayerState,
    ModelState,
    TinyHybrid,
    check_tokens,
    decode,
    encode,
)
from kda_core.pool import (
    MAX_SLOTS,
    STRATEGIES,
    ActivePool,
    CheckpointPool,
    PoolStats,
    RequestSlots,
    StateShape,
)
from kda_core.radix import RadixStateCache
from kda_core.serve.loop import ServeReport, StepRow
from kda_core.serve.loop import serve as _serve
from kda_core.serve.pools import (
    ServePingPong,
    SharedBudget,
    int8_checkpoint_slots,
    share,
    slots_held,
    slots_up_front,
)
from kda_core.serve.request import Request

RESTORE_MODES: tuple[str, ...] = ("exact", "inconsistent")
MAX_NEW_TOKENS = 4096
PHASES: tuple[str, ...] = ("restore", "replay", "prefill", "decode")
DEFAULT_POLICY = {"name": "sglang", "grid": 16, "track_interval": 32}
"""SGLang's placement scaled to the tiny model: grid 16 (instead of 64), decode every 32."""
DEFAULT_CHECKPOINT_SLOTS = 256
"""Checkpoint pool capacity when ``checkpoint_slots`` is None (bounds a long app session)."""

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
    "TraceStep",
]


class TraceStep(NamedTuple):
    """One model call. ``pos`` = boundary after it; ``n`` tokens consumed; ``token`` the last."""

    pos: int
    n: int
    token: int
    phase: str
    state_norm: float
    dist_to_match: float  # to the replayed state at the token match; nan outside the replay
    dist_to_uncached: float = float("nan")  # to the uncached state there (step tracing only)


@dataclass(slots=True)
class GenerateReport:
    """What one request did. Lengths in tokens; ``logits`` [n_new, vocab] float64."""

    prompt: tuple[int, ...]
    tokens: list[int]
    text: str
    logits: np.ndarray
    token_match: int
    restore_at: int
    replayed: int
    prefilled: int
    decoded: int
    restore: str
    planned_checkpoints: tuple[int, ...]
    checkpoints: tuple[int, ...]  # positions actually parked in the checkpoint pool
    checkpoints_created: int  # new states in the tree after insert
    checkpoints_existed: int  # the tree had them already (our copy freed)
    checkpoints_skipped: int  # no checkpoint slot even after eviction
    copies: int
    donations: int
    track_writes: int
    evicted_states: int
    evicted_kv_tokens: int
    restore_error: tuple[float, float]  # (max |S - S'|, rel Frobenius) of the restored ckpt
    trace: tuple[TraceStep, ...]
    replay_states: np.ndarray | None  # [restore_at..token_match, L, H, K, V] if recorded
    ref_logits: np.ndarray | None  # uncached run's logits (reference=True)
    ref_max_abs_diff: float | None  # max |logits - ref_logits|
    pools: PoolStats
    seconds: float

    @property
    def consumed(self) -> int:
        """Tokens whose state the request ends at: prompt + all generated but the last."""
        return len(self.prompt) + max(len(self.tokens) - 1, 0)

    @property
    def saved(self) -> int:
        """Prompt tokens not recomputed (restored from a checkpoint)."""
        return self.restore_at


@dataclass(slots=True, frozen=True)
class EngineStats:
    requests: int
    state_hits: int  # requests restored from a checkpoint
    token_hits: int  # requests with a token match > 0
    prompt_tokens: int
    restored_tokens: int
    replayed_tokens: int
    prefilled_tokens: int
    decoded_tokens: int
    copies: int
    donations: int
    track_writes: int
    evicted_states: int
    evicted_kv_tokens: int
    checkpoints_skipped: int
    tree_states: int
    tree_nodes: int
    tree_kv_tokens: int

    @property
    def prefill_saved_fraction(self) -> float:
        """Fraction of prompt tokens not computed (restored)."""
        return self.restored_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def _kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    return payload[start:stop].copy()


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    return check_int(name, value, lo, hi)


def _norm(S: np.ndarray) -> float:
    return float(np.sqrt(np.sum(S * S)))


def _rel(S: np.ndarray, target: np.ndarray) -> float:
    """||S - target||_F / ||target||_F (the absolute distance when target is zero)."""
    den = _norm(target)
    d = _norm(S - target)
    return d / den if den > 0 else d


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
    ) -> None:
        if policy is None:
            params = dict(DEFAULT_POLICY)
            policy = policy_mod.make(params.pop("name"), **params)
        elif isinstance(policy, str):
            policy = policy_mod.make(policy)
        elif isinstance(policy, policy_mod.Policy):
            policy = replace(policy)  # a fresh copy: per-run state is never shared
        else:
            raise ValueError(
                f"policy must be a Policy, one of {policy_mod.POLICY_NAMES} or None, "
                f"got {type(policy).__name__}"
            )
        self.policy = policy
        self.cache_on = _bool(cache, "cache")
        self.int8 = _bool(int8_checkpoints, "int8_checkpoints")
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.strategy = strategy
        self.overlap = _bool(overlap, "overlap")
        if strategy == "extra_buffer_lazy" and not overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
        if restore not in RESTORE_MODES:
            raise ValueError(f"restore must be one of {RESTORE_MODES}, got {restore!r}")
        self.restore_mode = restore
        self.chunk_size = _int(chunk_size, "chunk_size", 1, MAX_TOKENS)
        self._check_policy_chunk()
        self.state_slots = None
        if state_slots is not None:
            ck, act = self._shared_sizes(state_slots, active_slots, checkpoint_slots, strategy)
        else:
            ck = DEFAULT_CHECKPOINT_SLOTS if checkpoint_slots is None else checkpoint_slots
            ck = _int(ck, "checkpoint_slots", 1, MAX_SLOTS)
            need = slots_up_front(strategy, overlap)
            act = slots_held(strategy, overlap) if active_slots is None else active_slots
            act = _int(act, "active_slots", 1, MAX_SLOTS)
            if act < need:
                raise ValueError(
                    f"active_slots must be >= {need} for strategy {strategy!r} "
                    f"(the slots one request holds up front), got {act}"
                )
        self.kv_budget = None if kv_budget is None else _int(kv_budget, "kv_budget", 0, 1 << 40)
        if model is not None and not isinstance(model, TinyHybrid):
            raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
        self.model = model or TinyHybrid()
        shape = StateShape.of(self.model)
        self.active = ActivePool(shape, act)
        self.checkpoints = CheckpointPool(shape, ck, int8=self.int8)
        if self.state_slots is not None and not self.int8:
            share(self.active, self.checkpoints, SharedBudget(self.state_slots))
        self.pingpong = ServePingPong(self.active, strategy, overlap)
        self.tree: RadixStateCache = self.policy.make_cache(
            1, on_free_state=self._on_free_state, kv_slice=_kv_slice
        )
        self._n = 0
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

    def _shared_sizes(
        self, state_slots: Any, active_slots: Any, checkpoint_slots: Any, strategy: str
    ) -> tuple[int, int]:
        """(checkpoint pool, active pool) capacities for ``state_slots``."""
        spr = sizing.slots_per_request(strategy, self.overlap)
        n = _int(state_slots, "state_slots", spr, MAX_SLOTS)
        if active_slots is not None:
            raise ValueError("active_slots must be None when state_slots is given")
        self.state_slots = n
        if not self.int8:
            if checkpoint_slots is not None:
                raise ValueError(
                    "checkpoint_slots must be None when state_slots is given without INT8 "
                    "checkpoints (running and cached states share the state_slots pool)"
                )
            return n, n
        return int8_checkpoint_slots(n, checkpoint_slots), n

    def _check_policy_chunk(self) -> None:
        """Place checkpoints once for the longest prompt: a policy that cannot work with this
        ``chunk_size`` fails here, not on every request."""
        P = MAX_TOKENS - MAX_NEW_TOKENS
        try:
            self.policy.checkpoint_positions(
                P, None, total_len=MAX_TOKENS - 1, chunk_size=self.chunk_size, page_size=1
            )
        except ValueError as e:
            raise ValueError(
                f"chunk_size={self.chunk_size} does not suit policy {self.policy.name!r}: {e}"
            ) from None

    # -- callbacks -------------------------------------------------------------------------------
    def _on_free_state(self, payload: Any, nbytes: int) -> None:
        self.checkpoints.free(payload)

    # -- helpers -------------------------------------------------------------------------------
    def _tokens(self, prompt: Any) -> list[int]:
        if isinstance(prompt, str):
            if not prompt:
                raise ValueError("prompt must not be empty")
            ids = encode(prompt)
        elif isinstance(prompt, (list, tuple, np.ndarray)):
            ids = check_tokens(prompt, name="prompt")
        else:
            raise ValueError(
                f"prompt must be a str or a list of token ids, got {type(prompt).__name__}"
            )
        if len(ids) > MAX_TOKENS - MAX_NEW_TOKENS:
            raise ValueError(
                f"prompt: at most {MAX_TOKENS - MAX_NEW_TOKENS} tokens, got {len(ids)}"
            )
        return ids

    def _ckpt_slot(self) -> tuple[bool, int]:
        """Make room for one checkpoint: evict through the policy. -> (ok, states evicted)."""
        evicted = 0
        while not self.checkpoints.can_allocate(1):
            if not self.cache_on:
                return False, evicted
            r = self.policy.evict_states(self.tree, num=1)
            if r.states == 0:
                return False, evicted
            evicted += r.states
        return True, evicted

    def _tree_kv(self, ids: list[int], m: Any, upto: int) -> np.ndarray:
        """MLA KV of ids[:upto] along the matched path (upto <= token_match)."""
        nodes = []
        nd = m.last_node
        while nd is not None and nd is not self.tree.root:
            nodes.append(nd)
            nd = nd.parent
        nodes.reverse()
        parts = [n.kv for n in nodes]
        end = nodes[-1].plen if nodes else 0
        if end < upto:  # the match ends inside an edge: take that edge's head
            child = (nodes[-1] if nodes else self.tree.root).children[ids[end]]
            parts.append(child.kv[: upto - end])
        kv = np.concatenate(parts, axis=0) if parts else self._empty_kv()
        return kv[:upto]

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
        replays one token per model call (a trace step per token); ``record_states`` keeps the
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
        rid = f"req{self._n}"
        for slot, owner in self.active.owned().items():
            if owner in (rid, rid + ":track"):
                self.active.free(slot)
        for slot, owner in self.checkpoints.owned().items():
            if owner == rid:
                self.checkpoints.free(slot)
        if self._locked is not None:
            self.tree.unlock_state(self._locked)
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
        t0 = time.perf_counter()
        ids = self._tokens(prompt)
        n_new = _int(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
        mode = self.restore_mode if restore is None else restore
        if mode not in RESTORE_MODES:
            raise ValueError(f"restore must be one of {RESTORE_MODES}, got {mode!r}")
        step_replay = _bool(step_replay, "step_replay") or _bool(record_states, "record_states")
        _bool(reference, "reference")
        if observe is not None and not callable(observe):
            raise ValueError("observe must be callable or None")
        model = self.model
        P = len(ids)
        total = P + n_new - 1  # tokens consumed by the end (the last output is not fed back)
        self._n += 1
        rid = f"req{self._n}"
        copies0, don0 = self.checkpoints.copies, self.checkpoints.donations
        tw0 = self.pingpong.track_writes
        ev_states = 0
        ev_kv = 0
        skipped = 0

        req: RequestSlots = self.pingpong.open(rid)
        a = req.active
        self.active.bind(a, model.new_state().kda)
        m = None
        locked = None
        token_match = restore_at = 0
        restore_err = (0.0, 0.0)
        state = model.new_state()
        state.kda = self.active.layer_states(a)
        if self.cache_on and P > 1:
            m = self.tree.match(ids[:-1])
            token_match, restore_at = m.token_match, m.restore_at
            if restore_at > 0:
                self.tree.lock_state(m.node)
                locked = self._locked = m.node
                self.checkpoints.load_to_active(m.state, self.active, a)
                restore_err = self.checkpoints.quant_error(m.state)
                if mode == "inconsistent":  # teaching mode: MLA at the match, KDA at the ckpt
                    upto = token_match
                    kv = self._tree_kv(ids, m, upto)
                else:  # the tree's KV for exactly [0, restore_at)
                    upto = restore_at
                    kv = np.concatenate(m.kv, axis=0)
                state = ModelState(
                    self.active.layer_states(a),
                    kv,
                    list(ids[:upto]),
                    model.version,
                    TOKENIZER_FINGERPRINT,
                )
        start = state.boundary  # restore_at, or token_match when inconsistent
        inconsistent = mode == "inconsistent" and restore_at > 0
        if self.cache_on and not inconsistent:
            planned = self.policy.checkpoint_positions(
                P, m, total_len=total, chunk_size=self.chunk_size, page_size=1
            )
        else:
            planned = ()
        plan = set(planned)
        if observe is not None:
            observe("restored", self)
        if hasattr(self.policy, "note_request"):
            self.policy.note_request()

        pending: list[tuple[int, int]] = []  # (position, checkpoint slot) owned by this request
        trace: list[TraceStep] = []
        replay_S: list[np.ndarray] = []

        def park(pos: int, final: bool) -> None:
            nonlocal ev_states, skipped
            if self.strategy == "no_buffer":
                if final:
                    return  # donated at the end
                ok, ev = self._ckpt_slot()
                ev_states += ev
                if not ok:
                    skipped += 1
                    return
                pending.append((pos, self.checkpoints.store_from_active(self.active, a, rid)))
                return
            over = self.pingpong.overwritten_next(req)
            if over is not None:
                donate(*over)
            if self.pingpong.track(req, pos) is None:
                skipped += 1

        def donate(slot: int, pos: int) -> None:
            nonlocal ev_states, skipped
            ok, ev = self._ckpt_slot()
            ev_states += ev
            self.pingpong.mark_donated(req, slot)
            if not ok:
                skipped += 1
                return
            pending.append((pos, self.checkpoints.donate(self.active, slot, rid)))

        def record(n: int, phase: str) -> None:
            S = self.active.buffers(a)[0]
            trace.append(TraceStep(state.boundary, n, state.tokens[-1], phase, _norm(S), np.nan))
            if phase == "replay":
                replay_S.append(S)  # a reference: bound buffers are never written in place

        def run(seg: list[int]) -> np.ndarray:
            logits = model.prefill(seg, state)
            self.active.bind(a, state.kda)
            state.kda = self.active.layer_states(a)
            return logits

        if start > 0:
            S0 = self.active.buffers(a)[0]
            trace.append(TraceStep(start, 0, ids[start - 1], "restore", _norm(S0), np.nan))
            replay_S.append(S0)

        # replay + prefill: scheduler steps of chunk_size from `start`, cut at checkpoints
        cuts = set(range(start + self.chunk_size, P, self.chunk_size))
        cuts.update(p for p in plan if start < p < P)
        if start < token_match < P and not inconsistent:
            cuts.add(token_match)
        if step_replay and not inconsistent:
            cuts.update(range(start + 1, min(token_match, P)))
        bounds = [start, *sorted(cuts), P]
        last = None
        for lo, hi in zip(bounds, bounds[1:]):
            out = run(ids[lo:hi])
            last = out[-1]
            record(hi - lo, "replay" if hi <= token_match and not inconsistent else "prefill")
            if hi in plan:
                park(hi, hi == total)
        assert last is not None

        # decode
        gen: list[int] = []
        logit_rows = []
        for i in range(n_new):
            nxt = int(np.argmax(last))
            gen.append(nxt)
            logit_rows.append(last)
            if i + 1 < n_new:
                last = run([nxt])[-1]
                record(1, "decode")
                if state.boundary in plan:
                    park(state.boundary, state.boundary == total)
        logits = np.array(logit_rows).reshape(n_new, VOCAB)

        # finish: donate what is still tracked, insert, release
        if self.cache_on and not inconsistent:
            if self.strategy == "no_buffer":
                if total in plan:
                    ok, ev = self._ckpt_slot()
                    ev_states += ev
                    if ok:
                        pending.append((total, self.checkpoints.donate(self.active, a, rid)))
                    else:
                        skipped += 1
            else:
                for slot, pos in self.pingpong.valid(req):
                    donate(slot, pos)
        created = existed = 0
        if pending:
            pending.sort()
            for _, slot in pending:
                self.checkpoints.set_owner(slot, "tree")
            nb = self.checkpoints.slot_bytes
            r = self.tree.insert(state.tokens, state.mla_kv, [(p, s, nb) for p, s in pending])
            slot_at = dict(pending)
            for pos in r.existed:
                self.checkpoints.free(slot_at[pos])
            # the per-path cap may tombstone a state this very insert added (its slot is freed
            # through on_free_state): count only the new states still in the tree
            created = sum(self.checkpoints.owner(slot_at[pos]) is not None for pos in r.new)
            existed = len(r.existed)
        if locked is not None:
            self.tree.unlock_state(locked)
            self._locked = None
        if self.kv_budget is not None and self.tree.kv_tokens > self.kv_budget:
            ev = self.tree.evict_kv(self.tree.kv_tokens - self.kv_budget)
            ev_states += ev.states
            ev_kv += ev.kv_tokens
        self.pingpong.close(req)
        if observe is not None:
            observe("finished", self)

        # trace distances (restore and replay steps) to the replayed state at the match and,
        # when stepping, to the uncached state there (one extra prefill from zero)
        replayed = 0 if inconsistent else token_match - restore_at
        if replay_S and not inconsistent:
            target = replay_S[-1]  # the replayed state at the token match
            unc = None
            if step_replay:
                ref = model.new_state()
                model.prefill(ids[:token_match], ref)
                unc = np.stack([st.S for st in ref.kda])
            for i, S in enumerate(replay_S):  # trace[i] is the i-th restore/replay step
                kw = {"dist_to_match": _rel(S, target)}
                if unc is not None:
                    kw["dist_to_uncached"] = _rel(S, unc)
                trace[i] = trace[i]._replace(**kw)
        ref_logits = None
        ref_diff = None
        if reference:
            _, ref_logits = model.generate(ids, n_new)
            ref_diff = float(np.max(np.abs(ref_logits - logits)))

        prefilled = P - token_match
        t = self._tot
        t["state_hits"] += restore_at > 0
        t["token_hits"] += token_match > 0
        t["prompt_tokens"] += P
        t["restored_tokens"] += restore_at
        t["replayed_tokens"] += replayed
        t["prefilled_tokens"] += prefilled
        t["decoded_tokens"] += n_new - 1
        t["evicted_states"] += ev_states
        t["evicted_kv_tokens"] += ev_kv
        t["checkpoints_skipped"] += skipped
        return GenerateReport(
            prompt=tuple(ids),
            tokens=gen,
            text=decode(gen),
            logits=logits,
            token_match=token_match,
            restore_at=restore_at,
            replayed=replayed,
            prefilled=prefilled,
            decoded=n_new - 1,
            restore=mode,
            planned_checkpoints=tuple(planned),
            checkpoints=tuple(p for p, _ in pending),
            checkpoints_created=created,
            checkpoints_existed=existed,
            checkpoints_skipped=skipped,
            copies=self.checkpoints.copies - copies0,
            donations=self.checkpoints.donations - don0,
            track_writes=self.pingpong.track_writes - tw0,
            evicted_states=ev_states,
            evicted_kv_tokens=ev_kv,
            restore_error=restore_err,
            trace=tuple(trace),
            replay_states=np.stack(replay_S) if record_states and replay_S else None,
            ref_logits=ref_logits,
            ref_max_abs_diff=ref_diff,
            pools=self.pool_stats(),
            seconds=time.perf_counter() - t0,
        )

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
        """
        mbt = 4 * self.chunk_size if max_batch_tokens is None else max_batch_tokens
        mbt = _int(mbt, "max_batch_tokens", 1, 1 << 16)
        mrr = None
        if max_running_requests is not None:
            mrr = _int(max_running_requests, "max_running_requests", 1, MAX_SLOTS)
        kvt = None if kv_tokens is None else _int(kv_tokens, "kv_tokens", 1, 1 << 40)
        if self.restore_mode != "exact":
            raise ValueError("serve needs restore='exact' (the teaching mode is per request)")
        return _serve(self, requests, max_batch_tokens=mbt, max_running_requests=mrr, kv_tokens=kvt)

    def _count(self, r: GenerateReport) -> None:
        """Add one served request to the engine's totals (``stats``)."""
        self._n += 1
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
        ok, _ = self._ckpt_slot()
        if not ok:
            return False
        a = self.active.allocate("adopt")
        try:
            layers = [KDALayerState(kda_state[i], conv[i]) for i in range(kda_state.shape[0])]
            self.active.bind(a, layers)
            slot = self.checkpoints.store_from_active(self.active, a, "tree")
        finally:
            self.active.free(a)
        r = self.tree.insert(
            ids, np.asarray(mla_kv), [(len(ids), slot, self.checkpoints.slot_bytes)]
        )
        if r.existed:
            self.checkpoints.free(slot)
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
            tree_states=self.tree.n_states,
            tree_nodes=self.tree.n_nodes,
            tree_kv_tokens=self.tree.kv_tokens,
            **t,
        )

    def check_integrity(self) -> None:
        """Pools, tree, and their agreement: the tree's states are exactly the checkpoint slots
        owned by "tree"; no request holds active slots between requests."""
        self.active.check_integrity()
        self.checkpoints.check_integrity()
        self.tree.check_integrity()
        tree_slots = set()
        stack = [self.tree.root]
        while stack:
            nd = stack.pop()
            stack.extend(nd.children.values())
            if nd.has_state:
                if nd.state in tree_slots:
                    raise AssertionError(f"engine: checkpoint slot {nd.state} held twice")
                tree_slots.add(nd.state)
        owned = {s for s, o in self.checkpoints.owned().items() if o == "tree"}
        if owned != tree_slots or self.checkpoints.n_used != len(tree_slots):
            raise AssertionError(
                f"engine: tree holds {len(tree_slots)} states, checkpoint pool "
                f"{self.checkpoints.n_used} slots ({len(owned)} owned by the tree)"
            )
        if self.active.n_used:
            raise AssertionError(f"engine: {self.active.n_used} active slots leaked")
