"""The chain rule of block ids, checked in bulk: every id always follows the same parent.

A Mooncake ``hash_ids`` list is a chain (the first id's parent is -1, the root). Two requests
share id ``h`` only if their inputs agree up to and including that block, so an id seen after
two different parents is a malformed row. :class:`ChainTable` keeps, for every id accepted so
far, the parent it first followed, as two sorted int64 arrays (16 bytes an id, where a dict of
Python ints costs ~100) or, while the ids are dense (the usual numbering from 0), as one array
indexed by id (8 bytes an id, no insertion cost); it admits a batch of requests in file order
with numpy: a request is refused iff one of its ids follows another parent than the one
recorded before it, exactly as the one-id-at-a-time dict check (its naive twin,
``check_chain`` in tests/trace_checks.py) decides.
"""

from __future__ import annotations

import numpy as np

ROOT = -1  # the parent of a request's first block
_UNSEEN = -2  # a dense slot whose id has not been admitted
_DENSE_SLACK = 1 << 20  # dense while max id < 4 x admitted ids + this


def _parents_of(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each id's parent: the previous id of its request, ``ROOT`` at a request's first block
    (``starts``: index of each request's first id in ``ids``)."""
    par = np.empty_like(ids)
    if ids.size:
        par[1:] = ids[:-1]
        par[starts] = ROOT
    return par


class ChainTable:
    """The parent of every id admitted so far: ``dense[id]`` (``UNSEEN`` where not admitted)
    while the ids are dense, else the sorted ``ids`` with their ``parents``."""

    __slots__ = ("dense", "ids", "parents", "n")

    def __init__(self) -> None:
        self.dense: np.ndarray | None = np.zeros(0, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.parents = np.zeros(0, dtype=np.int64)
        self.n = 0  # ids admitted

    def __len__(self) -> int:
        return self.n

    def _lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(known mask, recorded parent where known) for ``ids``."""
        if not self.n or not ids.size:
            return np.zeros(ids.size, dtype=bool), np.zeros(ids.size, dtype=np.int64)
        if self.dense is not None:
            rec = self.dense[np.minimum(ids, self.dense.size - 1)]
            return (ids < self.dense.size) & (rec != _UNSEEN), rec
        pos = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
        return self.ids[pos] == ids, self.parents[pos]

    def _grow(self, top: int) -> None:
        """Dense mode: room for ids up to ``top``."""
        assert self.dense is not None
        if top >= self.dense.size:
            grown = np.full(max(top + 1, self.dense.size * 5 // 4), _UNSEEN, dtype=np.int64)
            grown[: self.dense.size] = self.dense
            self.dense = grown

    def _insert(self, uniq: np.ndarray, first_parent: np.ndarray) -> None:
        """Record new ids (sorted, not admitted before) with their parents."""
        if not uniq.size:
            return
        self.n += int(uniq.size)
        top = int(uniq[-1])
        if self.dense is not None and top >= 4 * self.n + _DENSE_SLACK:
            self.ids = np.flatnonzero(self.dense != _UNSEEN).astype(np.int64)
            self.parents = self.dense[self.ids]
            self.dense = None  # too sparse: the sorted table from now on
        if self.dense is not None:
            self._grow(top)
            self.dense[uniq] = first_parent
            return
        at = np.searchsorted(self.ids, uniq)
        self.ids = np.insert(self.ids, at, uniq)
        self.parents = np.insert(self.parents, at, first_parent)

    def _admit_dense(self, ids: np.ndarray, parents: np.ndarray) -> bool:
        """The common case, without a sort: in dense mode, record a batch that keeps the rule
        everywhere and say True; otherwise change nothing and say False (the exact path,
        :meth:`_check`, then finds the first conflict)."""
        if self.dense is None or not ids.size:
            return False
        top = int(ids.max())
        if top >= 4 * (self.n + ids.size) + _DENSE_SLACK:
            return False
        self._grow(top)
        rec = self.dense[ids]
        known = rec != _UNSEEN
        if np.any(known & (rec != parents)):
            return False
        new_ids, new_parents = ids[~known], parents[~known]
        self.dense[new_ids] = new_parents  # one occurrence per id lands
        if np.any(self.dense[new_ids] != new_parents):  # a new id with two parents here
            self.dense[new_ids] = _UNSEEN
            return False
        self.n = int(np.count_nonzero(self.dense != _UNSEEN))
        return True

    def _check(self, ids: np.ndarray, parents: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """(index of the first id, in file order, whose parent differs from the one recorded
        by the table or by its first occurrence in this batch, or -1; the new ids, sorted; the
        parent each first followed)."""
        known, recorded = self._lookup(ids)
        bad = known & (recorded != parents)
        new = np.flatnonzero(~known)
        uniq, first, inv = np.unique(ids[new], return_index=True, return_inverse=True)
        first_parent = parents[new][first]
        bad[new[parents[new] != first_parent[inv]]] = True
        hit = np.flatnonzero(bad)
        return (int(hit[0]) if hit.size else -1), uniq, first_parent

    def add(self, ids: np.ndarray, parents: np.ndarray) -> None:
        """Record the ids of a batch that keeps the chain rule."""
        at, uniq, first_parent = self._check(ids, parents)
        if at >= 0:
            raise ValueError(f"id {int(ids[at])} breaks the chain rule")
        self._insert(uniq, first_parent)

    def admit(self, ids: np.ndarray, starts: np.ndarray) -> list[tuple[int, int, int, int]]:
        """Admit a batch of requests in file order (``starts``: each request's first index in
        ``ids``); record the ids of every request that keeps the chain rule.

        -> one ``(request, id, parent here, parent recorded)`` per refused request, in order.
        """
        refused: list[tuple[int, int, int, int]] = []
        parents = _parents_of(ids, starts)
        if self._admit_dense(ids, parents):
            return refused
        lo = 0  # first request not yet decided
        while lo < starts.size:
            a = int(starts[lo])
            at, uniq, first_parent = self._check(ids[a:], parents[a:])
            if at < 0:
                self._insert(uniq, first_parent)
                break
            at += a
            r = int(np.searchsorted(starts, at, side="right")) - 1
            b = int(starts[r])
            self.add(ids[a:b], parents[a:b])
            recorded = self._recorded(ids, parents, b, at)
            refused.append((r, int(ids[at]), int(parents[at]), recorded))
            lo = r + 1
        return refused

    def _recorded(self, ids: np.ndarray, parents: np.ndarray, b: int, at: int) -> int:
        """The parent ``ids[at]`` had before (in the table, or earlier in its own request)."""
        known, recorded = self._lookup(ids[at : at + 1])
        if known[0]:
            return int(recorded[0])
        earlier = np.flatnonzero(ids[b:at] == ids[at])
        return int(parents[b + earlier[0]])
