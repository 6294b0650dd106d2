"""The radix tree's records: ``Node`` (callers outside the package never see one: they hold
handles and read a ``NodeView``), ``StateTable``, the walks' shared ``common_prefix``, and what
the cache hands out (the package re-exports them): read-only views (lengths in tokens) and
``IntegrityError``."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class IntegrityError(AssertionError):
    """Raised by ``RadixStateCache.check_integrity`` when an invariant is broken."""


class NodeView(NamedTuple):
    """One node, read-only (``RadixStateCache.export``): lengths in tokens, ages in ticks;
    ``state`` is the checkpoint's payload (None for a tombstone and the root), ``kv`` the
    edge's KV payload."""

    id: int
    parent: int
    depth: int
    start: int
    end: int
    key: tuple
    has_state: bool
    state_bytes: int
    kv_lock: int
    state_lock: int
    kv_age: int
    state_age: int
    is_leaf: bool
    state: Any = None
    kv: Any = None


class CacheStats(NamedTuple):
    """Sizes and event counters of a cache (``RadixStateCache.stats``)."""

    nodes: int
    tombstones: int
    kv_tokens: int
    kv_protected: int
    kv_evictable: int
    states: int
    state_bytes: int
    states_protected: int
    state_bytes_protected: int
    states_evictable: int
    state_bytes_evictable: int
    matches: int
    state_hits: int
    token_hits: int
    states_inserted: int
    states_existed: int
    evicted_states: int
    evicted_state_bytes: int
    evicted_kv_tokens: int
    tombstoned: int
    pruned: int
    splits: int
    capped: int
    clock: int


class StateRows(NamedTuple):
    """Read-only views of a ``StateTable`` (valid until the cache changes). Rows with ``live``
    False are free; ``clock`` is the cache's logical time, ``owner`` its id (a policy keys
    per-cache memos on it)."""

    live: np.ndarray
    evictable: np.ndarray
    nchild: np.ndarray
    time: np.ndarray
    length: np.ndarray
    anc_length: np.ndarray
    nbytes: np.ndarray
    version: np.ndarray
    node_id: np.ndarray
    clock: int
    owner: int


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


_COLUMNS = StateRows._fields[:-2]
"""The table's numpy columns, named as in ``StateRows``."""


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class StateTable:
    """One numpy row per checkpoint (the ``_COLUMNS`` arrays; a row names its node by id), kept
    only by a cache built with a ``victim`` hook (Marconi's FLOP-aware eviction): LRU users
    never pay for it. A row's version changes whenever its length, ancestor or bytes change (a
    policy may cache values derived from it)."""

    def __init__(self, capacity: int = 64) -> None:
        self.free_rows = list(range(capacity - 1, -1, -1))
        self.ver = 0
        for name in _COLUMNS:
            kind = bool if name in ("live", "evictable") else np.int64
            setattr(self, name, np.zeros(capacity, dtype=kind))

    def _grow(self) -> None:
        old = len(self.live)
        self.free_rows = list(range(2 * old - 1, old - 1, -1))
        for name in _COLUMNS:
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros_like(a)]))

    def _bump(self, row: int) -> None:
        self.ver += 1
        self.version[row] = self.ver

    def add(self, node: Node, length: int, anc_length: int) -> None:
        """A new checkpoint at ``node`` (``length`` tokens; nearest checkpointed ancestor at
        ``anc_length``); the checkpoints below it now have it as their ancestor."""
        if not self.free_rows:
            self._grow()
        r = self.free_rows.pop()
        node.srow = r
        self.live[r] = True
        self.length[r] = length
        self.anc_length[r] = anc_length
        self.nbytes[r] = node.state_bytes
        self.time[r] = node.state_time
        self.node_id[r] = node.id
        self.protect(node)
        self._bump(r)
        if node.children:
            self.set_region_ancestor(node, length)

    def remove(self, node: Node) -> None:
        """``node``'s checkpoint is gone: the checkpoints below it fall back to its ancestor."""
        r = node.srow
        if node.children:
            self.set_region_ancestor(node, int(self.anc_length[r]))
        self.live[r] = False
        self.evictable[r] = False
        self.free_rows.append(r)
        node.srow = -1

    def set_region_ancestor(self, node: Node, anc_length: int) -> None:
        """The nearest checkpointed ancestor of the checkpoints right below ``node``."""
        stack = list(node.children.values())
        while stack:
            c = stack.pop()
            if c.has_state:
                self.anc_length[c.srow] = anc_length
                self._bump(c.srow)
            else:
                stack.extend(c.children.values())

    def protect(self, node: Node) -> None:
        """``node``'s protection or child count changed."""
        r = node.srow
        self.evictable[r] = not node.sprot
        self.nchild[r] = len(node.children)

    def rows(self, clock: int, owner: int) -> StateRows:
        return StateRows(*(_readonly(getattr(self, n)) for n in _COLUMNS), clock, owner)
