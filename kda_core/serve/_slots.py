"""The engine's state slots: shapes, the budget several tables draw from (``SlotBudget``:
running and cached states in one pool, as SGLang's ``MambaPool``; ``UnifiedBudget``: one byte
buffer for the state slots and the MLA KV, ``Engine(unified_memory=bytes)`` as SGLang's
``--enable-unified-memory``, where states take what the KV in use leaves and the KV what the
states leave, the border in every ``StepRow``; ``kda_core.memory`` replays it byte by byte), the
slot table and ``ActivePool``. A running request writes only into slots it owns; buffers are
bound, not copied (``rebind`` stores references: the model never writes a state in place).
docs/pools.md, docs/serving.md."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.model import KDALayerState, TinyHybrid

MAX_SLOTS = 4096  # most slots one pool may hold (caps memory)
MAX_UNIFIED_BYTES = 1 << 40
# the serving strategies (slots per request by strategy: ``sizing.request_slots``)
STRATEGIES: tuple[str, ...] = ("no_buffer", "extra_buffer", "extra_buffer_lazy")


class PoolError(AssertionError):
    """Raised by ``check_integrity`` when an invariant is broken."""


@dataclass(slots=True, frozen=True)
class StateShape:
    """Per-slot shapes (float64): ``s`` of S [L, H, K, V], ``conv`` [L, W-1, D] (D = 3HK)."""

    s: tuple[int, int, int, int]
    conv: tuple[int, int, int]

    @classmethod
    def of(cls, model: TinyHybrid) -> StateShape:
        c = model.config
        L, H, K = len(model.kda_layers), c.n_heads, c.head_dim
        return cls((L, H, K, K), (L, c.conv_size - 1, 3 * H * K))

    @property
    def native_bytes(self) -> int:
        """Bytes of one full-precision slot (S + conv, float64)."""
        return 8 * (math.prod(self.s) + math.prod(self.conv))  # per insert: no numpy call

    def check(self, S: np.ndarray, conv: np.ndarray) -> None:
        """Raise ``ValueError`` unless ``S`` / ``conv`` have one slot's shapes."""
        s, c = np.shape(S), np.shape(conv)
        if s != self.s or c != self.conv:
            raise ValueError(f"kda states must be S {self.s} / conv {self.conv}, got {s} / {c}")


@dataclass(slots=True, eq=False)
class SlotBudget:
    """A slot count several ``SlotTable`` s draw from: ``used <= capacity`` always."""

    capacity: int
    used: int = 0


