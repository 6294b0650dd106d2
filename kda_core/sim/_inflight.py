"""The in-flight schedule: requests overlap in time and checkpoints enter the tree as computed.

What the batched engine does (``kda_core/serve/_lifecycle.py``, after SGLang's
``UnifiedRadixCache.checkpoint_into_tree`` for a running request, formerly
``cache_unfinished_req``): a request is matched when it starts; each planned checkpoint at or
before its input length is inserted the moment prefill reaches it, and the request's state lock
moves to that node; decode-time checkpoints wait for the request's end (the same call once it
has finished, formerly ``cache_finished_req``).
A request arriving while an earlier one with the same prefix is still prefilling matches only
what has been inserted so far. Running requests hold locks (their matched path's KV, their
deepest state), so nothing they stand on is evicted.

Timing assumption (docs/simulator.md): a request starts at its arrival (``servers=None``: no
contention, every prefill at the full ``TimeModel`` rate) or when one of ``servers`` FCFS
prefill servers is free; position ``p`` is done at ``start + overhead + F(restore, p) / rate``;
the request ends ``decode_s_per_token`` per output token after its prefill. Events at one
instant: checkpoints, then freed servers, then request ends, then new starts.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core.cache import policy as policy_mod
from kda_core.sim import costmodel
from kda_core.sim._placement import RequestLog, RunCtx, kv_cleanup, place, release, try_lock
from kda_core.sim._sequential import PROGRESS_EVERY, Tuner, request_keys
from kda_core.workloads import Trace

CHECKPOINT, FREE, END = 0, 1, 2  # event ranks: the order of events at one instant


@dataclass(frozen=True, slots=True)
class Timing:
    """The time model of an in-flight run (see the module docstring)."""

    cspec: costmodel.CostSpec
    time_model: costmodel.TimeModel
    servers: int | None

    def flops_fn(self) -> Callable[[float, float], float]:
        """``costmodel.prefill_flops`` for scalars, inlined (called per checkpoint; the
        agreement is tested)."""
        spec = self.cspec
        per_tok = spec.per_token_flops
        pair = spec.n_attn_layers * spec.attn_pair_flops
        causal = spec.causal

        def flops(s: float, e: float) -> float:
            pairs = (e * (e + 1.0) - s * (s + 1.0)) / 2.0 if causal else e * e - s * s
            return (e - s) * per_tok + pair * pairs

        return flops


@dataclass(slots=True)
class _Running:
    key: np.ndarray
    ins_key: np.ndarray
    late: list[int]  # decode-time positions (> input length), inserted at the end
    kv_handle: Any  # KV-locked: the matched path's handle
    state_handle: Any  # state-locked: the restore point's, then the deepest inserted checkpoint's


class _Loop:
    """One in-flight run: an event heap over the trace's arrivals."""

    def __init__(self, ctx: RunCtx, trace: Trace, n: int, outputs: bool, timing: Timing) -> None:
        self.ctx, self.trace, self.n, self.outputs = ctx, trace, n, outputs
        self.log = RequestLog(n)
        self.events: list[tuple[float, int, int, int]] = []
        self.running: dict[int, _Running] = {}
        self.queue: deque[int] = deque()
        self.free = timing.servers
        self.flops = timing.flops_fn()
        tm = timing.time_model
        self.rate, self.overhead, self.decode_s = (
            tm.flops_per_s,
            tm.overhead_s,
            tm.decode_s_per_token,
        )
        self.lens = trace.input_len.tolist()
        self.outs = trace.output_len.tolist()
        pol = ctx.pol
        self.marconi = pol if isinstance(pol, policy_mod.MarconiPolicy) else None
        self.started = 0

    def start(self, i: int, now: float) -> None:
        ctx, cache, L = self.ctx, self.ctx.cache, self.lens[i]
        key, ins_key, total = request_keys(self.trace, i, self.outputs)
        if self.marconi is not None:
            self.marconi.note_request()
        m = ctx.lookup(key, L, i)
        tm = min(m.token_match, L)
        ra = min(m.restore_at, tm)
        self.log.token_match[i], self.log.restore_at[i] = tm, ra
        pos = ctx.pol.plan(L, m.token_match, m.restore_at, total, ctx.page)  # validated values
        ctx.steps += len(key)
        kv_handle = m.path if m.path.cached_len > 0 else None
        state_handle = m.restore if m.restore_at > 0 else None
        if kv_handle is not None:
            cache.lock_handle(kv_handle)
        if state_handle is not None:
            cache.lock_handle(state_handle)
        late = [p for p in pos if p > L]
        self.running[i] = _Running(key, ins_key, late, kv_handle, state_handle)
        t0 = now + self.overhead
        for p in pos:
            if p <= L:
                heapq.heappush(self.events, (t0 + self.flops(ra, p) / self.rate, CHECKPOINT, i, p))
        prefilled = t0 + self.flops(ra, L) / self.rate
        if self.free is not None:
            heapq.heappush(self.events, (prefilled, FREE, i, 0))
        heapq.heappush(self.events, (prefilled + self.outs[i] * self.decode_s, END, i, 0))
        self.started += 1

    def held_tokens(self, r: _Running) -> int:
        handles = [h for h in (r.kv_handle, r.state_handle) if h is not None]
        return max((h.cached_len for h in handles), default=0)

    def checkpoint(self, i: int, p: int) -> None:
        r = self.running[i]
        cache = self.ctx.cache
        new, res = place(self.ctx, r.ins_key, [p], self.held_tokens(r))
        self.log.new[i] += new
        if res is not None and try_lock(cache, res.handle):  # the new checkpoint first: the
            if r.state_handle is not None:  # path is never unlocked in between
                release(cache, r.state_handle)
            r.state_handle = res.handle

    def end(self, i: int) -> None:
        r = self.running.pop(i)
        ctx, cache = self.ctx, self.ctx.cache
        if r.late:
            new, _ = place(ctx, r.ins_key, r.late, self.held_tokens(r))
            self.log.new[i] += new
        if r.state_handle is not None:
            release(cache, r.state_handle)
        if r.kv_handle is not None:
            release(cache, r.kv_handle)
        self.log.kv_peak[i] = cache.kv_tokens  # sampled before the clean-up eviction below
        kv_cleanup(ctx)
        self.log.sample(i, ctx)

    def admit(self, now: float, tuner: Tuner | None) -> None:
        """Start queued requests while a server is free (all of them when unbounded)."""
        while self.queue and (self.free is None or self.free > 0):
            if self.free is not None:
                self.free -= 1
            self.start(self.queue.popleft(), now)
            if tuner is not None:
                tuner(self.started)


def run_inflight(
    ctx: RunCtx,
    trace: Trace,
    n: int,
    outputs: bool,
    progress: Callable[[int, int], Any] | None,
    check: bool,
    tuner: Tuner | None,
    timing: Timing,
) -> dict:
    """The event loop; returns the same per-request arrays as ``run_sequential``."""
    loop = _Loop(ctx, trace, n, outputs, timing)
    arrivals = trace.arrival_s.tolist()
    nxt, ended = 0, 0
    events = loop.events
    while nxt < n or events:
        if events and (nxt >= n or events[0][0] <= arrivals[nxt]):
            t, kind, i, p = heapq.heappop(events)
            if kind == CHECKPOINT:
                loop.checkpoint(i, p)
            elif kind == FREE:
                loop.free += 1  # type: ignore[operator]
                loop.admit(t, tuner)
            else:
                loop.end(i)
                ended += 1
                if check:
                    ctx.cache.check_integrity()
                if progress is not None and ended % PROGRESS_EVERY == 0:
                    progress(ended, n)
            continue
        loop.queue.append(nxt)
        loop.admit(arrivals[nxt], tuner)
        nxt += 1
    if progress is not None:
        progress(n, n)
    return loop.log.as_dict(ctx)
