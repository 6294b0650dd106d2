"""State pools: active slots, a checkpoint pool, copy-on-write restore, snapshot and donate.

SGLang keeps recurrent state in slots, not per token (engines.md §1.1, §1.5, §1.11; seed §5.3-5.4):

* ``ActivePool`` - a fixed number of slots; a slot holds, for every KDA layer, the recurrent
  state ``S [L, H, K, V]`` and the conv window ``conv [L, W-1, 3HK]`` at full precision
  (float64). A running request writes its state only into slots it owns (private, writable).
* ``CheckpointPool`` - its own slots, owned by the radix tree (or by a request that has not
  inserted them yet). ``S`` is stored INT8 (``kda_core.quant.quantize_int8``: one scale per
  (layer, head, key channel)) or natively; the conv window always natively. Stored arrays are
  made read-only (``writeable=False``), so a shared checkpoint cannot be modified in place.

    store_from_active  snapshot: copy (or quantize) an active slot into a new checkpoint slot
    load_to_active     copy-on-write restore: the checkpoint stays read-only, the request gets a
                       private copy (dequantized) in its own active slot
    donate             hand an active slot's buffers to the checkpoint pool with no copy: only
                       the ownership moves; the active slot keeps a stale buffer (SGLang's
                       "fresh slot queued for zeroing"). With INT8 on, a donation has to
                       quantize: it is counted as a copy, not a donation (SGLang
                       ``_commit_int8_checkpoint`` also quantizes then frees the source).

  ``copies`` counts every full-state data copy (snapshots, COW restores, INT8 donations);
  ``donations`` counts zero-copy ownership transfers.

* ``PingPong`` - per-request slot sets by strategy: ``no_buffer`` (1 active slot),
  ``extra_buffer`` (1 active + 2 track slots, all up front), ``extra_buffer_lazy`` (1 active +
  1 track slot up front, the second taken on demand at a track boundary). ``track`` writes
  the state at a checkpoint boundary into ``track[next]`` and flips ``next``; ``keep`` is the
  slot holding the most recent tracked state.

Buffers are bound, not copied: a numpy state produced by the model is never modified in place
(``TinyHybrid.forward`` returns new arrays), so ``ActivePool.bind`` stores references (the
kernel "writing into the slot") and ``donate`` moves references between pools. Everything
that must be a real copy (snapshot, COW, ``PingPong.track``'s write of the active state into
a track slot) is one: no two slots ever share memory. Snapshots and COW restores are counted
in ``copies``; track writes in ``track_writes``.

Invariants (``check_integrity``): every slot is free or owned exactly once (free + owned ==
capacity; no slot on the free list twice; owned slots are not on it); every checkpoint's bytes
equal their checksum at store time (a shared checkpoint never changes while it is held).

Left out: slot 0 as a padding sink, device streams / deferred COW, host offload, batching.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core._checks import check_int
from kda_core.model import KDALayerState, TinyHybrid
from kda_core.quant import quantize_int8

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
    "ActivePool",
    "CheckpointPool",
    "PingPong",
    "PoolError",
    "PoolStats",
    "RequestSlots",
    "StateShape",
]


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
        return 8 * (int(np.prod(self.s)) + int(np.prod(self.conv)))

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


class ActivePool(_SlotView):
    """Full-precision running state slots (every KDA layer's S and conv window per slot)."""

    def __init__(self, shape: StateShape, slots: int) -> None:
        if not isinstance(shape, StateShape):
            raise ValueError(f"shape must be a StateShape, got {type(shape).__name__}")
        self.shape = shape
        self._slots = _Slots(check_int("slots", slots, 1, MAX_SLOTS), "active")
        self._S: list[np.ndarray | None] = [None] * self._slots.capacity
        self._conv: list[np.ndarray | None] = [None] * self._slots.capacity

    @classmethod
    def for_model(cls, model: TinyHybrid, slots: int) -> ActivePool:
        return cls(StateShape.of(model), slots)

    def allocate(self, owner: str) -> int:
        """Take the lowest free slot for ``owner``; its state starts at zero (needs-clear)."""
        slot = self._slots.take(owner)
        self._S[slot] = np.zeros(self.shape.s)
        self._conv[slot] = np.zeros(self.shape.conv)
        return slot

    def free(self, slot: int) -> None:
        """Return ``slot`` to the free list (ValueError on a double free)."""
        s = self._slots.release(slot)
        self._S[s] = None
        self._conv[s] = None

    def bind(self, slot: int, kda: list[KDALayerState]) -> None:
        """The kernel writes the state into ``slot``: store the layer arrays (stacked)."""
        s = self._slots.check(slot)
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
        s = self._slots.check(slot)
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

    def _swap(self, slot: int, S: np.ndarray, conv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self._slots.check(slot)
        old = (self._S[s], self._conv[s])
        self._S[s], self._conv[s] = S, conv
        assert old[0] is not None and old[1] is not None
        return old  # type: ignore[return-value]

    def check_integrity(self) -> None:
        self._slots.check_integrity()
        for s in range(self.capacity):
            held = s in self._slots._owner
            if held != (self._S[s] is not None) or held != (self._conv[s] is not None):
                raise PoolError(f"active: slot {s} buffers do not match its ownership")


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8))
    return h.hexdigest()


