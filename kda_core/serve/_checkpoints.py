"""``CheckpointPool``: read-only checkpoints (INT8 or native S + native conv). Stored arrays are
made read-only and their digest kept, so ``check_integrity`` proves a shared checkpoint never
changed. ``copies`` counts full-state copies, ``donations`` zero-copy moves. docs/pools.md."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.kda.quant import quantize_int8
from kda_core.serve._slots import (
    MAX_SLOTS,
    ActivePool,
    PoolError,
    SlotBudget,
    SlotTable,
    StateShape,
    deepcopy_fields,
)

try:
    import xxhash
except ImportError:  # the declared dependency is missing: SHA-1 (slower, as good here)
    xxhash = None

# The digest's hash: xxHash's XXH3 with a 128-bit result where the package is installed
# (a pinned dependency), SHA-1 (160 bits) otherwise. The threat is a bug writing into a shared
# checkpoint, not an adversary, so a non-cryptographic hash with good avalanche (XXH3 passes
# SMHasher) is enough: an accidental change goes unnoticed only if the changed bytes collide
# with the stored ones, probability about 2^-128 (SHA-1: 2^-160). XXH3-128 measured ~30x
# faster than SHA-1 on one 246 KiB TinyHybrid state (5.5 us vs 170 us; SHA-1 was itself
# 1.8x faster than the blake2b it replaced): the serving loop digests every checkpoint it
# stores, 64 per bench serve (~11 ms of SHA-1 in a ~45 ms bookkeeping budget).
_new_hash = xxhash.xxh3_128 if xxhash is not None else hashlib.sha1


def _digest(*arrays: np.ndarray) -> str:
    """The hex digest of the arrays' bytes (``_new_hash``: see above)."""
    h = _new_hash()
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


