"""A unified two-ended byte pool (SGLang's ``--enable-unified-memory``) and a static partition.

One buffer of ``total_bytes`` holds two kinds of fixed-size entries:

* ``"state"`` entries (KDA state slots, ``state_entry_bytes`` each) grow **up** from byte 0:
  physical slot p occupies ``[p * S, (p + 1) * S)``;
* ``"kv"`` entries (MLA KV pages, ``kv_entry_bytes`` each) grow **down** from the top:
  physical page q occupies ``[T - (q + 1) * P, T - q * P)``.

Each side has a watermark ``wm`` (physical positions ``[0, wm)`` are in use or are holes); the
free *gap* between the two frontiers is ``T - kv.wm * P - state.wm * S >= 0``. Callers only see
**virtual ids**; the side owns the ``v2p`` / ``p2v`` tables, so compaction moves bytes and
rewrites the tables and nothing else (engines.md §1.12).

Invariants (checked by ``check_integrity``):

* the sides never overlap: ``state.wm * S <= T - kv.wm * P``;
* bytes are conserved: ``used_kv + used_state + free == total`` where free = gap + holes;
* ``v2p`` and ``p2v`` are inverse on live entries; every live position is below the watermark;
* eager mode has no holes; a lazy side's top position (``wm - 1``) is live or ``wm == 0``;
* nothing is lost: every live entry's bytes equal what was last written (CRC32 per entry,
  recorded at alloc and at write) after any sequence of allocs, frees and compactions.

Modes: ``"eager"`` compacts on every free (the frontier retreats by the number freed and the
live entries left in the vacated band move into the freed holes below it, in sorted order —
the minimal set of moves); ``"lazy"`` keeps a hole list, allocs drain holes first (lowest
first), and compaction runs on ``flush`` (idle, capped moves) or urgently when an alloc of the
*peer* side falls short.

When the ends meet (``alloc`` falls short), the shortfall ladder runs: ask the peer to compact
(compacting yourself gains nothing: your own holes are already usable), re-check, else return
``None`` — the caller evicts or queues.

``StaticPool`` splits the same buffer once, SGLang-style (state budget = rest * r / (1 + r)),
with the same verbs; its two regions never lend each other bytes.

Left out: the slot-0 dummy sink and ``min_slot_index``, the inverse-move history for
speculative rollback, pages pending reuse by a running kernel, and 3+ sub-pools.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int as _check_int

SIDES: tuple[str, str] = ("state", "kv")
MODES: tuple[str, str] = ("eager", "lazy")
MAX_BUFFER_BYTES: int = 256 << 20  # cap on a real (store=True) buffer
MAX_VIRTUAL_BYTES: int = 1 << 44  # cap on an accounting-only (store=False) pool
MAX_ENTRIES_PER_SIDE: int = 1 << 21  # cap on each side's index space (tables are int64)


def _vids(vids: object, scalar: bool = False) -> np.ndarray:
    """Virtual ids as int64: 1-D (a scalar becomes one id), or any shape when ``scalar``
    (lookups). Bools, floats and strings are rejected with a ValueError naming ``vids``."""
    a = np.asarray(vids)
    if a.size == 0:
        return np.zeros(a.shape if scalar else 0, np.int64)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"vids must be integer virtual ids, got dtype {a.dtype}")
    if not scalar and a.ndim > 1:
        raise ValueError("vids must be a 1-D array of virtual ids")
    a = a.astype(np.int64, copy=False)
    return a if scalar else np.atleast_1d(a)


@dataclass(slots=True)
class _Side:
    """One sub-pool: fixed-size entries, virtual ids, a watermark and (lazy) holes."""

    entry_bytes: int
    cap: int  # index space: total_bytes // entry_bytes (as if it owned the whole buffer)
    grows_up: bool
    v2p: np.ndarray = field(init=False)  # [cap] int64, -1 = unbound
    p2v: np.ndarray = field(init=False)  # [cap] int64, -1 = empty (free or hole)
    is_hole: np.ndarray = field(init=False)  # [cap] bool, lazy holes below wm
    crc: np.ndarray = field(init=False)  # [cap] uint32 by virtual id
    free_vids: np.ndarray = field(init=False)  # stack of unused virtual ids
    n_free_vids: int = 0
    wm: int = 0
    holes: int = 0
    live: int = 0
    moves: int = 0
    moved_bytes: int = 0
    allocs: int = 0
    frees: int = 0
    failed: int = 0

    def __post_init__(self) -> None:
        self.v2p = np.full(self.cap, -1, dtype=np.int64)
        self.p2v = np.full(self.cap, -1, dtype=np.int64)
        self.is_hole = np.zeros(self.cap, dtype=bool)
        self.crc = np.zeros(self.cap, dtype=np.uint32)
        self.free_vids = np.arange(self.cap - 1, -1, -1, dtype=np.int64)
        self.n_free_vids = self.cap


class PoolStats(NamedTuple):
    """Counters and occupancy of a pool, all in entries or bytes."""

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


class _TwoEndedPool:
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
        if not isinstance(store, bool):
            raise ValueError(f"store must be a bool, got {store!r}")
        self.verify = bool(verify) and store
        hi = MAX_BUFFER_BYTES if store else MAX_VIRTUAL_BYTES
        self.total_bytes = _check_int("total_bytes", total_bytes, 1, hi)
        t = self.total_bytes
        pk = _check_int("kv_entry_bytes", kv_entry_bytes, 1, t)
        ps = _check_int("state_entry_bytes", state_entry_bytes, 1, t)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        for name, e in (("kv_entry_bytes", pk), ("state_entry_bytes", ps)):
            if t // e > MAX_ENTRIES_PER_SIDE:
                raise ValueError(
                    f"total_bytes // {name} must be <= {MAX_ENTRIES_PER_SIDE} entries, "
                    f"got {t // e}; use larger entries"
                )
        self.mode = mode
        self.store = store
        self.max_moves_per_flush = _check_int(
            "max_moves_per_flush", max_moves_per_flush, 1, 1 << 30
        )
        self.buffer: np.ndarray | None = np.zeros(t, dtype=np.uint8) if store else None
        self._sides: dict[str, _Side] = {
            "state": _Side(ps, t // ps, True),
            "kv": _Side(pk, t // pk, False),
        }
        self.ends_met = 0

    # --- geometry ------------------------------------------------------------------------

    def _side(self, side: str) -> _Side:
        s = self._sides.get(side)
        if s is None:
            raise ValueError(f"side must be one of {list(SIDES)}, got {side!r}")
        return s

    def _peer(self, side: str) -> _Side:
        return self._sides["kv" if side == "state" else "state"]

    def entry_bytes(self, side: str) -> int:
        return self._side(side).entry_bytes

    def _offset(self, s: _Side, p: int) -> int:
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
        s = self._side(side)
        return min(s.holes + self._room(side), s.n_free_vids)

    def schedulable_available(self, side: str) -> int:
        """Entries ``side`` could allocate after the shortfall ladder (credits peer holes)."""
        s = self._side(side)
        return min(s.holes + self._room_after_relief(side), s.n_free_vids)

    def can_alloc(self, side: str, n: int) -> bool:
        """True iff ``alloc(side, n)`` would succeed (the ladder included). Pure query."""
        s = self._side(side)
        n = _check_int("n", n, 0, s.cap)
        return self.schedulable_available(side) >= n

    def live(self, side: str) -> int:
        return self._side(side).live

    def holes(self, side: str) -> int:
        return self._side(side).holes

    def watermark(self, side: str) -> int:
        return self._side(side).wm

    def physical(self, side: str, vids: np.ndarray | int) -> np.ndarray:
        """Physical positions of virtual ids (-1 where unbound)."""
        s = self._side(side)
        v = _vids(vids, scalar=True)
        if v.size and (v.min() < 0 or v.max() >= s.cap):
            raise ValueError(f"vids must be in [0, {s.cap}) for side {side!r}")
        return s.v2p[v]

    def stats(self) -> PoolStats:
        st, kv = self._sides["state"], self._sides["kv"]
        su, ku = st.live * st.entry_bytes, kv.live * kv.entry_bytes
        return PoolStats(
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
        s = self._side(side)
        n = _check_int("n", n, 0, s.cap)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if self.available(side) < n:
            self._relieve(side)
            if self.available(side) < n:
                self.ends_met += 1
                s.failed += 1
                return None
        take_h = min(n, s.holes)
        if take_h:
            pos_h = np.flatnonzero(s.is_hole[: s.wm])[:take_h]
            s.is_hole[pos_h] = False
            s.holes -= take_h
        else:
            pos_h = np.zeros(0, dtype=np.int64)
        ext = n - take_h
        pos = np.concatenate([pos_h, np.arange(s.wm, s.wm + ext, dtype=np.int64)])
        s.wm += ext
        vids = s.free_vids[s.n_free_vids - n : s.n_free_vids][::-1].copy()
        s.n_free_vids -= n
        s.v2p[vids] = pos
        s.p2v[pos] = vids
        s.live += n
        s.allocs += 1
        if self.verify:
            for v, p in zip(vids.tolist(), pos.tolist()):
                s.crc[v] = self._crc_at(s, p)
        return vids

    def free(self, side: str, vids: np.ndarray | list[int] | int) -> int:
        """Free virtual ids on ``side``; returns the number of compaction moves it caused.

        Eager: compact now (minimal moves). Lazy / static: the positions become holes and the
        watermark retreats past any holes at the top (no moves).
        """
        s = self._side(side)
        v = _vids(vids)
        if v.size == 0:
            return 0
        if v.min() < 0 or v.max() >= s.cap:
            raise ValueError(f"vids must be in [0, {s.cap}) for side {side!r}")
        p = s.v2p[v]
        if (p < 0).any():
            raise ValueError(f"vids {v[p < 0][:5].tolist()} are not allocated on side {side!r}")
        if v.size > 1:
            sv = np.sort(v)
            if (sv[1:] == sv[:-1]).any():
                raise ValueError("vids must not repeat")
        s.v2p[v] = -1
        s.p2v[p] = -1
        s.free_vids[s.n_free_vids : s.n_free_vids + v.size] = v
        s.n_free_vids += v.size
        s.live -= v.size
        s.frees += 1
        if self.mode == "eager":
            return self._compact_freed(s, p)
        s.is_hole[p] = True
        s.holes += v.size
        self._trim(s)
        return 0

    def _compact_freed(self, s: _Side, p: np.ndarray) -> int:
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

    def _trim(self, s: _Side) -> None:
        """Retreat a lazy watermark past holes at the top (free, no moves)."""
        if s.wm == 0 or not s.is_hole[s.wm - 1]:
            return
        live_pos = np.flatnonzero(s.p2v[: s.wm] >= 0)
        new_wm = int(live_pos[-1]) + 1 if live_pos.size else 0
        n = s.wm - new_wm
        s.is_hole[new_wm : s.wm] = False
        s.holes -= n
        s.wm = new_wm

    def _move(self, s: _Side, src: np.ndarray, dst: np.ndarray) -> None:
        """Move live entries ``src -> dst`` (bytes and table rebind)."""
        if src.size != dst.size:
            raise AssertionError("compaction pairing mismatch")
        if not src.size:
            return
        if self.buffer is not None:
            e = s.entry_bytes
            buf = self.buffer
            for a, b in zip(src.tolist(), dst.tolist()):
                oa, ob = self._offset(s, a), self._offset(s, b)
                buf[ob : ob + e] = buf[oa : oa + e]
        v = s.p2v[src]
        s.v2p[v] = dst
        s.p2v[dst] = v
        s.p2v[src] = -1
        s.moves += int(src.size)
        s.moved_bytes += int(src.size) * s.entry_bytes

    def flush(self, side: str, max_moves: int | None = None) -> int:
        """Compact ``side``'s holes (lazy); returns the moves made. Eager sides have none.

        Full compaction moves exactly the live entries above ``wm - holes`` into the holes below
        it. With ``max_moves`` only the highest live entries move into the lowest holes.
        """
        s = self._side(side)
        if s.holes == 0:
            return 0
        if max_moves is not None:
            max_moves = _check_int("max_moves", max_moves, 0, 1 << 30)
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
        self._trim(s)
        return m

    def on_idle(self) -> int:
        """Idle-time flush of both sides, each capped at ``max_moves_per_flush`` moves."""
        if self.mode != "lazy":
            return 0
        return sum(self.flush(side, self.max_moves_per_flush) for side in SIDES)

    # --- bytes ---------------------------------------------------------------------------

    def _crc_at(self, s: _Side, p: int) -> int:
        assert self.buffer is not None
        o = self._offset(s, p)
        return zlib.crc32(self.buffer[o : o + s.entry_bytes].data) & 0xFFFFFFFF

    def _bound(self, s: _Side, side: str, vid: int) -> int:
        v = _check_int("vid", vid, 0, s.cap - 1)
        p = int(s.v2p[v])
        if p < 0:
            raise ValueError(f"vid {v} is not allocated on side {side!r}")
        return p

    def write(self, side: str, vid: int, data: bytes | np.ndarray, offset: int = 0) -> None:
        """Write ``data`` (bytes or a uint8 array) into entry ``vid`` at byte ``offset``."""
        if self.buffer is None:
            raise ValueError("write needs store=True (this pool only counts bytes)")
        s = self._side(side)
        p = self._bound(s, side, vid)
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
        s = self._side(side)
        p = self._bound(s, side, vid)
        o = self._offset(s, p)
        return self.buffer[o : o + s.entry_bytes].copy()

    def live_vids(self, side: str) -> np.ndarray:
        """Virtual ids currently allocated on ``side`` (sorted)."""
        s = self._side(side)
        return np.sort(s.p2v[: s.wm][s.p2v[: s.wm] >= 0])

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
            self._check_side(name, s)
            if check_bytes and self.verify:
                for p in range(s.wm):
                    v = int(s.p2v[p])
                    if v >= 0 and self._crc_at(s, p) != int(s.crc[v]):
                        raise AssertionError(f"{name} entry vid {v} at position {p} changed")

    def _check_side(self, name: str, s: _Side) -> None:
        bound = np.flatnonzero(s.v2p >= 0)
        if bound.size != s.live:
            raise AssertionError(f"{name}: {bound.size} bound ids but live = {s.live}")
        pos = s.v2p[bound]
        if pos.size and (pos.max() >= s.wm or pos.min() < 0):
            raise AssertionError(f"{name}: a live entry lies at or above the watermark {s.wm}")
        if not np.array_equal(s.p2v[pos], bound):
            raise AssertionError(f"{name}: v2p and p2v disagree")
        if (s.p2v[s.wm :] >= 0).any() or s.is_hole[s.wm :].any():
            raise AssertionError(f"{name}: entries or holes above the watermark")
        hole_pos = np.flatnonzero(s.is_hole[: s.wm])
        if hole_pos.size != s.holes or (s.p2v[hole_pos] >= 0).any():
            raise AssertionError(f"{name}: hole list corrupt")
        if s.live + s.holes != s.wm:
            raise AssertionError(f"{name}: live {s.live} + holes {s.holes} != wm {s.wm}")
        if self.mode == "eager" and s.holes:
            raise AssertionError(f"{name}: eager side has holes")
        if s.wm and s.p2v[s.wm - 1] < 0:
            raise AssertionError(f"{name}: top position below the watermark is a hole")
        if s.n_free_vids + s.live != s.cap:
            raise AssertionError(f"{name}: virtual ids leaked")


class UnifiedPool(_TwoEndedPool):
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
        peer = "kv" if side == "state" else "state"
        self.flush(peer)  # urgent: no cap on moves

    def state_cost_in_kv_entries(self) -> int:
        """KV entries an admission must reserve per new state slot: ceil(S / P)."""
        return math.ceil(self._sides["state"].entry_bytes / self._sides["kv"].entry_bytes)


class StaticPool(_TwoEndedPool):
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
        if (
            isinstance(ratio, bool)
            or not isinstance(ratio, (int, float, np.floating))
            or not (0.0 <= float(ratio) <= 1e6)
        ):
            raise ValueError(f"ratio must be a number in [0, 1e6], got {ratio!r}")
        self.ratio = float(ratio)
        t = self.total_bytes
        budget = int(t * self.ratio / (1.0 + self.ratio))
        self.state_capacity = budget // state_entry_bytes
        self.kv_capacity = (t - self.state_capacity * state_entry_bytes) // kv_entry_bytes

    def capacity(self, side: str) -> int:
        self._side(side)
        return self.state_capacity if side == "state" else self.kv_capacity

    def _room(self, side: str) -> int:
        return self.capacity(side) - self._sides[side].wm

    def on_idle(self) -> int:
        return 0

    def check_integrity(self, check_bytes: bool = True) -> None:
        """The shared invariants, plus: each side stays inside its fixed region."""
        super().check_integrity(check_bytes)
        for side in SIDES:
            if self._sides[side].wm > self.capacity(side):
                raise AssertionError(f"{side} side crossed its static region")


def make_pool(
    kind: str,
    total_bytes: int,
    kv_entry_bytes: int,
    state_entry_bytes: int,
    ratio: float = 0.9,
    store: bool = True,
    verify: bool = True,
) -> _TwoEndedPool:
    """``kind`` = "eager" | "lazy" (UnifiedPool) or "static" (StaticPool at ``ratio``)."""
    if kind == "static":
        return StaticPool(total_bytes, kv_entry_bytes, state_entry_bytes, ratio, store, verify)
    if kind in MODES:
        return UnifiedPool(
            total_bytes, kv_entry_bytes, state_entry_bytes, kind, store, verify=verify
        )
    raise ValueError(f"kind must be one of ['eager', 'lazy', 'static'], got {kind!r}")


__all__ = [
    "SIDES",
    "MODES",
    "MAX_BUFFER_BYTES",
    "PoolStats",
    "UnifiedPool",
    "StaticPool",
    "make_pool",
]
