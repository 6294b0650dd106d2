"""One ``Engine.generate`` request: restore, replay, prefill, decode, track, donate, insert.

``OneRequest`` holds one request's state and counters as fields and runs the steps of
docs/serving.md ("one request") in order: ``restore`` (match, lock, copy-on-write restore of the
deepest checkpoint, the MLA KV of exactly ``[0, restore_at)``), ``prefill`` (replay and prefill
in ``chunk_size`` steps cut at checkpoint positions), ``decode`` (greedy), ``finish`` (donate
what is still tracked, insert, unlock, KV eviction, release), ``distances`` (the step log's
distances to the replayed / uncached state) and ``report``. Every cache call goes through
``serve.cache_ops``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kda_core._checks import rel_error
from kda_core.model import TOKENIZER_FINGERPRINT, VOCAB, ModelState, decode
from kda_core.serve.report import GenerateReport, StepRecord

if TYPE_CHECKING:
    from kda_core.serve.engine import Engine

__all__ = ["OneRequest"]


def _norm(S: np.ndarray) -> float:
    return float(np.sqrt(np.sum(S * S)))


class OneRequest:
    """One request on an engine (see the module docstring); ``run()`` -> its report."""

    def __init__(
        self,
        e: Engine,
        ids: list[int],
        n_new: int,
        mode: str,
        step_replay: bool,
        record_states: bool,
        reference: bool,
        observe: Callable[[str, Any], None] | None,
    ) -> None:
        self.t0 = time.perf_counter()
        self.e, self.ids, self.n_new, self.mode = e, ids, n_new, mode
        self.step_replay, self.record_states, self.reference = step_replay, record_states, reference
        self.observe = observe
        self.P = len(ids)
        self.total = self.P + n_new - 1  # tokens consumed by the end (the last output is not fed)
        e._attempts += 1
        self.rid = f"req{e._attempts}"
        self.copies0, self.don0 = e.checkpoints.copies, e.checkpoints.donations
        self.tw0 = e.pingpong.track_writes
        self.ev_states = self.ev_kv = self.skipped = 0
        self.created = self.existed = 0
        self.pending: list[tuple[int, int]] = []  # (position, checkpoint slot) owned here
        self.step_log: list[StepRecord] = []
        self.replay_S: list[np.ndarray] = []
        self.gen: list[int] = []
        self.logit_rows: list[np.ndarray] = []
        self.m: Any = None
        self.locked: Any = None
        self.token_match = self.restore_at = 0
        self.restore_err = (0.0, 0.0)
        self.planned: tuple[int, ...] = ()
        self.plan: set[int] = set()

    @property
    def inconsistent(self) -> bool:
        return self.mode == "inconsistent" and self.restore_at > 0

    def run(self) -> GenerateReport:
        self.restore()
        last = self.prefill()
        self.decode(last)
        self.finish()
        self.distances()
        return self.report()

    # -- restore -------------------------------------------------------------------------------
    def restore(self) -> None:
        e, ids, model = self.e, self.ids, self.e.model
        while e.cache_on and not e.pingpong.can_open() and e.cache.evict_one_state():
            pass  # a shared pool full of cached states: evict through the policy
        self.req = e.pingpong.open(self.rid)
        a = self.req.active
        e.active.bind(a, model.new_state().kda)
        self.state = state = model.new_state()
        state.kda = e.active.layer_states(a)
        if e.cache_on and self.P > 1:
            self.m = m = e.cache.match(ids[:-1])
            self.token_match, self.restore_at = m.token_match, m.restore_at
            if self.restore_at > 0:
                e.cache.lock(m.restore)
                self.locked = e._locked = m.restore
                e.checkpoints.load_to_active(m.state, e.active, a)
                self.restore_err = e.checkpoints.quant_error(m.state)
                if self.mode == "inconsistent":  # teaching: MLA at the match, KDA at the ckpt
                    upto = self.token_match
                    kv = e.cache.tree_kv(ids, upto, e._empty_kv())
                else:  # the tree's KV for exactly [0, restore_at)
                    upto = self.restore_at
                    kv = e.cache.path_kv(m)
                self.state = ModelState(
                    e.active.layer_states(a), kv, list(ids[:upto]), model.version,
                    TOKENIZER_FINGERPRINT,
                )  # fmt: skip
        if e.cache_on and not self.inconsistent:
            self.planned = tuple(
                e.policy.checkpoint_positions(
                    self.P, self.m, total_len=self.total, chunk_size=e.chunk_size, page_size=1
                )
            )
        self.plan = set(self.planned)
        if self.observe is not None:
            self.observe("restored", e)
        if hasattr(e.policy, "note_request"):
            e.policy.note_request()

    # -- model steps ---------------------------------------------------------------------------
    def step(self, seg: list[int]) -> np.ndarray:
        a = self.req.active
        logits = self.e.model.prefill(seg, self.state)
        self.e.active.bind(a, self.state.kda)
        self.state.kda = self.e.active.layer_states(a)
        return logits

    def record(self, n: int, phase: str) -> None:
        S = self.e.active.buffers(self.req.active)[0]
        st = self.state
        self.step_log.append(StepRecord(st.boundary, n, st.tokens[-1], phase, _norm(S), np.nan))
        if phase == "replay":
            self.replay_S.append(S)  # a reference: bound buffers are never written in place

    def prefill(self) -> np.ndarray:
        """Replay + prefill: steps of ``chunk_size`` from the start, cut at checkpoints."""
        start, P, tm, C = self.state.boundary, self.P, self.token_match, self.e.chunk_size
        inc = self.inconsistent
        if start > 0:
            S0 = self.e.active.buffers(self.req.active)[0]
            tok = self.ids[start - 1]
            self.step_log.append(StepRecord(start, 0, tok, "restore", _norm(S0), np.nan))
            self.replay_S.append(S0)
        cuts = set(range(start + C, P, C))
        cuts.update(p for p in self.plan if start < p < P)
        if start < tm < P and not inc:
            cuts.add(tm)
        if self.step_replay and not inc:
            cuts.update(range(start + 1, min(tm, P)))
        bounds = [start, *sorted(cuts), P]
        last = None
        for lo, hi in zip(bounds, bounds[1:]):
            last = self.step(self.ids[lo:hi])[-1]
            self.record(hi - lo, "replay" if hi <= tm and not inc else "prefill")
            if hi in self.plan:
                self.park(hi, hi == self.total)
        assert last is not None
        return last

    def decode(self, last: np.ndarray) -> None:
        for i in range(self.n_new):
            nxt = int(np.argmax(last))
            self.gen.append(nxt)
            self.logit_rows.append(last)
            if i + 1 < self.n_new:
                last = self.step([nxt])[-1]
                self.record(1, "decode")
                pos = self.state.boundary
                if pos in self.plan:
                    self.park(pos, pos == self.total)

    # -- checkpoints ---------------------------------------------------------------------------
    def _ckpt_slot(self) -> bool:
        ok, ev = self.e._ckpt_slot()
        self.ev_states += ev
        if not ok:
            self.skipped += 1
        return ok

    def park(self, pos: int, final: bool) -> None:
        e = self.e
        if e.strategy == "no_buffer":
            if not final and self._ckpt_slot():  # the final one is donated at the end
                slot = e.checkpoints.store_from_active(e.active, self.req.active, self.rid)
                self.pending.append((pos, slot))
            return
        over = e.pingpong.overwritten_next(self.req)
        if over is not None:
            self.donate(*over)
        if e.pingpong.track(self.req, pos) is None:
            self.skipped += 1

    def donate(self, slot: int, pos: int) -> None:
        e = self.e
        ok = self._ckpt_slot()
        e.pingpong.mark_donated(self.req, slot)
        if ok:
            self.pending.append((pos, e.checkpoints.donate(e.active, slot, self.rid)))

    # -- finish --------------------------------------------------------------------------------
    def finish(self) -> None:
        """Donate what is still tracked, insert, release the lock, evict KV, close slots."""
        e = self.e
        if e.cache_on and not self.inconsistent:
            if e.strategy != "no_buffer":
                for slot, pos in e.pingpong.valid(self.req):
                    self.donate(slot, pos)
            elif self.total in self.plan and self._ckpt_slot():
                slot = e.checkpoints.donate(e.active, self.req.active, self.rid)
                self.pending.append((self.total, slot))
        if self.pending:
            self.pending.sort()
            res = e.cache.insert(self.state.tokens, self.state.mla_kv, list(self.pending))
            self.created = e.cache.still_held(res, self.pending)
            self.existed = len(res.existed)
        if self.locked is not None:
            e.cache.unlock(self.locked)
            e._locked = None
        if e.kv_budget is not None and e.cache.kv_tokens > e.kv_budget:
            ev = e.cache.evict_kv(e.cache.kv_tokens - e.kv_budget)
            self.ev_states += ev.states
            self.ev_kv += ev.kv_tokens
        e.pingpong.close(self.req)
        if self.observe is not None:
            self.observe("finished", e)

    def distances(self) -> None:
        """Trace distances of the restore / replay steps to the replayed state at the match
        and, when stepping, to the uncached state there (one extra prefill from zero)."""
        if not self.replay_S or self.inconsistent:
            return
        target = self.replay_S[-1]  # the replayed state at the token match
        unc = None
        if self.step_replay:
            ref = self.e.model.new_state()
            self.e.model.prefill(self.ids[: self.token_match], ref)
            unc = np.stack([st.S for st in ref.kda])
        for i, S in enumerate(self.replay_S):  # step_log[i] is the i-th restore/replay step
            kw = {"dist_to_match": rel_error(S, target)}
            if unc is not None:
                kw["dist_to_uncached"] = rel_error(S, unc)
            self.step_log[i] = self.step_log[i]._replace(**kw)

    # -- report --------------------------------------------------------------------------------
    def report(self) -> GenerateReport:
        e, n_new = self.e, self.n_new
        logits = np.array(self.logit_rows).reshape(n_new, VOCAB)
        ref_logits = ref_diff = None
        if self.reference:
            _, ref_logits = e.model.generate(self.ids, n_new)
            ref_diff = float(np.max(np.abs(ref_logits - logits)))
        rep = GenerateReport(
            prompt=tuple(self.ids), tokens=self.gen, text=decode(self.gen), logits=logits,
            token_match=self.token_match, restore_at=self.restore_at,
            replayed=0 if self.inconsistent else self.token_match - self.restore_at,
            prefilled=self.P - self.token_match, decoded=n_new - 1, restore=self.mode,
            planned_checkpoints=self.planned, checkpoints=tuple(p for p, _ in self.pending),
            checkpoints_created=self.created, checkpoints_existed=self.existed,
            checkpoints_skipped=self.skipped, copies=e.checkpoints.copies - self.copies0,
            donations=e.checkpoints.donations - self.don0,
            track_writes=e.pingpong.track_writes - self.tw0, evicted_states=self.ev_states,
            evicted_kv_tokens=self.ev_kv, restore_error=self.restore_err,
            step_log=tuple(self.step_log),
            replay_states=(
                np.stack(self.replay_S) if self.record_states and self.replay_S else None
            ),
            ref_logits=ref_logits, ref_max_abs_diff=ref_diff, pools=e.pool_stats(),
            seconds=time.perf_counter() - self.t0,
        )  # fmt: skip
        e._count_totals(rep)
        return rep
