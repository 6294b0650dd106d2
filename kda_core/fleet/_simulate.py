"""``simulate_fleet``: a trace through N replicas behind one router, fed by KV events.

Per request, in arrival order: the requests that finished by its arrival are reported to the
router; the router picks a replica from what it knows (``_routers``); the oracle (optional)
asks every replica what it would give, for the regret; the chosen replica serves the request
(``_replica.Replica``: the single-server simulator's step); the replica's events go through
the wire (msgpack, ``_events``) to the router; the cost model times it: each replica is a FCFS
prefill server (``TimeModel``: FLOPs of the uncached part / throughput) and holds the request
until its last output token (``decode_s_per_token`` each), the in-flight count the routers'
load terms read. Events reach the router before the next decision (no delay modelled).
"""

from __future__ import annotations

import gc
import heapq
import time
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core.fleet._events import decode_batch, encode_batch
from kda_core.fleet._replica import Replica
from kda_core.fleet._result import FleetResult, gap_reasons
from kda_core.fleet._routers import Request, make_router
from kda_core.fleet._setup import Setup
from kda_core.sim import costmodel, request_keys


def _flops_fn(spec: costmodel.CostSpec):
    """Prefill FLOPs of tokens ``[start, end)``: ``costmodel.prefill_flops`` on scalars,
    inlined (a numpy call per request costs more than the rest of the step; the agreement is
    tested)."""
    per_tok = spec.per_token_flops
    pair = spec.n_attn_layers * spec.attn_pair_flops
    causal = spec.causal

    def flops(start: int, end: int) -> float:
        if causal:
            pairs = (end * (end + 1) - start * (start + 1)) / 2.0
        else:
            pairs = float(end * end - start * start)
        return (end - start) * per_tok + pair * pairs

    return flops


def _order(n: int, seed: int) -> list[int]:
    """The routers' candidate order: 0..n-1 for seed 0, else a seeded permutation."""
    if seed == 0:
        return list(range(n))
    return [int(x) for x in np.random.default_rng(seed).permutation(n)]


Observer = Callable[[int, list, Any], None]


def run(s: Setup, observe: Observer | None = None) -> FleetResult:
    """One run. ``observe(i, replicas, key)``, if given, is called before request ``i`` is
    routed (tests compare the routers' indexes with the replicas' trees there)."""
    t0 = time.perf_counter()
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        out = _loop(s, observe)
    finally:
        if gc_was_on:
            gc.enable()
    return _result(s, out, time.perf_counter() - t0)


def _loop(s: Setup, observe: Observer | None) -> dict:
    trace, n, page = s.trace, s.replicas, s.page
    # SGLang publishes no state events; the state-aware router gets the lab's proposed ones
    proposed = s.engine == "sglang" and s.router == "state_aware"
    ppb = s.block_tokens // page
    router = make_router(
        s.router, n, _order(n, s.seed), s.block_tokens, page, s.weight, s.router_params
    )
    pub = router.uses_events
    reps = [
        Replica(s.pol, page, ppb, s.engine, s.groups, s.budgets, s.sizes, proposed, pub)
        for _ in range(n)
    ]
    N = len(trace)
    # per-request columns appended in C (a numpy item store per column and request costs more)
    out_r, out_exp, out_ra, out_tm = (array("q") for _ in range(4))
    out_ttft, out_queue, out_fin = (array("d") for _ in range(3))
    best = np.zeros(N, dtype=np.int64) if s.oracle else None
    free_at = [0.0] * n
    heap: list[tuple[float, int, int, Any]] = []
    flops, tm = _flops_fn(s.cspec), s.time_model
    overhead, rate = tm.overhead_s, tm.flops_per_s
    lens, outs = trace.input_len.tolist(), trace.output_len.tolist()
    arrival = trace.arrival_s.tolist()
    n_events = n_bytes = 0
    for i in range(N):
        now = arrival[i]
        while heap and heap[0][0] <= now:
            _, _, r_done, h = heapq.heappop(heap)
            router.finished(r_done, h)
        key, ins_key, total = request_keys(trace, i, s.outputs)
        if observe is not None:
            observe(i, reps, key)
        L = lens[i]
        key_pages = key.tolist()
        req = Request(key_pages, L // page, L)
        pages = (key_pages if ins_key is key else ins_key.tolist()) if pub else []
        r, expected = router.pick(req)
        handle = router.handle(req)
        if best is not None:
            best[i] = max(rep.probe(key, L) for rep in reps)
        rep = reps[r]
        tmatch, ra = rep.serve(key, ins_key, L, total, pages)
        evs = rep.take_events()
        if evs:
            payload = encode_batch(now, evs, r)
            n_events += len(evs)
            n_bytes += len(payload)
            router.events(r, decode_batch(payload)[1])
        start = max(now, free_at[r])
        done = start + overhead + flops(ra, L) / rate  # TimeModel.seconds on a scalar
        free_at[r] = done
        finish = done + outs[i] * tm.decode_s_per_token
        heapq.heappush(heap, (finish, i, r, handle))
        router.started(r, req, handle)
        out_r.append(r)
        out_exp.append(expected)
        out_ra.append(ra)
        out_tm.append(tmatch)
        out_ttft.append(done - now)
        out_queue.append(start - now)
        out_fin.append(finish)
    views = getattr(router, "views", None)
    dropped = sum(v.dropped for v in views) if views else 0
    cols = (out_r, out_exp, out_ra, out_tm)
    arrays = dict(zip(("replica", "expected", "cached", "tm"), (np.array(c) for c in cols)))
    times = dict(
        zip(("ttft", "queue", "finish"), (np.array(c) for c in (out_ttft, out_queue, out_fin)))
    )
    return dict(arrays=arrays, best=best, times=times, events=(n_events, n_bytes, dropped))


def _result(s: Setup, out: dict, elapsed: float) -> FleetResult:
    a, t = out["arrays"], out["times"]
    n_events, n_bytes, dropped = out["events"]
    return FleetResult(
        router=s.router,
        engine=s.engine,
        model=s.cspec.name,
        replicas=s.replicas,
        weight=s.weight,
        seed=s.seed,
        block_tokens=s.block_tokens,
        page_tokens=s.page,
        input_len=s.trace.input_len,
        replica=a["replica"],
        expected=a["expected"],
        cached=a["cached"],
        token_match=a["tm"],
        best=out["best"],
        reason=gap_reasons(a["expected"], a["cached"], a["tm"]),
        arrival_s=s.trace.arrival_s,
        ttft_s=t["ttft"],
        queue_s=t["queue"],
        finish_s=t["finish"],
        events=n_events,
        event_bytes=n_bytes,
        elapsed_s=elapsed,
        stats={"events_dropped": dropped},
    )
