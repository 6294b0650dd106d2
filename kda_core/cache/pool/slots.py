"""Slot bookkeeping shared by the state pools: shapes, counts, a free list + owner table.

``_Slots`` is the table (``free + owned == capacity`` always); ``_SlotView`` is the part of it
both pools expose. Constants: per-strategy slot counts (SGLang §1.10 "held" counts).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core.model import TinyHybrid

MAX_SLOTS = 4096
"""Most slots one pool may hold (caps memory)."""
STRATEGIES: tuple[str, ...] = ("no_buffer", "extra_buffer", "extra_buffer_lazy")
SLOTS_UP_FRONT: dict[str, int] = {"no_buffer": 1, "extra_buffer": 3, "extra_buffer_lazy": 2}
"""Active-pool slots a request holds from admission (SGLang §1.10 "held" counts)."""
SLOTS_MAX: dict[str, int] = {"no_buffer": 1, "extra_buffer": 3, "extra_buffer_lazy": 3}
"""Most active-pool slots a request can hold at once."""

__all__ = [
    "MAX_SLOTS",
    "SLOTS_MAX",
    "SLOTS_UP_FRONT",
    "STRATEGIES",
    "PoolError",
    "PoolStats",
    "StateShape",
]


def deepcopy_fields(obj: Any, memo: dict) -> Any:
    """A new instance of ``type(obj)`` with every attribute deep-copied (``memo`` registered
    first): the pools' ``__deepcopy__``, which then make their read-only arrays read-only
    again (numpy's deepcopy returns writable arrays)."""
    new = type(obj).__new__(type(obj))
    memo[id(obj)] = new
    for key, value in obj.__dict__.items():
        setattr(new, key, copy.deepcopy(value, memo))
    return new


class PoolError(AssertionError):
    """Raised by ``check_integrity`` when an invariant is broken."""


@dataclass(slots=True, frozen=True)
class StateShape:
    """Per-slot shapes: S [L, H, K, V] and conv [L, W-1, D] (D = 3HK), float64."""

    layers: int
    heads: int
    k: int
    v: int
    conv_rows: int
    conv_dim: int

    @classmethod
    def of(cls, model: TinyHybrid) -> StateShape:
        c = model.config
        return cls(
            len(model.kda_layers),
            c.n_heads,
            c.head_dim,
            c.head_dim,
            c.conv_size - 1,
            3 * c.n_heads * c.head_dim,
        )

    @property
    def s(self) -> tuple[int, int, int, int]:
        return (self.layers, self.heads, self.k, self.v)

    @property
    def conv(self) -> tuple[int, int, int]:
        return (self.layers, self.conv_rows, self.conv_dim)

    @property
    def native_bytes(self) -> int:
        """Bytes of one full-precision slot (S + conv, float64)."""
        return 8 * (math.prod(self.s) + math.prod(self.conv))  # per insert: no numpy call

    @property
    def int8_bytes(self) -> int:
        """Bytes of one INT8 checkpoint: int8 S codes + float64 scales [L, H, K] + native conv."""
        L, H, K, V = self.s
        return L * H * K * V + 8 * L * H * K + 8 * int(np.prod(self.conv))


@dataclass(slots=True, frozen=True)
class PoolStats:
    """Counts for the pools panel."""

    active_capacity: int
    active_used: int
    checkpoint_capacity: int
    checkpoint_used: int
    checkpoint_bytes: int
    copies: int
    donations: int
    loads: int
    track_writes: int
    int8: bool


class _Slots:
    """A free list + owner table; ``free + owned == capacity`` always."""

    __slots__ = ("capacity", "_free", "_owner", "name")

    def __init__(self, capacity: int, name: str) -> None:
        self.capacity = capacity
        self.name = name
        self._free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest slot first
        self._owner: dict[int, str] = {}

    @property
    def n_free(self) -> int:
        return len(self._free)

    @property
    def n_used(self) -> int:
        return len(self._owner)

    def can_allocate(self, n: int = 1) -> bool:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        return len(self._free) >= n

    def take(self, owner: str) -> int:
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty str, got {owner!r}")
        if not self._free:
            raise ValueError(f"{self.name} pool is full ({self.capacity} slots): cannot allocate")
        slot = self._free.pop()
        self._owner[slot] = owner
        return slot

    def check(self, slot: Any, name: str = "slot") -> int:
        # fast path (the runner binds every request's state each step): a plain int the
        # owner table holds is allocated, so in range; anything else takes the checks below
        if type(slot) is int and slot in self._owner:
            return slot
        return self._check_slot(slot, name)

    def _check_slot(self, slot: Any, name: str) -> int:
        """The full check (the naive twin of ``check``'s fast path; tests compare them)."""
        if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)):
            raise ValueError(f"{name} must be an integer slot id, got {slot!r}")
        s = int(slot)
        if not 0 <= s < self.capacity:
            raise ValueError(f"{name} must be in [0, {self.capacity - 1}], got {s}")
        if s not in self._owner:
            raise ValueError(f"{name} {s} of the {self.name} pool is not allocated")
        return s

    def release(self, slot: Any) -> int:
        s = self.check(slot)
        del self._owner[s]
        self._free.append(s)
        return s

    def owner(self, slot: Any) -> str | None:
        if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)):
            raise ValueError(f"slot must be an integer slot id, got {slot!r}")
        return self._owner.get(int(slot))

    def set_owner(self, slot: Any, owner: str) -> None:
        s = self.check(slot)
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty str, got {owner!r}")
        self._owner[s] = owner

    def owned(self) -> dict[int, str]:
        return dict(self._owner)

    def check_integrity(self) -> None:
        free = self._free
        if len(set(free)) != len(free):
            raise PoolError(f"{self.name}: a slot is on the free list twice")
        if any(s in self._owner for s in free):
            raise PoolError(f"{self.name}: a slot is both free and owned")
        if len(free) + len(self._owner) != self.capacity:
            raise PoolError(
                f"{self.name}: free {len(free)} + owned {len(self._owner)} != {self.capacity}"
            )
        if any(not 0 <= s < self.capacity for s in (*free, *self._owner)):
            raise PoolError(f"{self.name}: slot id out of range")


class _SlotView:
    """The slot bookkeeping both pools expose, read through their ``_slots`` (a :class:`_Slots`)."""

    _slots: _Slots

    @property
    def capacity(self) -> int:
        return self._slots.capacity

    @property
    def n_free(self) -> int:
        return self._slots.n_free

    @property
    def n_used(self) -> int:
        return self._slots.n_used

    def can_allocate(self, n: int = 1) -> bool:
        return self._slots.can_allocate(n)

    def owner(self, slot: int) -> str | None:
        return self._slots.owner(slot)

    def set_owner(self, slot: int, owner: str) -> None:
        """Hand the slot to another owner (e.g. a checkpoint to "tree" after insert)."""
        self._slots.set_owner(slot, owner)

    def owned(self) -> dict[int, str]:
        return self._slots.owned()
