"""The two pools over one byte buffer: `UnifiedPool` (the boundary moves) and `StaticPool`
(split once by SGLang's ratio), and `make_pool` to pick one by name.

``StaticPool`` splits the buffer SGLang-style, state budget = ``T * r / (1 + r)``, with the same
verbs as the unified pool; its two regions never lend each other bytes. Left out: anything the
shared machinery leaves out (`kda_core.memory._two_ended`).
"""

from __future__ import annotations

import math

import numpy as np

from kda_core.memory._two_ended import MODES, SIDES, TwoEndedPool


class UnifiedPool(TwoEndedPool):
    """KV pages from the top, state slots from the bottom of one byte buffer; boundary moves.

    ``UnifiedPool(total_bytes, kv_entry_bytes, state_entry_bytes, mode="eager" | "lazy",
    store=True, max_moves_per_flush=4096, verify=True)``. With ``store=False`` no buffer is
    allocated (bytes are only counted, for replays at real GPU sizes); ``write`` / ``read`` then
    raise. ``verify=False`` skips the per-entry CRC32 bookkeeping (faster; ``check_integrity``
    then checks tables and byte accounting only).
    """

    def _room(self, side: str) -> int:
        return self.gap_bytes // self._sides[side].entry_bytes

    def _room_after_relief(self, side: str) -> int:
        peer = self._peer(side)
        return (self.gap_bytes + peer.holes * peer.entry_bytes) // self._sides[side].entry_bytes

    def _relieve(self, side: str) -> None:
        self._flush(self._peer(side), None)  # urgent: no cap on moves

    def state_cost_in_kv_entries(self) -> int:
        """KV entries an admission must reserve per new state slot: ceil(S / P)."""
        return math.ceil(self._sides["state"].entry_bytes / self._sides["kv"].entry_bytes)


class StaticPool(TwoEndedPool):
    """Two fixed regions of one buffer, split by ``ratio`` as SGLang sizes them.

    state slots = floor((T * r / (1 + r)) / S) at the bottom; KV pages = (T - slots * S) // P
    at the top. Frees leave holes that only their own side reuses (no compaction needed).
    """

    def __init__(
        self,
        total_bytes: int,
        kv_entry_bytes: int,
        state_entry_bytes: int,
        ratio: float = 0.9,
        store: bool = True,
        verify: bool = True,
    ) -> None:
        super().__init__(
            total_bytes, kv_entry_bytes, state_entry_bytes, "lazy", store, verify=verify
        )
        self.ratio = _check_ratio(ratio)
        t = self.total_bytes
        budget = int(t * self.ratio / (1.0 + self.ratio))
        self.state_capacity = budget // state_entry_bytes
        self.kv_capacity = (t - self.state_capacity * state_entry_bytes) // kv_entry_bytes

    def capacity(self, side: str) -> int:
        self._check_side(side)
        return self._capacity(side)

    def _capacity(self, side: str) -> int:
        return self.state_capacity if side == "state" else self.kv_capacity

    def _room(self, side: str) -> int:
        return self._capacity(side) - self._sides[side].wm

    def on_idle(self) -> int:
        return 0

    def check_integrity(self, check_bytes: bool = True) -> None:
        """The shared invariants, plus: each side stays inside its fixed region."""
        super().check_integrity(check_bytes)
        for side in SIDES:
            if self._sides[side].wm > self._capacity(side):
                raise AssertionError(f"{side} side crossed its static region")


def _check_ratio(ratio: object) -> float:
    if (
        isinstance(ratio, bool)
        or not isinstance(ratio, (int, float, np.floating))
        or not (0.0 <= float(ratio) <= 1e6)
    ):
        raise ValueError(f"ratio must be a number in [0, 1e6], got {ratio!r}")
    return float(ratio)


def make_pool(
    kind: str,
    total_bytes: int,
    kv_entry_bytes: int,
    state_entry_bytes: int,
    ratio: float = 0.9,
    store: bool = True,
    verify: bool = True,
) -> TwoEndedPool:
    """``kind`` = "eager" | "lazy" (UnifiedPool) or "static" (StaticPool at ``ratio``). A bad
    ``ratio`` is refused whatever the kind (only "static" uses it)."""
    _check_ratio(ratio)
    if kind == "static":
        return StaticPool(total_bytes, kv_entry_bytes, state_entry_bytes, ratio, store, verify)
    if kind in MODES:
        return UnifiedPool(
            total_bytes, kv_entry_bytes, state_entry_bytes, kind, store, verify=verify
        )
    raise ValueError(f"kind must be one of ['eager', 'lazy', 'static'], got {kind!r}")


__all__ = ["StaticPool", "UnifiedPool", "make_pool"]
