"""Shared helpers of the radix scenario tests (tests/test_radix*.py)."""

from __future__ import annotations

from kda_core.cache.radix import RadixStateCache


def _free_log():
    log = {"kv": [], "state": []}

    def on_kv(payload, n):
        log["kv"].append((payload, n))

    def on_state(payload, n):
        log["state"].append((payload, n))

    return log, on_kv, on_state


def _cache(**kw) -> RadixStateCache:
    kw.setdefault("grid", 4)
    return RadixStateCache(**kw)


def _states(cache: RadixStateCache) -> dict[tuple, int]:
    """{prefix: nbytes} of every checkpoint, from the drawing export."""
    out = {}
    by_id = {v.id: v for v in cache.export()}
    for v in by_id.values():
        if v.has_state:
            key, n = [], v
            while n.parent != -1:
                key = list(n.key) + key
                n = by_id[n.parent]
            out[tuple(key)] = v.state_bytes
    return out