class UnifiedBudget(SlotBudget):
    """State slots from the low end of one byte buffer, KV tokens from the high end; ``slots``
    is the most the buffer could ever hold (the tables' size)."""

    def __init__(
        self, total: int, slot_bytes: int, kv_token_bytes: int, kv_used: Callable[[], int]
    ) -> None:
        self.used = 0  # not SlotBudget.__init__: capacity is computed here
        self.slots = min(total // slot_bytes, MAX_SLOTS)
        self.total, self.slot_bytes, self.kv_token_bytes = total, slot_bytes, kv_token_bytes
        self.kv_used = kv_used  # KV tokens in use: the cache's and the running requests'

    @property  # type: ignore[override]
    def capacity(self) -> int:
        """``SlotBudget.capacity``: what the KV side leaves now (at most ``slots``)."""
        left = (self.total - self.kv_used() * self.kv_token_bytes) // self.slot_bytes
        return max(min(left, self.slots), 0)

    def kv_capacity(self) -> int:
        """KV tokens the KV side may hold now: what the state side leaves."""
        return self.kv_capacity_alone(self.used)

    def kv_capacity_alone(self, slots: int) -> int:
        """The most KV tokens a request running alone on ``slots`` state slots can have."""
        return (self.total - slots * self.slot_bytes) // self.kv_token_bytes

    def border(self) -> tuple[int, int]:
        """(where the state side ends, where the KV side begins), in bytes from 0."""
        return self.used * self.slot_bytes, self.total - self.kv_used() * self.kv_token_bytes


def make_unified(
    total: Any,
    model: TinyHybrid,
    strategy: str,
    overlap: bool,
    int8: bool,
    state_slots: Any,
    kv_used: Callable[[], int],
) -> UnifiedBudget | None:
    """``unified_memory``, checked: None, or bytes enough for one request's reserved slots
    (``sizing.request_slots``) and one KV token. The INT8 checkpoint pool lives outside the
    buffer in SGLang (allocated from headroom) and ``state_slots`` is the buffer's to decide:
    both are refused with it."""
    if total is None:
        return None
    if int8:
        raise ValueError("unified_memory: the INT8 checkpoint pool is a separate pool; not both")
    if state_slots is not None:
        raise ValueError("unified_memory: the buffer sets the state slots; leave state_slots None")
    S = StateShape.of(model).native_bytes
    kvb = 8 * len(model.mla_layers) * model.config.mla_latent
    least = sizing.request_slots(strategy, overlap).reserved * S + kvb
    total = check_int("unified_memory", total, least, MAX_UNIFIED_BYTES)
    return UnifiedBudget(total, S, kvb, kv_used)


def freeze(*arrays: np.ndarray) -> None:
    """Make ``arrays`` read-only: a bug writing into a shared state then raises."""
    for a in arrays:
        a.flags.writeable = False


class SlotTable:
    """A free list + owner table (``free + owned == capacity`` always); with a ``budget`` an
    allocation also counts against it, and only what both have left is free."""

    def __init__(self, capacity: int, name: str, budget: SlotBudget | None = None) -> None:
        self.capacity = capacity
        self.name = name
        self.budget = budget
        self._free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest slot first
        self._owner: dict[int, str] = {}
        self._data: list[Any] = [None] * capacity  # a subclass's per-slot data (None: free)

    def __deepcopy__(self, memo: dict) -> SlotTable:
        """A deep copy whose read-only arrays (``_frozen``: the table's own) are read-only again:
        numpy's deepcopy returns writable arrays (the memo keeps shared arrays shared)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        freeze(*new._frozen())
        return new

    def _frozen(self) -> Iterable[np.ndarray]:
        return ()

    @property
    def n_free(self) -> int:
        b = self.budget
        return len(self._free) if b is None else max(min(len(self._free), b.capacity - b.used), 0)

    @property
    def n_used(self) -> int:
        return len(self._owner)

    def can_allocate(self, n: int = 1) -> bool:
        return self.n_free >= check_int("n", n, 0)

    def take(self, owner: str) -> int:
        if not isinstance(owner, str) or not owner:
            raise ValueError(f"owner must be a non-empty str, got {owner!r}")
        b = self.budget  # shared with the other pool: its slots count too
        if not self._free or (b is not None and b.used >= b.capacity):
            n = self.capacity if b is None else f"{b.capacity} shared by running and cached"
            raise ValueError(f"{self.name} pool is full ({n} slots): cannot allocate")
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
        s = check_int(name, slot, 0, self.capacity - 1)
        if s not in self._owner:
            raise ValueError(f"{name} {s} of the {self.name} pool is not allocated")
        return s

    def free(self, slot: Any) -> Any:
        """Free an allocated ``slot`` (ValueError on a double free); returns the data it held."""
        s = self.check(slot)
        del self._owner[s]
        data, self._data[s] = self._data[s], None
        self._free.append(s)
        if self.budget is not None:
            self.budget.used -= 1
        return data

    def set_owner(self, slot: Any, owner: str) -> None:
        self._owner[self.check(slot)] = owner

    def owned(self) -> dict[int, str]:
        return dict(self._owner)

    def check_integrity(self) -> None:
        # one sort proves every slot free or owned exactly once, and every id in range
        if sorted([*self._free, *self._owner]) != list(range(self.capacity)):
            raise PoolError(
                f"{self.name}: free {sorted(self._free)} and owned {sorted(self._owner)} are "
                f"not each slot of [0, {self.capacity - 1}] once"
            )
        b = self.budget
        if b is not None and not 0 <= b.used <= b.capacity:
            raise PoolError(f"{self.name}: shared budget used {b.used} out of range")
        for s, data in enumerate(self._data):
            if (s in self._owner) != (data is not None):
                raise PoolError(f"{self.name}: slot {s} data does not match its ownership")


class ActivePool(SlotTable):
    """Full-precision running state slots (every KDA layer's S and conv window per slot)."""

    def __init__(self, shape: StateShape, slots: int, budget: SlotBudget | None = None) -> None:
        self.shape = shape
        super().__init__(check_int("slots", slots, 1, MAX_SLOTS), "active", budget)
        # one read-only zero state for every slot only ever rebound (``allocate(shared=True)``,
        # ``CheckpointPool.donate``'s refill): zeroing 246 KiB per track slot, for buffers the
        # first track write drops, cost ~17 us each in the serving loop. Read-only: a bug
        # writing into it raises instead of reaching every slot.
        self.zero_state = (np.zeros(shape.s), np.zeros(shape.conv))
        freeze(*self.zero_state)

    def _frozen(self) -> Iterable[np.ndarray]:
        return self.zero_state

    def allocate(self, owner: str, shared: bool = False) -> int:
        """Take the lowest free slot for ``owner``; its state starts at zero (needs-clear). With
        ``shared``, the read-only ``zero_state``: for a slot written by ``rebind`` only (a track
        slot: its first track write binds a copy)."""
        slot = self.take(owner)
        zeros = self.zero_state if shared else (np.zeros(self.shape.s), np.zeros(self.shape.conv))
        self._data[slot] = zeros
        return slot

    def buffers(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """The slot's (S [L, H, K, V], conv [L, W-1, D]) buffers (no copy)."""
        return self._data[self.check(slot)]

    def layer_states(self, slot: int) -> list[KDALayerState]:
        """The slot's state as per-layer read-only ``KDALayerState`` views (the request runs on
        these). Read-only because a later ``donate`` hands the base buffers to a checkpoint and
        freezing a base does not freeze views made before it."""
        S, conv = (a.view() for a in self.buffers(slot))
        freeze(S, conv)  # so are the per-layer views taken from these
        return [KDALayerState(S[i], conv[i]) for i in range(len(S))]

    def rebind(self, slot: int, S: np.ndarray, conv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bind new (S, conv) buffers to an allocated ``slot`` without a copy; returns the old
        ones (a donation hands them on, a restore or track write drops them)."""
        s = self.check(slot)
        old = self._data[s]
        self._data[s] = (S, conv)
        return old
