"""A served request's life on the engine's cache and pools: admit, advance, park, finish, retract.

The same steps as ``Engine.generate`` (match, lock, copy-on-write restore, plan, track,
donate, insert; see serve/generate.py), cut into the pieces a scheduler step needs, with one
difference SGLang makes for chunked prefill: **checkpoints are inserted in flight**. After each
prefill chunk that ends at a planned position the state goes into the tree at once
(``cache_unfinished_req`` in SGLang's ``mamba_radix_cache.py``: insert the prefix, move the
lock from the previous node to the new one), so a request admitted later can restore a prefix
that an earlier one is still prefilling. no_buffer snapshots the active slot there;
extra_buffer(_lazy) writes a track slot and donates it straight away. Decode-time checkpoints
(track interval, request end) stay with the request and are inserted when it finishes
(``cache_finished_req``), as in SGLang.

Overlap scheduling (``Engine(overlap=True)``, SGLang's default ``Scheduler.event_loop_overlap``:
the CPU schedules and launches step N+1 before it post-processes step N): a state tracked for an
in-flight checkpoint at step N is read (donated and inserted) only after step N+1's forward, so
step N+1's track write must go to the other ping-pong slot (``ServePingPong.busy`` refuses the
hazard) and the checkpoint becomes visible to admissions one step later. Without overlap the
post-processing follows each forward and one track slot suffices. Modelled: that ordering and
the slot counts; not modelled: sampling through a future map (tokens, finishes and slot frees
still apply at the end of the step that produced them).

Retraction (SGLang ``ScheduleBatch.retract_decode``) releases the request's slots, lock and
not-yet-inserted checkpoints without inserting anything more (``release_kv_cache(...,
is_insert=False)``); what it inserted in flight stays in the tree (valid states).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from kda_core.model import TOKENIZER_FINGERPRINT, VOCAB, ModelState
from kda_core.serve.request import RequestState

if TYPE_CHECKING:
    from kda_core.serve.engine import Engine
    from kda_core.serve.report import GenerateReport

__all__ = ["Lifecycle"]


class Lifecycle:
    """Cache and pool operations of served requests on one engine."""

    def __init__(self, engine: Engine, serve_id: int) -> None:
        self.e = engine
        self.serve_id = serve_id
        self.kv_cache_on = engine.cache_on
        self.running: list[RequestState] | None = None
        self.overlap = engine.overlap
        self.queue: list[tuple[RequestState, int, int]] = []  # this step's in-flight tracks
        self.deferred: list[tuple[RequestState, int, int]] = []  # the previous step's

    # -- resources -------------------------------------------------------------------------
    def ckpt_slot(self, r: RequestState) -> bool:
        """Room for one checkpoint (evicting unlocked cached states through the policy)."""
        ok, ev = self.e._ckpt_slot()
        r.bump("evicted_states", ev)
        return ok

    def make_room_to_open(self, r: RequestState) -> bool:
        """Free enough state slots for the request's up-front slots (evicting cached ones)."""
        pp = self.e.pingpong
        while not pp.can_open():
            if not self.kv_cache_on:
                return False
            n = self.e.cache.evict_one_state()
            if n == 0:
                return False
            r.bump("evicted_states", n)
        return True

    # -- admit -----------------------------------------------------------------------------
    def probe_lock(self, r: RequestState) -> tuple[object, int]:
        """Lock the checkpoint a match would restore now (no LRU touch) so that making KV room
        for the rest of the prompt cannot evict it. -> (locked handle or None, restore point)."""
        if not self.kv_cache_on or r.P <= 1:
            return None, 0
        m = self.e.cache.match(r.ids[:-1], touch=False)
        if m.restore_at == 0:
            return None, 0
        self.e.cache.lock(m.restore)
        return m.restore, m.restore_at

    def probe_unlock(self, handle: object) -> None:
        if handle is not None:
            self.e.cache.unlock(handle)

    def admit(self, r: RequestState, step: int) -> None:
        """Open slots (the caller made room), match, lock, restore, plan the checkpoints."""
        e = self.e
        model = e.model
        r.rid = f"serve{self.serve_id}:req{r.idx}:try{r.retractions}"
        r.t0 = time.perf_counter()
        r.admitted_at = step
        r.slots = e.pingpong.open(r.rid)
        a = r.slots.active
        kv = np.zeros((0, len(model.mla_layers), model.config.mla_latent))
        m = None
        if self.kv_cache_on and r.P > 1:
            m = e.cache.match(r.ids[:-1])
            r.token_match, r.restore_at = m.token_match, m.restore_at
            if r.restore_at > 0:
                e.cache.lock(m.restore)
                r.locked, r.locked_len = m.restore, r.restore_at
                e.checkpoints.load_to_active(m.state, e.active, a)
                r.bump("copies")
                r.restore_error = e.checkpoints.quant_error(m.state)
                kv = e.cache.path_kv(m)
        else:
            r.token_match = r.restore_at = 0
        # restore_at == 0: the slot starts from the zero state, which ``open`` (ActivePool.
        # allocate) just bound to it: nothing to bind (``bind(a, model.new_state().kda)`` would
        # stack fresh zeros over zeros)
        # the state's KDA arrays live in the active slot (the runner reads and rebinds them
        # there each step); r.state.kda is this first view and is not kept current
        r.state = ModelState(
            e.active.layer_states(a),
            kv,
            list(r.ids[: r.restore_at]),
            model.version,
            TOKENIZER_FINGERPRINT,
        )
        r.planned = ()
        if self.kv_cache_on:
            r.planned = e.policy.checkpoint_positions(
                r.P, m, total_len=r.total, chunk_size=e.chunk_size, page_size=1
            )
        r.plan = frozenset(r.planned)
        start, C = r.restore_at, e.chunk_size
        cuts = set(range(start + C, r.P, C))
        cuts.update(p for p in r.plan if start < p < r.P)
        if start < r.token_match < r.P:
            cuts.add(r.token_match)
        cuts.add(r.P)
        r.cuts = tuple(sorted(cuts))
        r.last_tracked = start
        r.phase = "prefill"
        if start > 0:
            r.step_log.append((start, 0, r.ids[start - 1], "restore"))
        if hasattr(e.policy, "note_request"):
            e.policy.note_request()

    def next_cut(self, r: RequestState) -> int:
        """The prefill boundary the request is heading for (a chunk end or a checkpoint)."""
        pos = r.pos
        for c in r.cuts:
            if c > pos:
                return c
        return r.P

    # -- advance ---------------------------------------------------------------------------
    def advanced(self, r: RequestState, n: int, logits: np.ndarray) -> bool:
        """The runner consumed ``n`` tokens of ``r`` (its state is new). Bind the state, record,
        park a planned checkpoint, emit a token when the prompt is done. -> finished?"""
        # runs for every request every step: locals, no properties (st.boundary, r.P)
        st = r.state
        assert st is not None and r.slots is not None
        tokens = st.tokens
        pos = len(tokens)  # st.boundary
        if r.phase != "prefill":
            kind = "decode"
        elif pos <= r.token_match:
            kind = "replay"
        else:
            kind = "prefill"
        r.step_log.append((pos, n, tokens[-1], kind))
        r.last = last = logits[-1]
        if pos in r.plan:
            self.park(r, pos)
        if pos < len(r.ids):
            return False
        r.phase = "decode"
        gen = r.gen
        gen.append(int(last.argmax()))  # the method: no dispatch wrapper (per request per step)
        r.logit_rows.append(last)
        return len(gen) >= r.n_new

    def park(self, r: RequestState, pos: int) -> None:
        """A checkpoint at ``pos``: in flight into the tree during prefill, pending in decode."""
        e = self.e
        assert r.slots is not None
        r.parked.append(pos)
        r.last_tracked = pos
        inflight = pos <= r.P
        if e.strategy == "no_buffer":
            if pos == r.total:
                return  # the active slot itself is donated at the end
            if not self.ckpt_slot(r):
                r.bump("skipped")
                r.parked.pop()
                return
            slot = e.checkpoints.store_from_active(e.active, r.slots.active, r.rid)
            r.bump("copies")
            self._keep(r, pos, slot, inflight)
            return
        over = e.pingpong.overwritten_next(r.slots)
        if over is not None:
            self.donate(r, *over, inflight=False)
        tw = e.pingpong.track(r.slots, pos)
        if tw is None:
            r.bump("skipped")
            r.parked.pop()
            return
        r.bump("track_writes")
        if inflight and self.overlap:
            self.queue.append((r, tw, pos))  # read by the post-processing after the next forward
        elif inflight:
            self.donate(r, tw, pos, inflight=True)

    # -- overlap: post-processing one step late ---------------------------------------------
    def end_step(self) -> None:
        """After a step's forward: post-process the previous step's tracked states, then hand
        this step's to the next one (no-op without overlap)."""
        busy = self.e.pingpong.busy
        for r, slot, pos in self.deferred:
            busy.discard(slot)
            self.donate(r, slot, pos, inflight=True)
        self.deferred, self.queue = self.queue, []
        busy.update(slot for _, slot, _ in self.deferred)

    def _flush(self, r: RequestState) -> None:
        """Post-process ``r``'s tracked states now (it finishes or is retracted)."""
        busy = self.e.pingpong.busy
        mine = [it for it in self.deferred + self.queue if it[0] is r]
        self.deferred = [it for it in self.deferred if it[0] is not r]
        self.queue = [it for it in self.queue if it[0] is not r]
        for _, slot, pos in mine:
            busy.discard(slot)
            self.donate(r, slot, pos, inflight=True)

    def drop_deferred(self) -> None:
        self.e.pingpong.busy.clear()
        self.deferred, self.queue = [], []

    def donate(self, r: RequestState, slot: int, pos: int, *, inflight: bool) -> None:
        e = self.e
        assert r.slots is not None
        e.pingpong.mark_donated(r.slots, slot)
        if not self.ckpt_slot(r):
            r.bump("skipped")
            return
        c = e.checkpoints.donate(e.active, slot, r.rid)
        r.bump("copies" if e.int8 else "donations")
        self._keep(r, pos, c, inflight)

    def _keep(self, r: RequestState, pos: int, slot: int, inflight: bool) -> None:
        if inflight:
            self._insert(r, [(pos, slot)], move_lock=True)
        else:
            r.pending.append((pos, slot))

    def _insert(self, r: RequestState, ckpts: list[tuple[int, int]], move_lock: bool) -> None:
        """Insert the request's tokens up to its deepest checkpoint with these checkpoints;
        free the copies the tree already had; optionally move the lock to the new node."""
        e = self.e
        st = r.state
        assert st is not None
        end = max(p for p, _ in ckpts)
        res = e.cache.insert(st.tokens[:end], st.mla_kv[:end], ckpts)
        r.bump("created", len(res.new))
        r.bump("existed", len(res.existed))
        if move_lock and e.cache.try_lock(res.handle):  # the new node first: the path
            if r.locked is not None:  # is never unlocked in between
                e.cache.unlock(r.locked)
            r.locked, r.locked_len = res.handle, end

    # -- finish / retract ------------------------------------------------------------------
    def finish(self, r: RequestState, step: int) -> GenerateReport:
        """Donate what is still tracked, insert, unlock, release slots; build the report."""
        e = self.e
        assert r.slots is not None and r.state is not None
        self._flush(r)
        if self.kv_cache_on:
            if e.strategy == "no_buffer":
                if r.total in r.plan:
                    if self.ckpt_slot(r):
                        self._compact(r.slots.active)
                        c = e.checkpoints.donate(e.active, r.slots.active, r.rid)
                        r.bump("copies" if e.int8 else "donations")
                        r.pending.append((r.total, c))
                    else:
                        r.bump("skipped")
                        r.parked.remove(r.total)
            else:
                for slot, pos in e.pingpong.valid(r.slots):
                    self.donate(r, slot, pos, inflight=False)
        if r.pending:
            self._insert(r, list(r.pending), move_lock=False)
            r.pending.clear()
        self._unlock(r)
        if e.kv_budget is not None and e.cache.kv_tokens > e.kv_budget:
            ev = e.cache.evict_kv(e.cache.kv_tokens - e.kv_budget)
            r.bump("evicted_states", ev.states)
            r.bump("evicted_kv", ev.kv_tokens)
        e.pingpong.close(r.slots)
        r.slots = None
        if r.state.mla_kv.base is not None:  # a view of a step's batch array (Runner): own it
            r.state.mla_kv = r.state.mla_kv.copy()
        r.phase = "finished"
        r.finished_at = step
        r.seconds = time.perf_counter() - r.t0
        return self.report(r)

    def _compact(self, slot: int) -> None:
        """The runner binds views of a step's batch array to active slots; before such a
        buffer goes to the checkpoint pool (kept long) it gets its own memory, or it would
        pin the whole batch array. One state copy, counted with the donation."""
        S, conv = self.e.active.buffers(slot)
        if S.base is not None or conv.base is not None:
            self.e.active.rebind(slot, S.copy(), conv.copy())

    def _unlock(self, r: RequestState) -> None:
        if r.locked is not None:
            self.e.cache.unlock(r.locked)
            r.locked, r.locked_len = None, 0

    def release(self, r: RequestState) -> None:
        """Give back everything the request holds, insert nothing (retract / abort)."""
        e = self.e
        for _, slot in r.pending:
            e.checkpoints.free(slot)
        r.pending.clear()
        self._unlock(r)
        if r.slots is not None:
            e.pingpong.close(r.slots)
            r.slots = None

    def _running_view(self) -> list[RequestState]:
        """The scheduler's running list (set by the scheduler; tests read it)."""
        return list(self.running) if self.running is not None else []

    def retract(self, r: RequestState) -> None:
        self._flush(r)  # its computed chunks' states are valid: they go into the tree
        self.release(r)
        r.retractions += 1
        r.reset()

    # -- report ----------------------------------------------------------------------------
    def report(self, r: RequestState) -> GenerateReport:
        from kda_core.serve.report import GenerateReport, StepRecord

        c = r.counts.get
        nan = float("nan")
        mk = StepRecord._make  # one record per consumed chunk or token: the tuple fast path
        untraced = (nan, nan, nan)  # state_norm, dist_to_match, dist_to_uncached
        return GenerateReport(
            prompt=tuple(r.ids),
            tokens=list(r.gen),
            # tokenizer.decode without re-checking ids the model itself produced (argmax over
            # VOCAB = 256 byte tokens); tests/test_serve_bookkeeping.py compares the two
            text=bytes(r.gen).decode("utf-8", errors="replace"),
            logits=np.array(r.logit_rows).reshape(len(r.gen), VOCAB),
            token_match=r.token_match,
            restore_at=r.restore_at,
            replayed=r.token_match - r.restore_at,
            prefilled=r.P - r.token_match,
            decoded=r.n_new - 1,
            restore="exact",
            planned_checkpoints=tuple(r.planned),
            checkpoints=tuple(r.parked),
            checkpoints_created=c("created", 0),
            checkpoints_existed=c("existed", 0),
            checkpoints_skipped=c("skipped", 0),
            copies=c("copies", 0),
            donations=c("donations", 0),
            track_writes=c("track_writes", 0),
            evicted_states=c("evicted_states", 0),
            evicted_kv_tokens=c("evicted_kv", 0),
            restore_error=r.restore_error,
            step_log=tuple([mk(rec + untraced) for rec in r.step_log]),
            replay_states=None,
            ref_logits=None,
            ref_max_abs_diff=None,
            pools=self.e.pool_stats(),
            seconds=r.seconds,
        )
