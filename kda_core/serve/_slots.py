"""The engine's state slots: shapes, the ``SlotBudget`` several tables draw from (running and
cached states in one pool, as SGLang's ``MambaPool``), the slot table and ``ActivePool``. A
running request writes only into slots it owns; buffers are bound, not copied (``rebind``
stores references: the model never writes a state in place). docs/pools.md."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core._checks import check_int
from kda_core.model import KDALayerState, TinyHybrid

MAX_SLOTS = 4096
"""Most slots one pool may hold (caps memory)."""
STRATEGIES: tuple[str, ...] = ("no_buffer", "extra_buffer", "extra_buffer_lazy")
"""The serving strategies (slots per request by strategy: ``sizing.request_slots``)."""


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


class SlotBudget:
    """A slot count several ``SlotTable`` s draw from: ``used <= capacity`` always."""

    __slots__ = ("capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0


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


class ActivePool(SlotTable):
    """Full-precision running state slots (every KDA layer's S and conv window per slot)."""

    def __init__(self, shape: StateShape, slots: int, budget: SlotBudget | None = None) -> None:
        if not isinstance(shape, StateShape):
            raise ValueError(f"shape must be a StateShape, got {type(shape).__name__}")
        self.shape = shape
        super().__init__(check_int("slots", slots, 1, MAX_SLOTS), "active", budget)
        self._S: list[np.ndarray | None] = [None] * self.capacity
        self._conv: list[np.ndarray | None] = [None] * self.capacity
        # one read-only zero state bound to every slot that holds no state yet and is only
        # ever rebound, never read for its zeros (``allocate_unfilled``, ``CheckpointPool.
        # donate``'s refill): zeroing 246 KiB per track slot, for buffers the first track
        # write drops, was ~17 us each in the serving loop. Read-only, so a bug writing into
        # it in place raises instead of reaching every slot that shares it.
        self.zero_state = (_readonly(np.zeros(shape.s)), _readonly(np.zeros(shape.conv)))

    def __deepcopy__(self, memo: dict) -> ActivePool:
        """A deep copy whose shared ``zero_state`` is read-only again (numpy's deepcopy returns
        writable arrays; the memo keeps it one pair shared by the copy's slots)."""
        new = deepcopy_fields(self, memo)
        for a in new.zero_state:
            a.flags.writeable = False
        return new

    def allocate(self, owner: str) -> int:
        """Take the lowest free slot for ``owner``; its state starts at zero (needs-clear)."""
        slot = self.take(owner)
        self._S[slot] = np.zeros(self.shape.s)
        self._conv[slot] = np.zeros(self.shape.conv)
        return slot

    def allocate_unfilled(self, owner: str) -> int:
        """Take the lowest free slot for ``owner``, bound to the shared read-only
        ``zero_state``: for a slot that is written by ``rebind`` only (a track slot: its first
        track write binds a copy). Reads as zeros, like ``allocate``'s."""
        slot = self.take(owner)
        self._S[slot], self._conv[slot] = self.zero_state
        return slot

    def free(self, slot: int) -> None:
        """Return ``slot`` to the free list (ValueError on a double free)."""
        s = self.release(slot)
        self._S[s] = None
        self._conv[s] = None

    def bind(self, slot: int, kda: list[KDALayerState]) -> None:
        """The kernel writes the state into ``slot``: store the layer arrays (stacked)."""
        s = self.check(slot)
        if len(kda) != self.shape.layers:
            raise ValueError(f"kda must hold {self.shape.layers} layer states, got {len(kda)}")
        S = np.stack([st.S for st in kda])
        conv = np.stack([st.conv for st in kda])
        if S.shape != self.shape.s or conv.shape != self.shape.conv:
            raise ValueError(
                f"kda states must be S {self.shape.s} / conv {self.shape.conv}, "
                f"got {S.shape} / {conv.shape}"
            )
        self._S[s] = S
        self._conv[s] = conv

    def buffers(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """The slot's (S [L, H, K, V], conv [L, W-1, D]) buffers (no copy)."""
        s = self.check(slot)
        S, conv = self._S[s], self._conv[s]
        assert S is not None and conv is not None
        return S, conv

    def layer_states(self, slot: int) -> list[KDALayerState]:
        """The slot's state as per-layer read-only ``KDALayerState`` views (the request runs on
        these; the model never writes a state in place). Read-only because a later ``donate``
        hands the base buffers to a checkpoint: freezing a base does not freeze views made
        before, so a writable view would let a request change a stored checkpoint."""
        S, conv = self.buffers(slot)
        return [KDALayerState(_readonly(S[i]), _readonly(conv[i])) for i in range(len(S))]

    def rebind(self, slot: int, S: np.ndarray, conv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bind new (S, conv) buffers to an allocated ``slot`` without a copy; returns the old
        ones (a donation hands them on, a restore or track write drops them)."""
        s = self.check(slot)
        old = (self._S[s], self._conv[s])
        self._S[s], self._conv[s] = S, conv
        assert old[0] is not None and old[1] is not None
        return old  # type: ignore[return-value]

    def check_integrity(self) -> None:
        super().check_integrity()
        for s in range(self.capacity):
            held = self.owner(s) is not None
            if held != (self._S[s] is not None) or held != (self._conv[s] is not None):
                raise PoolError(f"active: slot {s} buffers do not match its ownership")


def _readonly(view: np.ndarray) -> np.ndarray:
    view.flags.writeable = False
    return view
