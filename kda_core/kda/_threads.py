"""Threads for the chunked path: how many, one shared pool per process, and a parallel reduction.

Heads are independent, so `chunked` hands groups of heads to a few threads (numpy releases the
GIL in BLAS calls and in ufunc loops and reductions). Left out: processes (the arrays would have
to be copied or shared) and any load-dependent choice (a run would depend on the machine).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

_MAX_THREADS = 64
_PREFIX = "kda-chunked"
T = TypeVar("T")
_Item = TypeVar("_Item")

# Reductions (the input checks) split over threads only above this many elements: a smaller
# array is reduced faster than the hand-off to a thread takes.
_REDUCE_ELEMENTS = 1 << 20


def _available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def kda_threads() -> int:
    """KDA_THREADS if set to an integer >= 1 (capped at MAX_THREADS), else every available core,
    as numpy's BLAS does. KDA_THREADS=1 is the single-thread path."""
    if threading.current_thread().name.startswith(_PREFIX):
        return 1  # already on a pool thread: waiting on the same pool could deadlock
    env = os.environ.get("KDA_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return min(int(env), _MAX_THREADS)
    return min(_available_cores(), _MAX_THREADS)


def pool(workers: int) -> ThreadPoolExecutor:
    # keyed by process: a pool inherited through fork has no live threads in the child
    return _pool_of(os.getpid(), workers)


@functools.lru_cache(maxsize=4)
def _pool_of(pid: int, workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=_PREFIX)


def reduce_rows(reduce: Callable[[np.ndarray], np.generic], x: np.ndarray) -> list[np.generic]:
    """`reduce` (np.sum, np.max, ...) of contiguous row ranges of x, on kda_threads() threads
    for large x; one range (a single call) otherwise. The caller combines the partial results."""
    n = min(kda_threads(), x.shape[0]) if x.ndim and x.size >= _REDUCE_ELEMENTS else 1
    if n == 1:
        return [reduce(x)]
    edges = [x.shape[0] * i // n for i in range(n + 1)]
    parts = [x[a:b] for a, b in zip(edges[:-1], edges[1:])]
    return list(pool(n).map(reduce, parts))


def for_each(items: list[_Item], job: Callable[[_Item], T]) -> list[T]:
    """``[job(x) for x in items]``: on the calling thread when there is one item, else on
    the pool (one thread per item); a worker's exception is re-raised here."""
    if len(items) == 1:
        return [job(items[0])]
    return [future.result() for future in [pool(len(items)).submit(job, x) for x in items]]
