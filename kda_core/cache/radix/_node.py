"""The radix tree's node record (callers outside the package never see one: they hold handles
and read ``views.NodeView``) and the key helpers its walks share."""

from __future__ import annotations

import numbers
from typing import Any

NO_CHILDREN: dict = {}
"""The shared (never written) children dict of leaves: fewer GC-tracked objects per node."""


class Node:
    """One tree node. ``plen``: key elements from the root to the node's end; ``kv``: its
    edge's payload; ``state`` / ``state_bytes``: its checkpoint when ``has_state`` (else a
    tombstone); ``kv_lock`` / ``state_lock``: lock counts; ``kv_time`` / ``state_time``:
    last access (logical clock); ``srow``: its row in the state table (-1: none);
    ``sprot``: its state is protected (cached). A removed node has no ``parent``."""

    __slots__ = (
        "id",
        "key",
        "kv",
        "parent",
        "children",
        "plen",
        "has_state",
        "state",
        "state_bytes",
        "kv_lock",
        "state_lock",
        "kv_time",
        "state_time",
        "srow",
        "sprot",
        "__weakref__",  # handles hold their node weakly; tests check removed nodes are garbage
    )

    def __init__(self, nid: int, key: tuple, kv: Any, parent: Node | None, plen: int) -> None:
        self.id = nid
        self.key = key
        self.kv = kv
        self.parent = parent
        self.children: dict = NO_CHILDREN
        self.plen = plen
        self.has_state = False
        self.state: Any = None
        self.state_bytes = 0
        self.kv_lock = 0
        self.state_lock = 0
        self.kv_time = 0
        self.state_time = 0
        self.srow = -1
        self.sprot = False


def default_kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    """Split a KV payload on an edge split: None stays None, numbers are byte counts split
    proportionally (the pieces add up to the whole), anything else is sliced."""
    if payload is None:
        return None
    if isinstance(payload, numbers.Integral) and not isinstance(payload, bool):
        p = int(payload)
        return p * stop // length - p * start // length
    if isinstance(payload, numbers.Real) and not isinstance(payload, bool):
        return float(payload) * (stop - start) / length
    return payload[start:stop]


def common_prefix(e: tuple, k: tuple, i: int, limit: int) -> int:
    """Length of the common prefix of ``e`` and ``k[i:]``, at most ``limit`` (C-speed slices:
    doubling probes, then a bisection inside the first block that differs)."""
    j = 0
    step = 32
    while j < limit:
        s = min(step, limit - j)
        if e[j : j + s] == k[i + j : i + j + s]:
            j += s
            if step < 8192:
                step *= 2
            continue
        lo, hi = j, j + s
        while hi - lo > 16:
            mid = (lo + hi) // 2
            if e[lo:mid] == k[i + lo : i + mid]:
                lo = mid
            else:
                hi = mid
        while lo < hi and e[lo] == k[i + lo]:
            lo += 1
        return lo
    return limit
