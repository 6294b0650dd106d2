"""Which requests run in the next step, and with how many tokens (SGLang's scheduler, small):
``schedule(step)`` takes every decode first (a speculative request its verify window),
retracting under KV-token pressure in SGLang's order (``ScheduleBatch.retract_decode``), then
prefill chunks of running requests, then FCFS admission while the token budget lasts (the
running cap ``sizing.max_running_requests``, the restore point locked while room is made; a
head that does not fit blocks the queue: ``Batch.held_for_memory``). SGLang
``Scheduler.get_next_batch_to_run`` with ``--enable-mixed-chunk``; docs/serving.md.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from kda_core.serve._lifecycle import Lifecycle
from kda_core.serve._state import RequestState


@dataclass(slots=True)
class Batch:
    """One step's work: decodes (one token each), speculative verifies (the pending token
    and drafts: n tokens each), prefill chunks, and what changed."""

    step: int
    decode: list[RequestState] = field(default_factory=list)
    verify: list[tuple[RequestState, int]] = field(default_factory=list)
    prefill: list[tuple[RequestState, int]] = field(default_factory=list)
    admitted: list[RequestState] = field(default_factory=list)
    retracted: list[RequestState] = field(default_factory=list)
    held_for_memory: int | None = None  # the arrived head that could not get its memory


class Scheduler:
    """FCFS continuous batching over one engine's pools (see the module docstring); one per
    engine, ``start`` begins a serve."""

    def __init__(self, life: Lifecycle) -> None:
        self.life = life
        self.cache = life.cache  # the prefix cache the lifecycle works on
        self.cache_on = life.cfg.cache_on
        self.unified = life.pools.unified  # one byte buffer: the KV cap is what states leave
        self.waiting: list[RequestState] = []
        self.running: list[RequestState] = []
        self.admitting = 0  # one buffer: the head's prompt KV, counted while its slots are made
        self.start([], max_running=1, max_batch_tokens=1, kv_tokens=None)

    def start(
        self,
        requests: list[RequestState],
        *,
        max_running: int,
        max_batch_tokens: int,
        kv_tokens: int | None,
    ) -> None:
        """A new serve of ``requests`` (nothing runs or waits from the last one)."""
        assert not self.running and not self.waiting, "the last serve left requests behind"
        self.waiting = sorted(requests, key=lambda r: (r.arrival, r.idx))
        self.max_running = max_running
        self.max_batch_tokens = max_batch_tokens
        self.kv_cap = kv_tokens
        self.decoding = 0  # this step's decode (verify) tokens, counted while requests are admitted
        self.seconds = 0.0
        self.peak_running = 0

    # -- the KV token pool -----------------------------------------------------------------
    def kv_used(self) -> int:
        """Tree KV plus each running request's tokens beyond the prefix it holds in the tree,
        plus the prompt tokens admitted requests have yet to prefill (reserved), plus, while
        ``schedule`` admits, the KV this step's decodes add (SGLang's ``PrefillAdder`` takes
        ``num_mixed_decode_tokens`` off the prefill budget: admission never takes their room)."""
        own = sum(max(r.pos, r.P) - r.locked_len for r in self.running if r.slots is not None)
        return self.cache.kv_tokens + own + self.admitting + self.decoding

    def kv_room(self, n: int) -> bool:
        """Make ``n`` more KV tokens available (evicting unlocked tree leaves; in one byte
        buffer, cached states too). -> enough?"""
        u, cap = self.unified, self.kv_cap
        if u is None and cap is None:
            return True

        def short() -> int:  # the KV tokens missing (the room changes as states go, in one buffer)
            room = cap if u is None else u.kv_capacity()
            return self.kv_used() + n - room  # type: ignore[operator]

        while short() > 0 and self.cache_on and self.cache.evict(short()).kv_tokens:
            pass
        while u is not None and short() > 0 and self.cache_on and self.cache.evict(states=1).states:
            pass
        return short() <= 0

    # -- one step --------------------------------------------------------------------------
    def schedule(self, step: int) -> Batch:
        t0 = time.process_time()
        b = Batch(step)
        life = self.life
        life.begin_step()
        self.decoding = self._decodes(b)
        budget = self.max_batch_tokens - self.decoding
        for r in b.decode:
            life.prepare(r, 1)
        for r in self.running:
            if budget <= 0:
                break
            if r.phase == "prefill":
                n = life.prepare(r, min(life.next_cut(r) - r.pos, budget))
                if n:  # a block table may leave a request out: less budget than a block
                    b.prefill.append((r, n))
                    budget -= n
        while budget > 0 and not b.retracted and self._admit_head(step, b):
            r = self.running[-1]
            b.admitted.append(r)
            n = life.prepare(r, min(life.next_cut(r) - r.pos, budget))
            if not n:
                break
            b.prefill.append((r, n))
            budget -= n
        self.decoding = 0  # from here the decodes' KV is their requests' own (``pos``)
        self.peak_running = max(self.peak_running, len(self.running))
        self.seconds += time.process_time() - t0
        return b

    def retract_victim(self) -> RequestState:
        """The retraction victim in SGLang's order (``ScheduleBatch.retract_decode``,
        ``_get_decode_retraction_order``): the fewest outputs, then the longest prompt. Not
        SGLang's: the candidates include requests still prefilling (0 outputs: taken first).
        SGLang retracts decodes only (its chunked request is outside ``running_batch``), but
        it holds a chunked request's KV chunk by chunk; the lab reserves a running request's
        whole prompt at admission, so freeing a prefilling request is what frees that KV."""
        return min(self.running, key=lambda r: (len(r.gen), -r.P, -r.idx))

    def _decodes(self, b: Batch) -> int:
        """The decoding requests (a speculative one verifies its window). -> tokens."""
        win = {r: self.life.window(r) for r in self.running if r.phase == "decode"}
        while win and not self.kv_room(sum(win.values())) and len(self.running) > 1:
            victim = self.retract_victim()
            self.running.remove(victim)
            win.pop(victim, None)
            self.life.retract(victim)
            b.retracted.append(victim)
            bisect.insort(self.waiting, victim, key=lambda w: (w.arrival, w.idx))
        b.decode = [r for r in win if r.spec is None]
        b.verify = [(r, n) for r, n in win.items() if r.spec is not None]
        return sum(win.values())

    def _admit_head(self, step: int, b: Batch) -> bool:
        if not self.waiting or len(self.running) >= self.max_running:
            return False
        r = self.waiting[0]
        if r.arrival > step:
            return False
        m = self.life.match(r)  # the restore point is locked while room is made
        need = r.P - (0 if m is None else m.restore_at)
        if self.unified is not None:  # one budget: the head's KV counts until it is admitted
            self.admitting, need = need, 0
        try:
            if not (self.life.make_room(r) and self.kv_room(need)):
                self.life.unmatch(m)
                b.held_for_memory = r.idx
                return False
            self.waiting.pop(0)
            self.running.append(r)  # running first: a failure in admit releases it
            self.life.admit(r, m)
        finally:
            self.admitting = 0
        return True

    def next_arrival(self, step: int) -> int | None:
        """The step to jump to when nothing runs and the head has not arrived (else None)."""
        if self.running or not self.waiting or self.waiting[0].arrival <= step:
            return None
        return self.waiting[0].arrival
