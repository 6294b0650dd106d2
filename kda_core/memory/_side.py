"""One side of the two-ended pool: fixed-size entries behind virtual ids.

A side owns the ``v2p`` / ``p2v`` tables (virtual id <-> physical position), a watermark ``wm``
(positions ``[0, wm)`` are live or holes), the lazy hole list, per-entry CRC32s and counters.
It never touches bytes: the pool (`kda_core.memory.pool`) moves them and calls `rebind`.
Left out: everything about where a side sits in the buffer (the pool knows the geometry).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def as_vids(vids: object, scalar: bool = False) -> np.ndarray:
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
class Side:
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

    # --- table operations (the pool moves the bytes) ---------------------------------------

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Bind ``n`` fresh virtual ids to positions: holes first (lowest first), then above the
        watermark. -> (vids, positions). The caller has checked that they fit."""
        take_h = min(n, self.holes)
        if take_h:
            pos_h = np.flatnonzero(self.is_hole[: self.wm])[:take_h]
            self.is_hole[pos_h] = False
            self.holes -= take_h
        else:
            pos_h = np.zeros(0, dtype=np.int64)
        ext = n - take_h
        pos = np.concatenate([pos_h, np.arange(self.wm, self.wm + ext, dtype=np.int64)])
        self.wm += ext
        vids = self.free_vids[self.n_free_vids - n : self.n_free_vids][::-1].copy()
        self.n_free_vids -= n
        self.v2p[vids] = pos
        self.p2v[pos] = vids
        self.live += n
        self.allocs += 1
        return vids, pos

    def release(self, v: np.ndarray, side: str) -> np.ndarray:
        """Unbind live virtual ids ``v`` (1-D int64, checked here); -> their positions, which
        the caller turns into holes or compacts."""
        if v.min() < 0 or v.max() >= self.cap:
            raise ValueError(f"vids must be in [0, {self.cap}) for side {side!r}")
        p = self.v2p[v]
        if (p < 0).any():
            raise ValueError(f"vids {v[p < 0][:5].tolist()} are not allocated on side {side!r}")
        if v.size > 1:
            sv = np.sort(v)
            if (sv[1:] == sv[:-1]).any():
                raise ValueError("vids must not repeat")
        self.v2p[v] = -1
        self.p2v[p] = -1
        self.free_vids[self.n_free_vids : self.n_free_vids + v.size] = v
        self.n_free_vids += v.size
        self.live -= v.size
        self.frees += 1
        return p

    def trim(self) -> None:
        """Retreat a lazy watermark past holes at the top (free, no moves)."""
        if self.wm == 0 or not self.is_hole[self.wm - 1]:
            return
        live_pos = np.flatnonzero(self.p2v[: self.wm] >= 0)
        new_wm = int(live_pos[-1]) + 1 if live_pos.size else 0
        n = self.wm - new_wm
        self.is_hole[new_wm : self.wm] = False
        self.holes -= n
        self.wm = new_wm

    def rebind(self, src: np.ndarray, dst: np.ndarray) -> None:
        """The table half of a move: the entries at ``src`` now live at ``dst``."""
        v = self.p2v[src]
        self.v2p[v] = dst
        self.p2v[dst] = v
        self.p2v[src] = -1
        self.moves += int(src.size)
        self.moved_bytes += int(src.size) * self.entry_bytes

    def check(self, name: str, eager: bool) -> None:
        """Raise AssertionError unless this side's tables are consistent (see the pool)."""
        bound = np.flatnonzero(self.v2p >= 0)
        if bound.size != self.live:
            raise AssertionError(f"{name}: {bound.size} bound ids but live = {self.live}")
        pos = self.v2p[bound]
        if pos.size and (pos.max() >= self.wm or pos.min() < 0):
            raise AssertionError(f"{name}: a live entry lies at or above the watermark {self.wm}")
        if not np.array_equal(self.p2v[pos], bound):
            raise AssertionError(f"{name}: v2p and p2v disagree")
        if (self.p2v[self.wm :] >= 0).any() or self.is_hole[self.wm :].any():
            raise AssertionError(f"{name}: entries or holes above the watermark")
        hole_pos = np.flatnonzero(self.is_hole[: self.wm])
        if hole_pos.size != self.holes or (self.p2v[hole_pos] >= 0).any():
            raise AssertionError(f"{name}: hole list corrupt")
        if self.live + self.holes != self.wm:
            raise AssertionError(f"{name}: live {self.live} + holes {self.holes} != wm {self.wm}")
        if eager and self.holes:
            raise AssertionError(f"{name}: eager side has holes")
        if self.wm and self.p2v[self.wm - 1] < 0:
            raise AssertionError(f"{name}: top position below the watermark is a hole")
        if self.n_free_vids + self.live != self.cap:
            raise AssertionError(f"{name}: virtual ids leaked")
