"""A request's life on the radix cache and the pools (``serve`` and ``generate``; vLLM's block
table: ``_blocks``), SGLang 0.5.23's ``UnifiedRadixCache`` flow (``mem_cache/
unified_radix_cache.py``; earlier releases' ``MambaRadixCache``): match, lock
(``inc_lock_ref``), make room, restore copy-on-write, replay to the token match, prefill in
chunks cut at checkpoints; prefill checkpoints go in **in flight** (``checkpoint`` ->
``checkpoint_into_tree`` while the request runs, formerly ``cache_unfinished_req``: the lock
moves to the new node), decode ones at the end (the same call once it has finished, formerly
``cache_finished_req``); with overlap (``event_loop_overlap``) a tracked state is donated after
the next step's forward. Retraction inserts nothing. docs/serving.md."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core.cache.protocol import HandleError
from kda_core.model import TOKENIZER_FINGERPRINT, ModelState
from kda_core.serve._args import Parts
from kda_core.serve._state import RequestState
from kda_core.serve.report import GenerateReport
from kda_core.serve.spec import SpecRequest


class Lifecycle:
    """Cache and pool operations of the requests of one serve (module docstring)."""

    def __init__(self, parts: Parts) -> None:
        self.model, self.pools, self.cache = parts.model, parts.pools, parts.cache
        self.policy, self.cfg = parts.policy, parts.config
        self.serve_id = 0  # the engine's serve count: slot owners name their serve
        self.queue: list[tuple[RequestState, int, int]] = []  # this step's in-flight tracks
        self.deferred: list[tuple[RequestState, int, int]] = []  # the previous step's
        self.rows: list = []  # a block table's steps (``serve._blocks``); none here

    def start(self) -> None:
        """A new serve."""
        self.serve_id += 1

    def begin_step(self) -> None:
        """A new scheduler step (the radix cache needs no notice)."""

    def window(self, r: RequestState) -> int:
        """Tokens a decoding request consumes this step: 1, or a speculative verify's window
        (D, at most the tokens still to emit, cut at the next planned checkpoint so that a
        full acceptance lands on it)."""
        if r.spec is None:
            return 1
        n = min(r.spec.rings.draft_tokens, r.n_new - len(r.gen))
        nxt = next((p for p in r.planned if p > r.pos), None)
        return n if nxt is None else min(n, nxt - r.pos)

    def prepare(self, r: RequestState, n: int) -> int:
        """The chunk ``r`` runs this step, ``n`` tokens as the scheduler cut it (the cuts are
        the lifecycle's own: ``next_cut``). -> tokens it computes."""
        return n

    # -- admit -----------------------------------------------------------------------------
    def match(self, r: RequestState) -> Any:
        """Match the prompt (but its last token) and lock the restore point, so that making
        room for the request cannot evict it. -> the match (None: cache off or one token)."""
        if not self.cfg.cache_on or r.P <= 1:
            return None
        m = self.cache.match_prefix(r.ids[:-1])
        if m.restore_at:
            self.cache.lock_handle(m.restore)
        return m

    def unmatch(self, m: Any) -> None:
        """Undo ``match``'s lock (the request was not admitted after all)."""
        if m is not None and m.restore_at:
            self.cache.lock_handle(m.restore, unlock=True)

    def make_room(self, r: RequestState) -> bool:
        """Free enough of the shared pool for the request's slots. -> can it open them?"""
        can = self.pools.pingpong.can_open
        return can() or (self.pools.shared and self._evict(r, can, kv=True))

    def _evict(self, r: RequestState, room: Callable[[], bool], kv: bool = False) -> bool:
        """Evict unlocked cached states through the policy until ``room()`` (with ``kv``, in
        one byte buffer, the tree's KV bytes make room too). -> room?"""
        u = self.pools.unified if kv else None
        while not room():
            if not self.cfg.cache_on:
                return False
            n = self.cache.evict(states=1).states
            if n:
                r.bump("evicted_states", n)
                continue
            k = 0 if u is None else self.cache.evict(-(-u.slot_bytes // u.kv_token_bytes)).kv_tokens
            if k == 0:
                return False
            r.bump("evicted_kv_tokens", k)
        return True

    def _open(self, r: RequestState) -> str:
        """A new attempt of ``r``: its clock starts. -> its slot owner name."""
        r.t0 = time.perf_counter()
        r.rid = f"serve{self.serve_id}:req{r.idx}:try{r.retractions}"
        return r.rid

    def _done(self, r: RequestState) -> GenerateReport:
        """``r`` is finished: its time, the observer, its report."""
        r.phase, r.seconds = "finished", time.perf_counter() - r.t0
        r.observe("finished")
        rep = r.report(self.pools.still_held(r.inserted), self.pools.stats())
        return rep if r.trace is None else r.trace.finish(rep, self.model, r.inconsistent)

    def admit(self, r: RequestState, m: Any) -> None:
        """Open the slots (the caller made room), restore from ``m`` (locked by ``match``),
        plan the checkpoints and the prefill cuts."""
        r.slots = self.pools.pingpong.open(self._open(r))
        if self.cfg.spec is not None:  # speculative decoding: the request's rings and draft
            r.spec = SpecRequest.of(self.model, self.cfg.spec)
        active, model, a = self.pools.active, self.model, r.slots.active
        kv = np.zeros((0, len(model.mla_layers), model.config.mla_latent))
        r.token_match, r.restore_at = (0, 0) if m is None else (m.token_match, m.restore_at)
        upto = r.restore_at
        if upto:
            ck = self.pools.checkpoints
            r.locked, r.locked_len = m.restore, upto
            ck.load_to_active(m.state, active, a)
            r.bump("copies")
            r.restore_error = ck.quant_error(m.state)
            if r.inconsistent:  # teaching: MLA at the token match, KDA at the checkpoint
                upto = r.token_match
                kv = np.concatenate(self.cache.read_kv(r.ids, upto), axis=0)
            else:  # the tree's KV for exactly [0, restore_at)
                kv = np.concatenate(m.kv, axis=0)
        # restore_at == 0: the slot starts from the zero state ``open`` bound to it. The state's
        # KDA arrays live in the active slot (the runner rebinds them there each step)
        tokens = r.ids[:upto]  # a new list
        r.state = ModelState(
            active.layer_states(a), kv, tokens, model.version, TOKENIZER_FINGERPRINT
        )
        r.planned = ()
        if self.cfg.cache_on and not r.inconsistent:
            r.planned = self.policy.checkpoint_positions(
                r.P, m, total_len=r.total, chunk_size=self.cfg.chunk_size, page_size=1
            )
        r.plan = frozenset(r.planned)
        r.cuts = self._cuts(r, upto)
        r.phase = "prefill"
        if upto > 0:
            r.step_log.append((upto, 0, r.ids[upto - 1], "restore"))
            if r.trace is not None:
                r.trace.step(active.buffers(a)[0], "restore")
        if hasattr(self.policy, "note_request"):
            self.policy.note_request()
        r.observe("restored")

    def _cuts(self, r: RequestState, start: int) -> tuple[int, ...]:
        """Prefill boundaries after ``start``: chunk ends, checkpoints, the token match (the
        replayed state there), each replayed token when a trace steps it, the prompt end."""
        P, tm = r.P, r.token_match
        cuts = set(range(start + self.cfg.chunk_size, P, self.cfg.chunk_size))
        cuts.update(p for p in r.plan if start < p < P)
        if start < tm < P and not r.inconsistent:
            cuts.add(tm)
            if r.trace is not None and r.trace.step_replay:
                cuts.update(range(start + 1, tm))
        cuts.add(P)
        return tuple(sorted(cuts))

    def next_cut(self, r: RequestState) -> int:
        """The prefill boundary the request is heading for."""
        pos = r.pos
        return next((c for c in r.cuts if c > pos), r.P)

    # -- advance ---------------------------------------------------------------------------
    def advanced(self, r: RequestState, n: int, logits: np.ndarray) -> bool:
        """The runner consumed ``n`` tokens of ``r`` (its state is new). Record, park a
        planned checkpoint, emit a token when the prompt is done. -> finished?"""
        # runs for every request every step: locals, no properties (st.boundary, r.P)
        st = r.state
        assert st is not None and r.slots is not None
        tokens = st.tokens
        pos = len(tokens)  # st.boundary
        if r.phase != "prefill":
            kind = "decode"
        elif pos <= r.token_match and not r.inconsistent:
            kind = "replay"
        else:
            kind = "prefill"
        r.step_log.append((pos, n, tokens[-1], kind))
        if r.trace is not None:  # the runner wrote this state (a traced request's, every step)
            r.trace.step(self.pools.active.buffers(r.slots.active)[0], kind)
        last = logits[-1]
        if pos in r.plan:
            self.park(r, pos)
        if pos < len(r.ids):
            return False
        gen = r.gen
        if n > 1 and r.phase == "decode":  # a speculative commit: a token per committed input
            gen.extend(int(row.argmax()) for row in logits)
            r.logit_rows.extend(logits)
        else:
            gen.append(int(last.argmax()))  # the method: no dispatch wrapper (hot)
            r.logit_rows.append(last)
        r.phase = "decode"
        return len(gen) >= r.n_new

    def park(self, r: RequestState, pos: int) -> None:
        """A checkpoint at ``pos``: in flight into the tree during prefill, pending in decode."""
        assert r.slots is not None
        pp = self.pools.pingpong
        r.parked.append(pos)
        inflight = pos <= r.P
        if self.cfg.strategy == "no_buffer":  # a copy (at the end the live slot is donated)
            live = r.slots.active
            if pos != r.total and not self.donate(r, live, pos, inflight=inflight, copy=True):
                r.parked.pop()
            return
        over = pp.overwritten_next(r.slots)
        if over is not None:
            self.donate(r, *over, inflight=False)
        tw = pp.track(r.slots, pos)
        if tw is None:
            r.bump("checkpoints_skipped")
            r.parked.pop()
            return
        r.bump("track_writes")
        if inflight and self.cfg.overlap:
            self.queue.append((r, tw, pos))  # read by the post-processing after the next forward
        elif inflight:
            self.donate(r, tw, pos, inflight=True)

    # -- overlap: post-processing one step late ---------------------------------------------
    def end_step(self) -> None:
        """After a step's forward: post-process the previous step's tracked states, then hand
        this step's to the next one (no-op without overlap). The ring's busy slots are the
        deferred ones (``close`` frees a flushed request's)."""
        for r, slot, pos in self.deferred:
            self.donate(r, slot, pos, inflight=True)
        self.deferred, self.queue = self.queue, []
        self.pools.pingpong.busy = {slot for _, slot, _ in self.deferred}

    def _flush(self, r: RequestState, insert: bool) -> None:
        """Take ``r``'s tracked states off the overlap lists (it finishes or is retracted);
        with ``insert``, post-process them now."""
        mine = [it for it in self.deferred + self.queue if it[0] is r]
        self.deferred = [it for it in self.deferred if it[0] is not r]
        self.queue = [it for it in self.queue if it[0] is not r]
        for _, slot, pos in mine:
            if insert:
                self.donate(r, slot, pos, inflight=True)

    def drop_deferred(self) -> None:
        self.pools.pingpong.busy.clear()
        self.deferred, self.queue = [], []

    def donate(
        self, r: RequestState, slot: int, pos: int, *, inflight: bool, copy: bool = False
    ) -> bool:
        """Move a tracked state (no_buffer's last: the live one; ``copy``: a snapshot of it)
        into a checkpoint: into the tree in flight, else pending until the end."""
        assert r.slots is not None
        pools = self.pools
        ck = pools.checkpoints
        if slot != r.slots.active:
            pools.pingpong.mark_donated(r.slots, slot)
        if not self._evict(r, ck.can_allocate):
            r.bump("checkpoints_skipped")
            return False
        S, conv = pools.active.buffers(slot)
        if copy:
            c = ck.store(S, conv, r.rid)
        else:
            # a view of a step's batch array (the runner binds those to live slots) gets its
            # own memory first, or the checkpoint, kept long, would pin the whole array: one
            # copy, counted with the donation
            if S.base is not None or conv.base is not None:
                pools.active.rebind(slot, S.copy(), conv.copy())
            c = ck.donate(pools.active, slot, r.rid)
        r.bump("copies" if copy or self.cfg.int8 else "donations")
        if inflight:
            self._insert(r, [(pos, c)], move_lock=True)
        else:
            r.pending.append((pos, c))
        return True

    def _insert(self, r: RequestState, ckpts: list[tuple[int, int]], move_lock: bool) -> None:
        """Insert the request's tokens up to its deepest checkpoint with these checkpoints;
        optionally move the lock to the new node (the new one first: the path is never
        unlocked in between)."""
        st = r.state
        assert st is not None
        ckpts.sort()
        end = ckpts[-1][0]
        pools = self.pools
        frees = pools.frees  # a state dropped from now on (even by this insert's cap) is gone
        for _, slot in ckpts:
            pools.checkpoints.set_owner(slot, "cache")
        # (position, slot) pairs with one state_bytes: the tree's lean parse of the common call
        res = self.cache.insert_prefix(
            st.tokens[:end], st.mla_kv[:end], ckpts, state_bytes=pools.checkpoints.slot_bytes
        )
        slot_at = dict(ckpts)
        for p in res.existed:  # the cache had these states already: our copies go
            pools.checkpoints.free(slot_at[p])
        r.inserted.extend((slot_at[p], frees) for p in res.new)
        r.bump("checkpoints_existed", len(res.existed))
        if not move_lock or res.handle is None:
            return
        try:
            self.cache.lock_handle(res.handle)
        except HandleError:  # stale: the per-path cap dropped this state during the insert
            return
        if r.locked is not None:
            self.cache.lock_handle(r.locked, unlock=True)
        r.locked, r.locked_len = res.handle, end

    # -- finish / retract ------------------------------------------------------------------
    def finish(self, r: RequestState) -> GenerateReport:
        """Donate what is still tracked, insert, unlock, release slots; build the report."""
        assert r.slots is not None and r.state is not None
        self._flush(r, insert=True)
        if self.cfg.strategy != "no_buffer":
            for slot, pos in self.pools.pingpong.valid(r.slots):
                self.donate(r, slot, pos, inflight=False)
        elif r.total in r.plan and not self.donate(r, r.slots.active, r.total, inflight=False):
            r.parked.remove(r.total)  # no_buffer's last checkpoint (the live slot): skipped
        if r.pending:
            self._insert(r, list(r.pending), move_lock=False)
            r.pending.clear()
        self.release(r)
        budget = self.cfg.kv_budget
        if budget is not None and self.cache.kv_tokens > budget:
            ev = self.cache.evict(self.cache.kv_tokens - budget)
            r.bump("evicted_states", ev.states)
            r.bump("evicted_kv_tokens", ev.kv_tokens)
        if r.state.mla_kv.base is not None:  # a view of a step's batch array (Runner): own it
            r.state.mla_kv = r.state.mla_kv.copy()
        return self._done(r)

    def release(self, r: RequestState) -> None:
        """Give back everything the request holds, insert nothing (retract / abort)."""
        for _, slot in r.pending:
            self.pools.checkpoints.free(slot)
        r.pending.clear()
        if r.locked is not None:
            self.cache.lock_handle(r.locked, unlock=True)
            r.locked, r.locked_len = None, 0
        if r.slots is not None:
            self.pools.pingpong.close(r.slots)
            r.slots = None

    def retract(self, r: RequestState) -> None:
        """Release ``r`` back to waiting. Its tracked states still awaiting the one-step-late
        post-processing are dropped: SGLang skips a retracted request's pending result
        (``batch_result_processor.py`` ``process_batch_result_prefill``: ``req.is_retracted``)
        and ``release_req`` releases with ``checkpoint=False``."""
        self._flush(r, insert=False)
        self.release(r)
        r.retractions += 1
        r.reset()
