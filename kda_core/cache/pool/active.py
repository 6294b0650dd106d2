"""``ActivePool``: full-precision running-state slots (S and conv window of every KDA layer).

A running request writes its state only into slots it owns. Buffers are bound, not copied
(``bind`` / ``rebind`` store references: the model never writes a state in place).
"""

from __future__ import annotations

import numpy as np

from kda_core._checks import check_int
from kda_core.cache.pool._slots import SlotPool, SlotTable, deepcopy_fields
from kda_core.cache.pool.slots import MAX_SLOTS, PoolError, SlotBudget, StateShape
from kda_core.model import KDALayerState

__all__ = ["ActivePool"]


class ActivePool(SlotPool):
    """Full-precision running state slots (every KDA layer's S and conv window per slot)."""

    def __init__(self, shape: StateShape, slots: int, budget: SlotBudget | None = None) -> None:
        if not isinstance(shape, StateShape):
            raise ValueError(f"shape must be a StateShape, got {type(shape).__name__}")
        self.shape = shape
        self.table = SlotTable(check_int("slots", slots, 1, MAX_SLOTS), "active", budget)
        self._S: list[np.ndarray | None] = [None] * self.table.capacity
        self._conv: list[np.ndarray | None] = [None] * self.table.capacity
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
        slot = self.table.take(owner)
        self._S[slot] = np.zeros(self.shape.s)
        self._conv[slot] = np.zeros(self.shape.conv)
        return slot

    def allocate_unfilled(self, owner: str) -> int:
        """Take the lowest free slot for ``owner``, bound to the shared read-only
        ``zero_state``: for a slot that is written by ``rebind`` only (a track slot: its first
        track write binds a copy). Reads as zeros, like ``allocate``'s."""
        slot = self.table.take(owner)
        self._S[slot], self._conv[slot] = self.zero_state
        return slot

    def free(self, slot: int) -> None:
        """Return ``slot`` to the free list (ValueError on a double free)."""
        s = self.table.release(slot)
        self._S[s] = None
        self._conv[s] = None

    def bind(self, slot: int, kda: list[KDALayerState]) -> None:
        """The kernel writes the state into ``slot``: store the layer arrays (stacked)."""
        s = self.table.check(slot)
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
        s = self.table.check(slot)
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
        s = self.table.check(slot)
        old = (self._S[s], self._conv[s])
        self._S[s], self._conv[s] = S, conv
        assert old[0] is not None and old[1] is not None
        return old  # type: ignore[return-value]

    def check_integrity(self) -> None:
        self.table.check_integrity()
        for s in range(self.capacity):
            held = self.table.owner(s) is not None
            if held != (self._S[s] is not None) or held != (self._conv[s] is not None):
                raise PoolError(f"active: slot {s} buffers do not match its ownership")


def _readonly(view: np.ndarray) -> np.ndarray:
    view.flags.writeable = False
    return view