class CheckpointPool(SlotTable):
    """Read-only checkpoints: INT8 (or native) S + native conv, owned by the tree or a request."""

    def __init__(
        self, shape: StateShape, slots: int, *, int8: bool = False, budget: SlotBudget | None = None
    ) -> None:
        if not isinstance(shape, StateShape):
            raise ValueError(f"shape must be a StateShape, got {type(shape).__name__}")
        self.shape = shape
        self.int8 = check_bool("int8", int8)
        super().__init__(check_int("slots", slots, 1, MAX_SLOTS), "checkpoint", budget)
        self._data: list[_Ckpt | None] = [None] * self.capacity
        self._used_bytes = 0  # sum of the stored checkpoints' nbytes, kept as they come and go
        self.copies = 0
        self.donations = 0
        self.loads = 0

    def __deepcopy__(self, memo: dict) -> CheckpointPool:
        """A deep copy whose stored arrays are read-only again (numpy's deepcopy returns
        writable arrays, which would break the read-only promise in every forked engine)."""
        new = deepcopy_fields(self, memo)
        for ck in new._data:
            if ck is not None:
                _freeze(*(a for a in (ck.S, ck.qdata, ck.scale, ck.conv) if a is not None))
        return new

    @property
    def slot_bytes(self) -> int:
        """Bytes one checkpoint occupies (INT8: codes + scales + native conv)."""
        return self.shape.int8_bytes if self.int8 else self.shape.native_bytes

    @property
    def used_bytes(self) -> int:
        """Bytes the stored checkpoints occupy (kept current by ``_put`` / ``free``: every
        finished request's report reads it; ``check_integrity`` checks it against the sum)."""
        return self._used_bytes

    def _used_bytes_naive(self) -> int:
        return sum(d.nbytes for d in self._data if d is not None)

    def free(self, slot: int) -> None:
        """Release a checkpoint slot (ValueError on a double free)."""
        s = self.release(slot)
        ck = self._data[s]
        if ck is not None:
            self._used_bytes -= ck.nbytes
        self._data[s] = None

    # -- data ----------------------------------------------------------------------------------
    def _put(self, owner: str, S: np.ndarray, conv: np.ndarray, *, copy: bool) -> int:
        slot = self.take(owner)
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
        self._used_bytes += ck.nbytes
        return slot

    def check_shapes(self, S: np.ndarray, conv: np.ndarray) -> None:
        """Raise ``ValueError`` unless ``S`` / ``conv`` have one slot's shapes."""
        s, c = np.shape(S), np.shape(conv)
        if s != self.shape.s or c != self.shape.conv:
            raise ValueError(
                f"kda states must be S {self.shape.s} / conv {self.shape.conv}, got {s} / {c}"
            )

    def store(self, S: np.ndarray, conv: np.ndarray, owner: str) -> int:
        """A checkpoint holding copies of ``S`` / ``conv`` (INT8: ``S`` quantized).

        Raises ValueError when full or when the shapes are not one slot's."""
        self.check_shapes(S, conv)
        if not self.can_allocate(1):
            raise ValueError(f"checkpoint pool is full ({self.capacity} slots): cannot store")
        return self._put(owner, np.asarray(S, np.float64), np.asarray(conv, np.float64), copy=True)

    def store_from_active(self, active: ActivePool, a_slot: int, owner: str) -> int:
        """Snapshot: ``store`` active slot ``a_slot``'s state (it stays with its request)."""
        return self.store(*active.buffers(a_slot), owner)

    def donate(self, active: ActivePool, a_slot: int, owner: str) -> int:
        """Move active slot ``a_slot``'s buffers into a new checkpoint slot without a copy.

        The active slot stays allocated to its owner with zero buffers (the stale one SGLang
        queues for zeroing): the pool's shared read-only ``zero_state``, since a donated slot
        is only ever rebound (a track write, a restore) or freed, never written in place.
        INT8: the buffers must be quantized, so this is a copy.
        """
        if not self.can_allocate(1):
            raise ValueError(f"checkpoint pool is full ({self.capacity} slots): cannot donate")
        S, conv = active.rebind(a_slot, *active.zero_state)
        return self._put(owner, S, conv, copy=False)

    def load_to_active(self, c_slot: int, active: ActivePool, a_slot: int) -> None:
        """Copy-on-write restore: a private (dequantized) copy of checkpoint ``c_slot`` goes into
        active slot ``a_slot``; the checkpoint stays read-only and unchanged."""
        s = self.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            S = ck.S.copy()
        else:
            assert ck.qdata is not None and ck.scale is not None
            S = ck.qdata.astype(np.float64) * ck.scale.astype(np.float64)
        active.rebind(a_slot, S, ck.conv.copy())
        self.copies += 1
        self.loads += 1

    def buffers(self, c_slot: int) -> tuple[np.ndarray, np.ndarray]:
        """Read-only (S as restored [L, H, K, V], conv) of a checkpoint (INT8: dequantized)."""
        s = self.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            return ck.S, ck.conv
        assert ck.qdata is not None and ck.scale is not None
        return ck.qdata.astype(np.float64) * ck.scale, ck.conv

    def raw(self, c_slot: int) -> tuple[np.ndarray, ...]:
        """The stored arrays themselves (native: (S, conv); INT8: (qdata, scale, conv))."""
        s = self.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        if ck.S is not None:
            return (ck.S, ck.conv)
        assert ck.qdata is not None and ck.scale is not None
        return (ck.qdata, ck.scale, ck.conv)

    def quant_error(self, c_slot: int) -> tuple[float, float]:
        """(max |S - S'|, relative Frobenius error) measured when the checkpoint was stored."""
        s = self.check(c_slot, "c_slot")
        ck = self._data[s]
        assert ck is not None
        return ck.qerr_max, ck.qerr_rel

    def check_integrity(self) -> None:
        """Slots are free or owned once; every checkpoint's bytes equal their stored digest."""
        SlotTable.check_integrity(self)
        if self._used_bytes != self._used_bytes_naive():
            raise PoolError(
                f"checkpoint: used bytes {self._used_bytes} != stored {self._used_bytes_naive()}"
            )
        for s in range(self.capacity):
            ck = self._data[s]
            held = self.owner(s) is not None
            if held != (ck is not None):
                raise PoolError(f"checkpoint: slot {s} data does not match its ownership")
            if ck is None:
                continue
            arrays = (ck.S, ck.conv) if ck.S is not None else (ck.qdata, ck.scale, ck.conv)
            if _digest(*arrays) != ck.digest:  # type: ignore[arg-type]
                raise PoolError(f"checkpoint: slot {s} changed while shared")