@dataclass(slots=True)
class _Ckpt:
    S: np.ndarray | None  # native [L, H, K, V] (None when int8)
    qdata: np.ndarray | None  # int8 [L, H, K, V]
    scale: np.ndarray | None  # [L, H, K, 1]
    conv: np.ndarray  # [L, W-1, D] native
    digest: str
    nbytes: int
    qerr_max: float = 0.0  # max |S - S'| at store time (0 native)
    qerr_rel: float = 0.0  # ||S - S'||_F / ||S||_F at store time
    donated: bool = False


def _freeze(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


def _readonly(view: np.ndarray) -> np.ndarray:
    view.flags.writeable = False
    return view


class CheckpointPool(_SlotView):
    """Read-only checkpoints: INT8 (or native) S + native conv, owned by the tree or a request."""

    def __init__(self, shape: StateShape, slots: int, *, int8: bool = False) -> None:
        if not isinstance(shape, StateShape):
            raise ValueError(f"shape must be a StateShape, got {type(shape).__name__}")
        if not isinstance(int8, bool):
            raise ValueError(f"int8 must be a bool, got {type(int8).__name__}")
        self.shape = shape
        self.int8 = int8
        self._slots = _Slots(check_int("slots", slots, 1, MAX_SLOTS), "checkpoint")
        self._data: list[_Ckpt | None] = [None] * self._slots.capacity
        self.copies = 0
        self.donations = 0
        self.loads = 0

    @classmethod
    def for_model(cls, model: TinyHybrid, slots: int, *, int8: bool = False) -> CheckpointPool:
        return cls(StateShape.of(model), slots, int8=int8)

    def __deepcopy__(self, memo: dict) -> CheckpointPool:
        """A deep copy whose stored arrays are read-only again (numpy's deepcopy returns
        writable arrays, which would break the read-only promise in every forked engine)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        for ck in new._data:
            if ck is not None:
                _freeze(*(a for a in (ck.S, ck.qdata, ck.scale, ck.conv) if a is not None))
        return new

    # -- slots (capacity, n_free, n_used, can_allocate, owner, set_owner, owned: _SlotView) ----
    @property
    def slot_bytes(self) -> int:
        """Bytes one checkpoint occupies (INT8: codes + scales + native conv)."""
        return self.shape.int8_bytes if self.int8 else self.shape.native_bytes

    @property
    def used_bytes(self) -> int:
        return sum(d.nbytes for d in self._data if d is not None)

    def free(self, slot: int) -> None:
        """Release a checkpoint slot (ValueError on a double free)."""
        s = self._slots.release(slot)
        self._data[s] = None

    # -- data ----------------------------------------------------------------------------------
    def _put(self, owner: str, S: np.ndarray, conv: np.ndarray, *, copy: bool) -> int:
        slot = self._slots.take(owner)
        if self.int8:
            q = quantize_int8(S)
            qdata, scale = q.qdata, q.scale
            deq = q.dequantize()
            err = np.abs(deq - S)
            den = float(np.linalg.norm(S))
            rel = float(np.linalg.norm(deq - S)) / den if den > 0 else 0.0
            conv_c = conv.copy()
            _freeze(qdata, scale, conv_c)
            ck = _Ckpt(
                None,
                qdata,
                scale,
                conv_c,
                _digest(qdata, scale, conv_c),
                int(qdata.nbytes + scale.nbytes + conv_c.nbytes),
                float(err.max()) if err.size else 0.0,
                rel,
            )
            self.copies += 1
        else:
            if copy:
                S, conv = S.copy(), conv.copy()
                self.copies += 1
            else:
                self.donations += 1
            _freeze(S, conv)
            ck = _Ckpt(S, None, None, conv, _digest(S, conv), int(S.nbytes + conv.nbytes))
            ck.donated = not copy
        self._data[slot] = ck
        return slot

    def store_from_active(self, active: ActivePool, a_slot: int, owner: str) -> int:
        """Snapshot: copy (INT8: quantize) active slot ``a_slot`` into a new checkpoint slot.

        The active slot is untouched and stays with its request. Raises ValueError when full.
        """
        if not self._slots.can_allocate(1):
            raise ValueError(f"checkpoint pool is full ({self.capacity} slots): cannot store")
        S, conv = active.buffers(a_slot)
        return self._put(owner, S, conv, copy=True)

    def donate(self, active: ActivePool, a_slot: int, owner: str) -> int:
        """Move active slot ``a_slot``'s buffers into a new checkpoint slot without a copy.

        The active slot stays allocated to its owner with a fresh zero buffer (the stale one
        SGLang queues for zeroing). INT8: the buffers must be quantized, so this is a copy.
        """
        if not self._slots.can_allocate(1):
            raise ValueError(f"checkpoint pool is full ({self.capacity} slots): cannot donate")
        fresh = (np.zeros(self.shape.s), np.zeros(self.shape.conv))
        S, conv = active._swap(a_slot, *fresh)
        return self._put(owner, S, conv, copy=False)

    def load_to_active(self, c_slot: int, active: ActivePool, a_slot: int) -> None:
        """Copy-on-write restore: a private (dequantized) copy of checkpoint ``c_slot`` goes into
        active slot ``a_slot``; the checkpoint stays read-only and unchanged."""
        s = self._slots.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            S = ck.S.copy()
        else:
            assert ck.qdata is not None and ck.scale is not None
            S = ck.qdata.astype(np.float64) * ck.scale.astype(np.float64)
        active._swap(a_slot, S, ck.conv.copy())
        self.copies += 1
        self.loads += 1

    def buffers(self, c_slot: int) -> tuple[np.ndarray, np.ndarray]:
        """Read-only (S as restored [L, H, K, V], conv) of a checkpoint (INT8: dequantized)."""
        s = self._slots.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            return ck.S, ck.conv
        assert ck.qdata is not None and ck.scale is not None
        return ck.qdata.astype(np.float64) * ck.scale, ck.conv

    def raw(self, c_slot: int) -> tuple[np.ndarray, ...]:
        """The stored arrays themselves (native: (S, conv); INT8: (qdata, scale, conv))."""
        s = self._slots.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            return (ck.S, ck.conv)
        assert ck.qdata is not None and ck.scale is not None
        return (ck.qdata, ck.scale, ck.conv)

    def quant_error(self, c_slot: int) -> tuple[float, float]:
        """(max |S - S'|, relative Frobenius error) measured when the checkpoint was stored."""
        s = self._slots.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        return ck.qerr_max, ck.qerr_rel

    def check_integrity(self) -> None:
        """Slots are free or owned once; every checkpoint's bytes equal their stored digest."""
        self._slots.check_integrity()
        for s in range(self.capacity):
            ck = self._data[s]
            held = s in self._slots._owner
            if held != (ck is not None):
                raise PoolError(f"checkpoint: slot {s} data does not match its ownership")
            if ck is None:
                continue
            arrays = (ck.S, ck.conv) if ck.S is not None else (ck.qdata, ck.scale, ck.conv)
            if _digest(*arrays) != ck.digest:  # type: ignore[arg-type]
                raise PoolError(f"checkpoint: slot {s} changed while shared")


@dataclass(slots=True)
class RequestSlots:
    """One request's active-pool slots: ``active`` plus ping-pong ``track`` slots.

    ``track_pos[i]`` is the boundary (tokens) of the state held by ``track[i]`` (None: empty
    or already donated); ``next`` is the index the next track write goes to.
    """

    owner: str
    strategy: str
    active: int
    track: list[int]
    track_pos: list[int | None]
    next: int = 0


class PingPong:
    """Ping-pong tracking slots per request, by strategy (see the module docstring)."""

    def __init__(self, pool: ActivePool, strategy: str = "extra_buffer") -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if not isinstance(pool, ActivePool):
            raise ValueError(f"pool must be an ActivePool, got {type(pool).__name__}")
        self.pool = pool
        self.strategy = strategy
        self.track_writes = 0

    def can_open(self) -> bool:
        return self.pool.can_allocate(SLOTS_UP_FRONT[self.strategy])

    def open(self, owner: str) -> RequestSlots:
        """Allocate the slots a request holds from admission (1 / 3 / 2)."""
        need = SLOTS_UP_FRONT[self.strategy]
        if not self.pool.can_allocate(need):
            raise ValueError(
                f"active pool has {self.pool.n_free} free slots, strategy "
                f"{self.strategy!r} needs {need}"
            )
        active = self.pool.allocate(owner)
        track = [self.pool.allocate(owner + ":track") for _ in range(need - 1)]
        return RequestSlots(owner, self.strategy, active, track, [None] * len(track))

    def track(self, req: RequestSlots, position: int) -> int | None:
        """Write the active slot's state (at boundary ``position``) into ``track[next]``; flip.

        Returns the track slot written, or None for no_buffer (nothing to track into) or
        when the lazy second slot cannot be allocated. The caller must donate a still-valid
        state in ``track[next]`` before calling (``pending()`` tells which).
        """
        if self.strategy == "no_buffer":
            return None
        if req.next >= len(req.track):  # lazy: take the second slot at a boundary
            if not self.pool.can_allocate(1):
                return None
            req.track.append(self.pool.allocate(req.owner + ":track"))
            req.track_pos.append(None)
        slot = req.track[req.next]
        S, conv = self.pool.buffers(req.active)
        # the kernel writes the state at this boundary into the track slot: a real copy, so a
        # later in-place write to the active slot (or donating the track slot, which freezes
        # its buffers) never reaches the other slot
        self.pool._swap(slot, S.copy(), conv.copy())
        req.track_pos[req.next] = position
        self.track_writes += 1
        n = 2
        req.next = (req.next + 1) % n
        return slot

    def overwritten_next(self, req: RequestSlots) -> tuple[int, int] | None:
        """(slot, position) of a valid tracked state the next ``track`` would overwrite."""
        i = req.next
        if i < len(req.track) and req.track_pos[i] is not None:
            return req.track[i], req.track_pos[i]  # type: ignore[return-value]
        return None

    def keep(self, req: RequestSlots) -> tuple[int, int] | None:
        """(slot, position) of the most recent tracked state still held, if any."""
        best = None
        for slot, pos in zip(req.track, req.track_pos):
            if pos is not None and (best is None or pos > best[1]):
                best = (slot, pos)
        return best

    def valid(self, req: RequestSlots) -> list[tuple[int, int]]:
        """Every (slot, position) still holding an undonated tracked state, oldest first."""
        return sorted(
            ((s, p) for s, p in zip(req.track, req.track_pos) if p is not None),
            key=lambda x: x[1],
        )

    def mark_donated(self, req: RequestSlots, slot: int) -> None:
        i = req.track.index(slot)
        req.track_pos[i] = None

    def close(self, req: RequestSlots) -> None:
        """Free every slot the request holds."""
        for s in req.track:
            self.pool.free(s)
        self.pool.free(req.active)
        req.track.clear()
        req.track_pos.clear()
