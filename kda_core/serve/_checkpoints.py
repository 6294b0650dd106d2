"""``CheckpointPool``: read-only checkpoints (INT8 or native S + native conv). Stored arrays are
made read-only and their digest kept, so ``check_integrity`` proves a shared checkpoint never
changed. ``copies`` counts full-state copies, ``donations`` zero-copy moves. docs/pools.md."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_bool, check_int, rel_error
from kda_core.kda.quant import quantize_int8
from kda_core.serve._slots import (
    MAX_SLOTS,
    ActivePool,
    PoolError,
    SlotBudget,
    SlotTable,
    StateShape,
    freeze,
)

try:
    import xxhash
except ImportError:  # the declared dependency is missing: SHA-1 (slower, as good here)
    xxhash = None

# The digest guards against a bug writing into a shared checkpoint, not an adversary: XXH3-128
# (passes SMHasher; a change goes unnoticed with probability ~2^-128) where the pinned xxhash
# is installed, else SHA-1 (2^-160). XXH3-128 measured ~30x faster than SHA-1 on one 246 KiB
# TinyHybrid state (5.5 us vs 170 us); the serving loop digests every checkpoint it stores.
_new_hash = xxhash.xxh3_128 if xxhash is not None else hashlib.sha1


def _digest(*arrays: np.ndarray) -> str:
    h = _new_hash()
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8))
    return h.hexdigest()


def int8_pool_estimate(shape: StateShape, slots: int) -> dict[str, int]:
    """Bytes an INT8 checkpoint pool of ``slots`` occupies when full, by part: int8 codes,
    float64 scales per (layer, head, k) and native conv windows. SGLang's
    ``MambaCheckpointPool.estimate_mem_usage_bytes`` (``mem_cache/mamba_checkpoint_pool.py``)
    counts the same parts (bf16 scales and conv there, and its reserved slot 0)."""
    qdata = slots * math.prod(shape.s)
    scale = 8 * slots * math.prod(shape.s[:3])
    conv = 8 * slots * math.prod(shape.conv)
    return {"qdata": qdata, "scale": scale, "conv": conv, "total": qdata + scale + conv}


@dataclass(slots=True)
class _Ckpt:
    arrays: tuple[np.ndarray, ...]  # native: (S, conv); INT8: (qdata, scale [L, H, K, 1], conv)
    digest: str
    nbytes: int
    qerr: tuple[float, float]  # (max |S - S'|, ||S - S'||_F / ||S||_F) at store time


class CheckpointPool(SlotTable):
    """Read-only checkpoints: INT8 (or native) S + native conv, owned by the tree or a request."""

    def __init__(
        self, shape: StateShape, slots: int, *, int8: bool = False, budget: SlotBudget | None = None
    ) -> None:
        self.shape = shape
        self.int8 = check_bool("int8", int8)
        super().__init__(check_int("slots", slots, 1, MAX_SLOTS), "checkpoint", budget)
        # bytes one checkpoint occupies (INT8: codes + scales + native conv)
        self.slot_bytes = int8_pool_estimate(shape, 1)["total"] if self.int8 else shape.native_bytes
        # the stored checkpoints' bytes, kept as they come and go (every finished request's
        # report reads it; ``check_integrity`` checks it against the sum)
        self.used_bytes = 0
        self.copies = 0
        self.donations = 0
        self.loads = 0

    def _frozen(self) -> Iterable[np.ndarray]:
        return (a for ck in self._data if ck is not None for a in ck.arrays)

    def _used_bytes_naive(self) -> int:
        return sum(d.nbytes for d in self._data if d is not None)

    def free(self, slot: int) -> None:
        """Release a checkpoint slot (ValueError on a double free)."""
        self.used_bytes -= super().free(slot).nbytes

    def _put(self, owner: str, S: np.ndarray, conv: np.ndarray, *, copy: bool) -> int:
        slot = self.take(owner)
        qerr = (0.0, 0.0)
        if self.int8:
            q = quantize_int8(S)
            deq = q.dequantize()
            qerr = (float(np.max(np.abs(deq - S), initial=0.0)), rel_error(deq, S))
            arrays: tuple[np.ndarray, ...] = (q.qdata, q.scale, conv.copy())
        else:
            arrays = (S.copy(), conv.copy()) if copy else (S, conv)
        if copy or self.int8:
            self.copies += 1
        else:
            self.donations += 1
        freeze(*arrays)
        ck = _Ckpt(arrays, _digest(*arrays), sum(a.nbytes for a in arrays), qerr)
        self._data[slot] = ck
        self.used_bytes += ck.nbytes
        return slot

    def store(self, S: np.ndarray, conv: np.ndarray, owner: str) -> int:
        """A checkpoint holding copies of one slot's ``S`` / ``conv`` (INT8: ``S`` quantized;
        a snapshot: an active slot's ``buffers``); ValueError when full. Shapes are the
        caller's to check (``shape.check``)."""
        return self._put(owner, np.asarray(S, np.float64), np.asarray(conv, np.float64), copy=True)

    def donate(self, active: ActivePool, a_slot: int, owner: str) -> int:
        """Move active slot ``a_slot``'s buffers into a new checkpoint slot without a copy (INT8:
        quantized, so a copy). The slot stays its owner's, bound to the read-only ``zero_state``
        (the stale slot SGLang queues for zeroing): a donated slot is only ever rebound (a track
        write, a restore) or freed, never written in place."""
        if not self.can_allocate(1):  # before the rebind: a refused donation loses nothing
            raise ValueError(f"checkpoint pool is full ({self.capacity} slots): cannot donate")
        S, conv = active.rebind(a_slot, *active.zero_state)
        return self._put(owner, S, conv, copy=False)

    def load_to_active(self, c_slot: int, active: ActivePool, a_slot: int) -> None:
        """Copy-on-write restore: a private (dequantized) copy of checkpoint ``c_slot`` goes into
        active slot ``a_slot``; the checkpoint stays read-only and unchanged."""
        S, conv = self.buffers(c_slot)
        active.rebind(a_slot, S if self.int8 else S.copy(), conv.copy())  # INT8: S is new
        self.copies += 1
        self.loads += 1

    def buffers(self, c_slot: int) -> tuple[np.ndarray, np.ndarray]:
        """(S as restored [L, H, K, V], conv) of a checkpoint: read-only (INT8: S dequantized)."""
        if not self.int8:
            return self.raw(c_slot)  # type: ignore[return-value]
        qdata, scale, conv = self.raw(c_slot)
        return qdata.astype(np.float64) * scale, conv

    def raw(self, c_slot: int) -> tuple[np.ndarray, ...]:
        """The stored arrays themselves (native: (S, conv); INT8: (qdata, scale, conv))."""
        return self._data[self.check(c_slot, "c_slot")].arrays

    def quant_error(self, c_slot: int) -> tuple[float, float]:
        """(max |S - S'|, relative Frobenius error) measured when the checkpoint was stored."""
        return self._data[self.check(c_slot, "c_slot")].qerr

    def check_integrity(self) -> None:
        """Slots are free or owned once; every checkpoint's bytes equal their stored digest."""
        super().check_integrity()
        if self.used_bytes != self._used_bytes_naive():
            raise PoolError(
                f"checkpoint: used bytes {self.used_bytes} != stored {self._used_bytes_naive()}"
            )
        for s, ck in enumerate(self._data):
            if ck is not None and _digest(*ck.arrays) != ck.digest:
                raise PoolError(f"checkpoint: slot {s} changed while shared")
