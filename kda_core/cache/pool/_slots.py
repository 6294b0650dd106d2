"""The pools' slot table: a free list + owner table per pool, optionally counted against a
shared ``SlotBudget``; ``SlotPool`` is the part of it both pools expose, and
``deepcopy_fields`` their deep copy.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from kda_core.cache.pool.slots import PoolError, SlotBudget


def deepcopy_fields(obj: Any, memo: dict) -> Any:
    """A new instance of ``type(obj)`` with every attribute deep-copied (``memo`` registered
    first): the pools' ``__deepcopy__``, which then make their read-only arrays read-only
    again (numpy's deepcopy returns writable arrays)."""
    new = type(obj).__new__(type(obj))
    memo[id(obj)] = new
    for key, value in obj.__dict__.items():
        setattr(new, key, copy.deepcopy(value, memo))
    return new


class SlotTable:
    """A free list + owner table (``free + owned == capacity`` always); with a ``budget`` an
    allocation also counts against it, and only what both have left is free."""

    __slots__ = ("capacity", "_free", "_owner", "name", "budget")

    def __init__(self, capacity: int, name: str, budget: SlotBudget | None = None) -> None:
        self.capacity = capacity
        self.name = name
        self.budget = budget
        self._free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest slot first
        self._owner: dict[int, str] = {}

    @property
    def n_free(self) -> int:
        b = self.budget
        return len(self._free) if b is None else max(min(len(self._free), b.capacity - b.used), 0)

    @property
    def n_used(self) -> int:
        return len(self._owner)

    def can_allocate(self, n: int = 1) -> bool:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        return self.n_free >= n

    def take(self, owner: str) -> int:
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty str, got {owner!r}")
        b = self.budget
        if b is not None and b.used >= b.capacity:
            raise ValueError(
                f"state pool is full ({b.capacity} slots shared by running and cached "
                f"states): cannot allocate"
            )
        if not self._free:
            raise ValueError(f"{self.name} pool is full ({self.capacity} slots): cannot allocate")
        slot = self._free.pop()
        self._owner[slot] = owner
        if b is not None:
            b.used += 1
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
        if self.budget is not None:
            self.budget.used -= 1
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
        b = self.budget
        if b is not None and not 0 <= b.used <= b.capacity:
            raise PoolError(f"{self.name}: shared budget used {b.used} out of range")


class SlotPool:
    """The slot bookkeeping both pools expose, read through their slot ``table``."""

    table: SlotTable

    @property
    def capacity(self) -> int:
        return self.table.capacity

    @property
    def n_free(self) -> int:
        return self.table.n_free

    @property
    def n_used(self) -> int:
        return self.table.n_used

    def can_allocate(self, n: int = 1) -> bool:
        return self.table.can_allocate(n)

    def owner(self, slot: int) -> str | None:
        return self.table.owner(slot)

    def set_owner(self, slot: int, owner: str) -> None:
        """Hand the slot to another owner (e.g. a checkpoint to "tree" after insert)."""
        self.table.set_owner(slot, owner)

    def owned(self) -> dict[int, str]:
        return self.table.owned()
