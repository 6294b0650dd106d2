"""Queueing at a point's concurrency cap: who waits, for how long, and when KV runs short.

A request runs from its start for its prefill (the cost model's seconds for the tokens it did
not restore) plus its decode (``output_len * TimeModel.decode_s_per_token``). Requests start in
arrival order (FCFS, no overtaking), each once a running slot is free (at most ``max_running``
run) and the KV pool can hold its input beside the inputs of those running (the lab's reading
of SGLang's admission, which checks the prompt's tokens against the free pool). A request
admitted while the running requests' full contexts (input + output) exceed the pool is counted
as a retraction: before they all finish, the scheduler runs out of KV for decode and retracts
one (``ScheduleBatch.retract_decode``). TTFT = wait + prefill seconds. docs/plan.md.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np


class QueueStats(NamedTuple):
    ttft_s: np.ndarray  # per request
    wait_s: np.ndarray
    queued: int  # requests that waited
    retractions: int
    peak_running: int


def fcfs(
    arrival: np.ndarray,
    prefill_s: np.ndarray,
    decode_s: np.ndarray,
    inputs: np.ndarray,
    context: np.ndarray,
    max_running: int,
    kv_tokens: int,
) -> QueueStats:
    """The queue (module docstring); arrays ``[N]`` in arrival order."""
    n = len(arrival)
    ar, pf, dc = arrival.tolist(), prefill_s.tolist(), decode_s.tolist()
    inp, ctx = inputs.tolist(), context.tolist()
    start = [0.0] * n
    heap: list[tuple[float, int, int]] = []  # (finish, input, context) of running requests
    used_in = used_ctx = retr = peak = 0
    last = 0.0
    for i in range(n):
        t = ar[i] if ar[i] > last else last
        while heap and heap[0][0] <= t:
            _, a, c = heapq.heappop(heap)
            used_in -= a
            used_ctx -= c
        while heap and (len(heap) >= max_running or used_in + inp[i] > kv_tokens):
            f, a, c = heapq.heappop(heap)
            t = f if f > t else t
            used_in -= a
            used_ctx -= c
        start[i] = last = t
        if used_ctx + ctx[i] > kv_tokens:
            retr += 1
        heapq.heappush(heap, (t + pf[i] + dc[i], inp[i], ctx[i]))
        used_in += inp[i]
        used_ctx += ctx[i]
        if len(heap) > peak:
            peak = len(heap)
    wait = np.asarray(start) - arrival
    return QueueStats(wait + prefill_s, wait, int((wait > 0).sum()), retr, peak)
