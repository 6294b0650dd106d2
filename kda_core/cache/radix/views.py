"""What a radix cache hands out: read-only views (lengths in tokens) and ``IntegrityError``."""

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
