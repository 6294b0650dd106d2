"""The shared machinery of the two-ended pools: one byte buffer, two sides growing toward
each other (SGLang's ``--enable-unified-memory``: ``python/sglang/srt/mem_cache/
unified_memory_pool.py`` and ``allocator/unified_sub_pool.py`` ``MultiEndedAllocator``).

``"state"`` entries (KDA state slots, ``S`` bytes) grow up from byte 0, ``"kv"`` entries (MLA KV
pages, ``P`` bytes) grow down from the top; the free gap lies between the two frontiers.
Callers see only virtual ids (`kda_core.memory._side`), so compaction moves bytes and rewrites
tables and nothing else. Modes: ``"eager"`` compacts on every free (minimal moves), ``"lazy"``
keeps holes and compacts on ``flush`` (idle, capped) or when the peer side falls short. When
the ends meet, ``alloc`` asks the peer to compact, re-checks, else returns None (the caller
evicts or queues). ``check_integrity`` checks every invariant (no overlap, bytes conserved,
tables inverse, CRC32 of every live entry unchanged).

The pools themselves are in `kda_core.memory._pools`; docs/memory.md has the invariants and the
compaction rule in full. Left out: the slot-0 dummy sink and ``min_slot_index``, the inverse-move
history for speculative rollback, pages pending reuse by a running kernel, and 3+ sub-pools.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.memory._side import Side, as_vids

SIDES: tuple[str, str] = ("state", "kv")
MODES: tuple[str, str] = ("eager", "lazy")
MAX_BUFFER_BYTES: int = 256 << 20  # cap on a real (store=True) buffer
_MAX_VIRTUAL_BYTES: int = 1 << 44  # cap on an accounting-only (store=False) pool
_MAX_ENTRIES_PER_SIDE: int = 1 << 21  # cap on each side's index space (tables are int64)


class TwoEndedPoolStats(NamedTuple):
    """Counters and occupancy of a two-ended pool (`UnifiedPool` or `StaticPool`), in entries or
    bytes. (Not the engine's serving-pool counts, `kda_core.serve`.)"""

    total_bytes: int
    state_live: int
    kv_live: int
    state_holes: int
    kv_holes: int
    state_used_bytes: int
    kv_used_bytes: int
    free_bytes: int
    gap_bytes: int
    state_frontier: int  # byte offset where the state side ends (grows up)
    kv_frontier: int  # byte offset where the KV side begins (grows down)
    moves: int
    moved_bytes: int
    ends_met: int  # allocs that returned None


class TwoEndedPool:
    """Shared machinery of UnifiedPool and StaticPool (see the module docstring)."""

    def __init__(
        self,
        total_bytes: int,
        kv_entry_bytes: int,
        state_entry_bytes: int,
        mode: str = "eager",
        store: bool = True,
        max_moves_per_flush: int = 4096,
        verify: bool = True,
    ) -> None:
        for name, flag in (("store", store), ("verify", verify)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be a bool, got {flag!r}")
        self.verify = verify and store
        hi = MAX_BUFFER_BYTES if store else _MAX_VIRTUAL_BYTES
        self.total_bytes = _check_int("total_bytes", total_bytes, 1, hi)
        t = self.total_bytes
        pk = _check_int("kv_entry_bytes", kv_entry_bytes, 1, t)
        ps = _check_int("state_entry_bytes", state_entry_bytes, 1, t)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        for name, e in (("kv_entry_bytes", pk), ("state_entry_bytes", ps)):
            if t // e > _MAX_ENTRIES_PER_SIDE:
                raise ValueError(
                    f"total_bytes // {name} must be <= {_MAX_ENTRIES_PER_SIDE} entries, "
                    f"got {t // e}; use larger entries"
                )
        self.mode = mode
        self.store = store
        self.max_moves_per_flush = _check_int(
            "max_moves_per_flush", max_moves_per_flush, 1, 1 << 30
        )
        self.buffer: np.ndarray | None = np.zeros(t, dtype=np.uint8) if store else None
        self._sides: dict[str, Side] = {
            "state": Side(ps, t // ps, True),
            "kv": Side(pk, t // pk, False),
        }
        self.ends_met = 0

    # --- geometry ------------------------------------------------------------------------

    def _check_side(self, side: str) -> Side:
        """The ``side`` a public method was given, or ValueError (internal callers that hold
        a known side name read ``self._sides`` directly)."""
        s = self._sides.get(side)
        if s is None:
            raise ValueError(f"side must be one of {list(SIDES)}, got {side!r}")
        return s

    def _peer(self, side: str) -> Side:
        return self._sides["kv" if side == "state" else "state"]

    def entry_bytes(self, side: str) -> int:
        return self._check_side(side).entry_bytes

    def _offset(self, s: Side, p: int) -> int:
        return p * s.entry_bytes if s.grows_up else self.total_bytes - (p + 1) * s.entry_bytes

    @property
    def state_frontier(self) -> int:
        """First byte above the state side (the state side owns ``[0, state_frontier)``)."""
        s = self._sides["state"]
        return s.wm * s.entry_bytes

    @property
    def kv_frontier(self) -> int:
        """First byte of the KV side (the KV side owns ``[kv_frontier, total_bytes)``)."""
        k = self._sides["kv"]
        return self.total_bytes - k.wm * k.entry_bytes

    @property
    def gap_bytes(self) -> int:
        return self.kv_frontier - self.state_frontier

    def _room(self, side: str) -> int:
        """Entries this side can append above its watermark right now."""
        raise NotImplementedError

    def _room_after_relief(self, side: str) -> int:
        return self._room(side)

    def _relieve(self, side: str) -> None:
        """Shortfall ladder step 1 (UnifiedPool only): the peer compacts."""

    # --- queries -------------------------------------------------------------------------

    def available(self, side: str) -> int:
        """Entries ``side`` can allocate now without any compaction (own holes + room)."""
        return self._available(self._check_side(side), side)

    def _available(self, s: Side, side: str) -> int:
        return min(s.holes + self._room(side), s.n_free_vids)

    def _schedulable(self, s: Side, side: str) -> int:
        return min(s.holes + self._room_after_relief(side), s.n_free_vids)

    def can_alloc(self, side: str, n: int) -> bool:
        """True iff ``alloc(side, n)`` would succeed (the ladder included). Pure query."""
        s = self._check_side(side)
        n = _check_int("n", n, 0, s.cap)
        return self._schedulable(s, side) >= n

    def live(self, side: str) -> int:
        return self._check_side(side).live

    def holes(self, side: str) -> int:
        return self._check_side(side).holes

    def watermark(self, side: str) -> int:
        return self._check_side(side).wm

    def physical(self, side: str, vids: np.ndarray | int) -> np.ndarray:
        """Physical positions of virtual ids (-1 where unbound)."""
        s = self._check_side(side)
        v = as_vids(vids, scalar=True)
        if v.size and (v.min() < 0 or v.max() >= s.cap):
            raise ValueError(f"vids must be in [0, {s.cap}) for side {side!r}")
        return s.v2p[v]

    def stats(self) -> TwoEndedPoolStats:
        st, kv = self._sides["state"], self._sides["kv"]
        su, ku = st.live * st.entry_bytes, kv.live * kv.entry_bytes
        return TwoEndedPoolStats(
            total_bytes=self.total_bytes,
            state_live=st.live,
            kv_live=kv.live,
            state_holes=st.holes,
            kv_holes=kv.holes,
            state_used_bytes=su,
            kv_used_bytes=ku,
            free_bytes=self.total_bytes - su - ku,
            gap_bytes=self.gap_bytes,
            state_frontier=self.state_frontier,
            kv_frontier=self.kv_frontier,
            moves=st.moves + kv.moves,
            moved_bytes=st.moved_bytes + kv.moved_bytes,
            ends_met=self.ends_met,
        )

    # --- alloc / free --------------------------------------------------------------------

    def alloc(self, side: str, n: int) -> np.ndarray | None:
        """Allocate ``n`` entries on ``side``; their virtual ids (int64, ``[n]``) or None.

        All or nothing. On a shortfall the ladder runs (peer compaction, re-check); None means
        the ends met: the caller must evict or queue. Entries hold stale bytes until written.
        """
        s = self._check_side(side)
        n = _check_int("n", n, 0, s.cap)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if self._available(s, side) < n:
            self._relieve(side)
            if self._available(s, side) < n:
                self.ends_met += 1
                s.failed += 1
                return None
        vids, pos = s.take(n)
        if self.verify:
            for v, p in zip(vids.tolist(), pos.tolist()):
                s.crc[v] = self._crc_at(s, p)
        return vids

    def free(self, side: str, vids: np.ndarray | list[int] | int) -> int:
        """Free virtual ids on ``side``; returns the number of compaction moves it caused.

        Eager: compact now (minimal moves). Lazy / static: the positions become holes and the
        watermark retreats past any holes at the top (no moves).
        """
        s = self._check_side(side)
        v = as_vids(vids)
        if v.size == 0:
            return 0
        p = s.release(v, side)
        if self.mode == "eager":
            return self._compact_freed(s, p)
        s.is_hole[p] = True
        s.holes += v.size
        s.trim()
        return 0

    def _compact_freed(self, s: Side, p: np.ndarray) -> int:
        """Eager compaction after freeing positions ``p``: minimal moves, no holes left."""
        k = p.size
        new_wm = s.wm - k
        holes_below = np.sort(p[p < new_wm])
        if holes_below.size:
            band = np.arange(new_wm, s.wm, dtype=np.int64)
            src = band[s.p2v[band] >= 0]
            self._move(s, src, holes_below)
        s.wm = new_wm
        return int(holes_below.size)

    def _move(self, s: Side, src: np.ndarray, dst: np.ndarray) -> None:
        """Move live entries ``src -> dst`` (bytes and table rebind)."""
        assert src.size == dst.size, "compaction pairing mismatch"
        if not src.size:
            return
        if self.buffer is not None:
            e = s.entry_bytes
            buf = self.buffer
            for a, b in zip(src.tolist(), dst.tolist()):
                oa, ob = self._offset(s, a), self._offset(s, b)
                buf[ob : ob + e] = buf[oa : oa + e]
        s.rebind(src, dst)

    def flush(self, side: str, max_moves: int | None = None) -> int:
        """Compact ``side``'s holes (lazy); returns the moves made. Eager sides have none.

        Full compaction moves exactly the live entries above ``wm - holes`` into the holes below
        it. With ``max_moves`` only the highest live entries move into the lowest holes.
        """
        s = self._check_side(side)
        if max_moves is not None:
            max_moves = _check_int("max_moves", max_moves, 0, 1 << 30)
        return self._flush(s, max_moves)

    def _flush(self, s: Side, max_moves: int | None) -> int:
        """`flush` on a side and a move cap already checked (the ladder and ``on_idle``)."""
        if s.holes == 0:
            return 0
        holes = np.flatnonzero(s.is_hole[: s.wm])
        new_wm = s.wm - holes.size
        dst = holes[holes < new_wm]
        band = np.arange(new_wm, s.wm, dtype=np.int64)
        src = band[s.p2v[band] >= 0]
        if max_moves is None or dst.size <= max_moves:
            self._move(s, src, dst)
            s.is_hole[holes] = False
            s.holes = 0
            s.wm = new_wm
            return int(dst.size)
        m = max_moves
        src, dst = src[::-1][:m], dst[:m]
        self._move(s, src, dst)
        s.is_hole[dst] = False
        s.is_hole[src] = True
        s.trim()
        return m

    def on_idle(self) -> int:
        """Idle-time flush of both sides, each capped at ``max_moves_per_flush`` moves."""
        if self.mode != "lazy":
            return 0
        return sum(self._flush(self._sides[side], self.max_moves_per_flush) for side in SIDES)

    # --- bytes ---------------------------------------------------------------------------

    def _crc_at(self, s: Side, p: int) -> int:
        assert self.buffer is not None
        o = self._offset(s, p)
        return zlib.crc32(self.buffer[o : o + s.entry_bytes].data) & 0xFFFFFFFF

    def _check_vid(self, s: Side, side: str, vid: int) -> int:
        v = _check_int("vid", vid, 0, s.cap - 1)
        p = int(s.v2p[v])
        if p < 0:
            raise ValueError(f"vid {v} is not allocated on side {side!r}")
        return p

    def write(self, side: str, vid: int, data: bytes | np.ndarray, offset: int = 0) -> None:
        """Write ``data`` (bytes or a uint8 array) into entry ``vid`` at byte ``offset``."""
        if self.buffer is None:
            raise ValueError("write needs store=True (this pool only counts bytes)")
        s = self._check_side(side)
        p = self._check_vid(s, side, vid)
        if isinstance(data, (bytes, bytearray)):
            arr = np.frombuffer(data, dtype=np.uint8)
        else:
            arr = np.asarray(data)
        if arr.dtype != np.uint8 or arr.ndim != 1:
            raise ValueError("data must be bytes or a 1-D uint8 array")
        off = _check_int("offset", offset, 0, s.entry_bytes)
        if off + arr.size > s.entry_bytes:
            raise ValueError(
                f"offset + len(data) must be <= entry size {s.entry_bytes}, got {off + arr.size}"
            )
        o = self._offset(s, p) + off
        self.buffer[o : o + arr.size] = arr
        if self.verify:
            s.crc[vid] = self._crc_at(s, p)

    def read(self, side: str, vid: int) -> np.ndarray:
        """A copy of entry ``vid``'s bytes (uint8 ``[entry_bytes]``)."""
        if self.buffer is None:
            raise ValueError("read needs store=True (this pool only counts bytes)")
        s = self._check_side(side)
        p = self._check_vid(s, side, vid)
        o = self._offset(s, p)
        return self.buffer[o : o + s.entry_bytes].copy()

    def positions(self, side: str) -> np.ndarray:
        """Virtual id at each physical position below the watermark (-1 = hole); a copy."""
        s = self._check_side(side)
        return s.p2v[: s.wm].copy()

    # --- integrity -----------------------------------------------------------------------

    def check_integrity(self, check_bytes: bool = True) -> None:
        """Raise AssertionError unless every invariant of the module docstring holds."""
        t = self.total_bytes
        st, kv = self._sides["state"], self._sides["kv"]
        if not self.state_frontier <= self.kv_frontier:
            raise AssertionError(
                f"sides overlap: state ends at {self.state_frontier}, kv starts at "
                f"{self.kv_frontier}"
            )
        used = st.live * st.entry_bytes + kv.live * kv.entry_bytes
        free = self.gap_bytes + st.holes * st.entry_bytes + kv.holes * kv.entry_bytes
        if used + free != t:
            raise AssertionError(f"bytes not conserved: used {used} + free {free} != {t}")
        for name, s in self._sides.items():
            s.check(name, self.mode == "eager")
            if check_bytes and self.verify:
                for p in range(s.wm):
                    v = int(s.p2v[p])
                    if v >= 0 and self._crc_at(s, p) != int(s.crc[v]):
                        raise AssertionError(f"{name} entry vid {v} at position {p} changed")


__all__ = [
    "MAX_BUFFER_BYTES",
    "MODES",
    "SIDES",
    "TwoEndedPool",
    "TwoEndedPoolStats",
]
