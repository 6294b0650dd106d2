"""Where context parallelism cuts: rank boundaries (whole chunks, rank 0 weighted for its cheaper
plain pass) and each rank's pieces between document starts (``cu_seqlens``). A piece that starts
a document knows its initial state; only a segment's first piece may be open.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core import kda
from kda_core._checks import check_int

MAX_RANKS = 64
MAX_DOCS = 4096


@dataclass(frozen=True, slots=True)
class Piece:
    start: int  # global token positions
    stop: int
    doc: int
    starts_doc: bool  # its initial state is the document's own (else: open, from the scan)
    ends_doc: bool


@dataclass(frozen=True, slots=True)
class Plan:
    T: int
    bounds: tuple[int, ...]  # P + 1 rank boundaries
    cu_seqlens: tuple[int, ...]
    pieces: tuple[tuple[Piece, ...], ...]  # per rank

    @property
    def ranks(self) -> int:
        return len(self.bounds) - 1

    @property
    def constant(self) -> tuple[bool, ...]:
        """Whether each rank's scan element is constant (it holds a document start)."""
        return tuple(len(p) > 1 or p[0].starts_doc for p in self.pieces)


def split_points(
    T: int, ranks: int, chunk_size: int = 64, first_weight: float = 1.0
) -> tuple[int, ...]:
    """Rank boundaries: shares in proportion 1 : ... : 1, with rank 0's share ``first_weight``
    times the others' (rank 0 runs the plain pass, the others the wider augmented one: see
    `balance_weight`); rounded to whole chunks when every rank gets >= 8 of them."""
    if not 1.0 <= first_weight <= 8.0:
        raise ValueError(f"first_weight must be in [1, 8], got {first_weight}")
    C = chunk_size if 8 * ranks * chunk_size <= T else 1  # rounding must not unbalance ranks
    total = first_weight + ranks - 1
    pts = [0] + [round(T * (first_weight + r - 1) / total / C) * C for r in range(1, ranks)]
    pts.append(T)
    if any(a >= b for a, b in zip(pts, pts[1:])):  # tiny T: plain equal shares
        pts = [round(r * T / ranks) for r in range(ranks)] + [T]
    return tuple(pts)


def balance_weight(T: int, H: int, K: int, V: int, chunk_size: int = 64) -> float:
    """How much more a token costs in the augmented pass (state width V + K) than in the plain
    one (width V), by `kda.chunked_flops`: rank 0 gets that many times the others' share, so the
    ranks finish their local passes together (K = V = 128: 1.72)."""
    return kda.chunked_flops(T, H, K, V + K, chunk_size) / kda.chunked_flops(T, H, K, V, chunk_size)


def make_plan(
    T: int, ranks: int, cu_seqlens=None, chunk_size: int = 64, first_weight: float = 1.0
) -> Plan:
    ranks = check_int("ranks", ranks, 1, MAX_RANKS)
    if ranks > T:
        raise ValueError(f"ranks must be in [1, T={T}] (one token per rank at least), got {ranks}")
    cu = _check_cu_seqlens(cu_seqlens, T)
    bounds = split_points(T, ranks, chunk_size, first_weight)
    starts = set(cu[:-1])
    pieces = []
    for r in range(ranks):
        s, e = bounds[r], bounds[r + 1]
        cuts = [s] + [c for c in cu[1:-1] if s < c < e] + [e]
        doc0 = int(np.searchsorted(cu, s, side="right")) - 1
        pieces.append(
            tuple(
                Piece(a, b, doc0 + i, a in starts, b in set(cu[1:]))
                for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))
            )
        )
    return Plan(T, bounds, cu, tuple(pieces))


def _check_cu_seqlens(cu_seqlens, T: int) -> tuple[int, ...]:
    if cu_seqlens is None:
        return (0, T)
    cu = np.asarray(cu_seqlens)
    if cu.ndim != 1 or cu.dtype.kind not in "iu" or not 2 <= cu.size <= MAX_DOCS + 1:
        raise ValueError(f"cu_seqlens must be 2..{MAX_DOCS + 1} integers, got {cu_seqlens!r:.80}")
    if cu[0] != 0 or cu[-1] != T or np.any(np.diff(cu) < 1):
        raise ValueError(f"cu_seqlens must rise strictly from 0 to T={T}, got {cu.tolist()!r:.80}")
    return tuple(int(c) for c in cu)
