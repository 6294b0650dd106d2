"""Shared helpers of the radix scenario tests (tests/test_radix*.py), on the cache protocol and
its read-only ``export`` view."""

from __future__ import annotations

import numpy as np

from kda_core.cache.radix import NodeView, RadixStateCache, StateRows


def _free_log():
    log = {"kv": [], "state": []}

    def on_kv(payload, n):
        log["kv"].append((payload, n))

    def on_state(payload, n):
        log["state"].append((payload, n))

    return log, on_kv, on_state


class Pick:
    """A ``victim`` hook that evicts the node named by ``id`` (a ``NodeView.id``) and nothing
    else: tests use it to evict one chosen state through ``evict(states=1)``."""

    def __init__(self) -> None:
        self.id: int | None = None

    def __call__(self, rows: StateRows) -> int:
        hit = np.flatnonzero(rows.live & rows.evictable & (rows.node_id == self.id))
        return int(hit[0]) if hit.size else -1


def _cache(**kw) -> RadixStateCache:
    kw.setdefault("grid", 4)
    return RadixStateCache(**kw)


def _key_of(by_id: dict[int, NodeView], v: NodeView) -> tuple:
    key: list = []
    while v.parent != -1:
        key = list(v.key) + key
        v = by_id[v.parent]
    return tuple(key)


def _states(cache: RadixStateCache) -> dict[tuple, int]:
    """{prefix: nbytes} of every checkpoint, from the drawing export."""
    by_id = {v.id: v for v in cache.export()}
    return {_key_of(by_id, v): v.state_bytes for v in by_id.values() if v.has_state}


def view_at(cache: RadixStateCache, prefix) -> NodeView | None:
    """The node whose edge ends exactly at ``prefix`` (None: no node ends there)."""
    by_id = {v.id: v for v in cache.export()}
    return next((v for v in by_id.values() if _key_of(by_id, v) == tuple(prefix)), None)


def paths(cache: RadixStateCache) -> list[tuple[tuple, tuple[int, ...]]]:
    """Every root-to-leaf key with its checkpoint positions (tokens), from the export."""
    by_id = {v.id: v for v in cache.export()}
    out = []
    for v in by_id.values():
        if not v.is_leaf:
            continue
        chain, n = [], v
        while n.parent != -1:
            chain.append(n)
            n = by_id[n.parent]
        chain.reverse()
        key = tuple(x for n in chain for x in n.key)
        out.append((key, tuple(n.end for n in chain if n.has_state)))
    return out
