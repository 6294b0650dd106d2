"""Radix tree parts: the node, the result types, key helpers (no tree logic).

``Node`` is internal: callers outside ``kda_core.cache`` hold the opaque handles of
``kda_core.cache.protocol``; the legacy API (``match``/``insert``/``lock_state`` ...) still
returns and takes nodes. Lengths in every result are tokens (docs/radix.md).
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from kda_core.cache.protocol import Evicted

MAX_KEY_LEN = 1 << 22
"""Longest key (elements) accepted by ``match``/``insert``; caps memory per call."""
MAX_PAGE_SIZE = 1 << 16
STATE_TOUCH_MODES = ("node", "path", "path_tail_first")

__all__ = [
    "MAX_KEY_LEN",
    "MAX_PAGE_SIZE",
    "STATE_TOUCH_MODES",
    "CacheStats",
    "Evicted",
    "InsertResult",
    "IntegrityError",
    "MatchResult",
    "Node",
    "NodeView",
    "StateTable",
]


class IntegrityError(AssertionError):
    """Raised by ``RadixStateCache.check_integrity`` when an invariant is broken."""


_NO_CHILDREN: dict = {}
"""Shared (never written) children dict of leaves: fewer GC-tracked objects per node."""


class Node:
    """One tree node (the node API passes it back to lock/unlock/evict; the cache protocol
    hands out opaque ``RadixHandle`` instead).

    ``plen`` is the prefix length in key elements at the node's end.
    """

    __slots__ = (
        "id",
        "owner",
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
        "alive",
        "__weakref__",  # tests check that removed nodes are unreachable (issue #11, bug 5)
    )

    def __init__(
        self,
        nid: int,
        owner: int,
        key: tuple,
        kv: Any,
        parent: Node | None,
        plen: int,
        has_state: bool = False,
        state: Any = None,
        state_bytes: int = 0,
        state_time: int = 0,
    ):
        self.id = nid
        self.owner = owner
        self.key = key
        self.kv = kv
        self.parent = parent
        self.children: dict = _NO_CHILDREN
        self.plen = plen
        self.has_state = has_state  # the insert's new chain creates its nodes with a state
        self.state: Any = state
        self.state_bytes = state_bytes
        self.kv_lock = 0
        self.state_lock = 0
        self.kv_time = 0
        self.state_time = state_time
        self.srow = -1
        self.sprot = False
        self.alive = True

    def __repr__(self) -> str:
        tag = "state" if self.has_state else "tombstone"
        return f"Node(id={self.id}, plen={self.plen}, edge={len(self.key)}, {tag})"


class MatchResult(NamedTuple):
    """Result of ``RadixStateCache.match``; lengths in tokens.

    token_match >= restore_at; ``kv`` holds the edge payloads root-first covering exactly
    ``[0, restore_at)``; ``node`` is the restore node (the root when restore_at == 0);
    ``branch`` is SGLang's hint ``floor(token_match/grid)*grid`` if that exceeds restore_at.
    """

    token_match: int
    restore_at: int
    node: Node
    state: Any
    state_bytes: int
    kv: tuple
    branch: int | None
    mid_edge: bool
    last_node: Node


class InsertResult(NamedTuple):
    """Result of ``RadixStateCache.insert``; lengths in tokens.

    prefix_len: tokens of the key already in the tree before the insert.
    inserted_len: tokens of the key now in the tree (the deepest checkpoint position).
    new / existed: checkpoint positions stored now / already present (caller frees its copy).
    capped: states tombstoned by the per-path budget (freed through ``on_free_state``).
    """

    prefix_len: int
    inserted_len: int
    node: Node | None
    new: tuple[int, ...]
    existed: tuple[int, ...]
    capped: int


class CacheStats(NamedTuple):
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


class NodeView(NamedTuple):
    """One node for drawing (``RadixStateCache.export``); lengths in tokens, ages in ticks."""

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


class StateTable(NamedTuple):
    """Read-only views of the per-state arrays (rows with ``live`` False are free).

    length: tokens at the node's end; anc_length: tokens at the nearest state-holding proper
    ancestor's end (0 = root); time: last state access (logical clock); evictable: not
    protected by a lock; nchild: number of children of the node; version: changes whenever
    length, anc_length or nbytes of the row change (lets policies cache derived values).
    """

    live: np.ndarray
    evictable: np.ndarray
    nchild: np.ndarray
    time: np.ndarray
    length: np.ndarray
    anc_length: np.ndarray
    nbytes: np.ndarray
    version: np.ndarray


def _default_kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    if payload is None:
        return None
    if isinstance(payload, numbers.Integral) and not isinstance(payload, bool):
        p = int(payload)
        return p * stop // length - p * start // length
    if isinstance(payload, numbers.Real) and not isinstance(payload, bool):
        return float(payload) * (stop - start) / length
    return payload[start:stop]


def _common_prefix(e: tuple, k: tuple, i: int, limit: int) -> int:
    """Length of the common prefix of ``e`` and ``k[i:]``, at most ``limit`` (C-speed slices)."""
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


class _Acc:
    __slots__ = ("states", "state_bytes", "kv_tokens", "nodes", "tombstoned")

    def __init__(self) -> None:
        self.states = 0
        self.state_bytes = 0
        self.kv_tokens = 0
        self.nodes = 0
        self.tombstoned = 0

    def result(self) -> Evicted:
        return Evicted(self.states, self.state_bytes, self.kv_tokens, self.nodes, self.tombstoned)


_owner_counter = [0]
"""Source of cache ids (``RadixStateCache.cache_id``); nodes carry their cache's id."""


def next_cache_id() -> int:
    _owner_counter[0] += 1
    return _owner_counter[0]
