"""The radix cache's semantics on prefix ids: the fast pass's tree.

``RadixStateCache`` (the naive twin) keeps a compressed tree of node objects keyed by block-id
tuples. On a chained trace (``_pidtrace``) every id names its prefix, so the same tree is a set
of flags over the static trie, one slot per prefix id (pid):

* ``kvp[p]``: the block's KV is held. The held set is prefix-closed, so a row's match is the
  count of its leading held pids (a binary search); pids increase along a row, so a run of new
  blocks is a run of consecutive pids, marked with one slice;
* ``isnode[p]``: a tree node ends at ``p`` (the twin splits edges at checkpoint positions and
  where an insert leaves the tree; nodes never merge); ``hasst[p]``: it holds a state (else it
  is a tombstone); ``nch[p]``: its child count (a leaf has none); ``par[p]``: its parent node;
* ``endof[f]``: for the first pid ``f`` of an edge, the node the edge ends at (how a split finds
  the node below it). An edge's pids are read back from ``flat`` at its node's ``loc``.

The two LRU orders are the twin's: states in an ``OrderedDict`` (touched as the twin touches
them: the restore node on a match, or the path's holders in the path modes), KV leaves in a lazy
heap keyed by an access tick in the twin's ``kv_time`` order (kept only when KV can be evicted:
``track_kv``). One lock at a time, as the sequential schedule holds it: the matched path's KV
(``locked``), which protects that node's state while it is a leaf, and its KV. Each method names
the twin code it mirrors; tests/test_sim_fast.py checks every series and counter against it.
"""

from __future__ import annotations

import heapq
from array import array
from collections import OrderedDict

import numpy as np

from kda_core.sim._pidtrace import PreparedTrace

ROOT = -1


def _zeros(code: str, n: int) -> array:
    a = array(code)
    a.frombytes(bytes(a.itemsize * n))
    return a


def _ints(a: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(a, dtype=np.int32)).cast("B").cast("i")


class FastTree:
    """The pid-space tree (module docstring). Sizes in blocks; the caller converts."""

    __slots__ = (
        "flat",
        "loc",
        "dep",
        "kvp",
        "isnode",
        "hasst",
        "nch",
        "par",
        "endof",
        "kvt",
        "tick",
        "heap",
        "hseq",
        "slru",
        "path_touch",
        "tail_first",
        "root_nch",
        "locked",
        "n_nodes",
        "n_held",
        "n_states",
        "c",
    )

    def __init__(self, prep: PreparedTrace, track_kv: bool, state_touch: str) -> None:
        n = prep.n_pids
        self.flat, self.loc, self.dep = _ints(prep.flat), _ints(prep.loc), _ints(prep.dep)
        self.kvp, self.isnode, self.hasst = bytearray(n), bytearray(n), bytearray(n)
        self.nch, self.par, self.endof = _zeros("i", n), _zeros("i", n), _zeros("i", n)
        self.kvt = _zeros("q", n) if track_kv else None
        self.tick = self.hseq = self.root_nch = 0
        self.heap: list[tuple[int, int, int]] = []
        self.slru: OrderedDict[int, None] = OrderedDict()
        self.path_touch = state_touch != "node"
        self.tail_first = state_touch == "path_tail_first"
        self.locked = ROOT
        self.n_nodes = self.n_held = self.n_states = 0
        names = ("matches", "state_hits", "token_hits", "states_inserted", "states_existed")
        more = ("evicted_states", "evicted_kv_blocks", "tombstoned", "splits")
        self.c = dict.fromkeys(names + more, 0)

    # ------------------------------------------------------------------ helpers
    def _held_prefix(self, row: memoryview, hi: int) -> int:
        """Leading held pids of ``row[:hi]``."""
        kvp = self.kvp
        lo = 0
        while lo < hi:
            mid = (lo + hi) >> 1
            if kvp[row[mid]]:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _mark(self, seq: memoryview, a: int, b: int, v: int) -> None:
        """Set ``kvp`` of the pids ``seq[a:b]`` to ``v`` (one slice when they are a run)."""
        lo, hi = seq[a], seq[b - 1]
        if hi - lo == b - 1 - a:  # pids strictly increase along a row: a run
            self.kvp[lo : hi + 1] = bytes(b - a) if not v else b"\x01" * (b - a)
        else:
            kvp = self.kvp
            for k in range(a, b):
                kvp[seq[k]] = v

    def _push(self, p: int) -> None:
        """Index leaf ``p`` in the KV heap at its current tick (``RadixTree.push_leaf``)."""
        self.hseq += 1
        heapq.heappush(self.heap, (self.kvt[p], self.hseq, p))  # type: ignore[index]

    def _path(self, node: int) -> list[int]:
        """The nodes from ``node`` up to the root's child (deepest first)."""
        par = self.par
        out = []
        while node != ROOT:
            out.append(node)
            node = par[node]
        return out

    def _refresh(self, node: int) -> None:
        """One tick per node of the path to ``node``, root-first (as ``RadixTree.touch_kv``)."""
        kvt, t = self.kvt, self.tick
        assert kvt is not None
        for p in reversed(self._path(node)):
            t += 1
            kvt[p] = t
        self.tick = t
        if not self.nch[node]:
            self._push(node)

    def _touch_path(self, node: int) -> None:
        """``RadixTree.touch_states`` over ``node``'s path: holders root-first (tail-first in
        that mode)."""
        hasst = self.hasst
        holders = [p for p in self._path(node) if hasst[p]]
        if not self.tail_first:
            holders.reverse()
        to_end = self.slru.move_to_end
        for p in holders:
            to_end(p)

    def _remove_leaf(self, v: int) -> int:
        """Delete leaf ``v`` and its edge (``RadixTree.remove_leaf``; the caller dropped its
        state) -> its parent node (ROOT or a pid); a parent left childless is pushed."""
        p = self.par[v]
        n = self.dep[v] - (self.dep[p] if p != ROOT else 0)
        top = self.loc[v]
        self._mark(self.flat, top - n + 1, top + 1, 0)
        self.isnode[v] = 0
        self.n_nodes -= 1
        self.n_held -= n
        self.c["evicted_kv_blocks"] += n
        if p == ROOT:
            self.root_nch -= 1
        else:
            self.nch[p] -= 1
        return p

    # ------------------------------------------------------------------ match
    def match(self, row: memoryview) -> tuple[int, int, int]:
        """``RadixTree.match`` (touch, no split) -> (token match, restore point, deepest node
        of the match or ROOT), in blocks."""
        tm = self._held_prefix(row, len(row))
        isnode, hasst, par = self.isnode, self.hasst, self.par
        k = tm - 1
        while k >= 0 and not isnode[row[k]]:
            k -= 1
        last = best = row[k] if k >= 0 else ROOT
        while best != ROOT and not hasst[best]:
            best = par[best]
        c = self.c
        c["matches"] += 1
        c["token_hits"] += tm > 0
        if best == ROOT:
            return tm, 0, last
        c["state_hits"] += 1
        if self.kvt is not None:
            self._refresh(best)
        if self.path_touch:
            self._touch_path(best)
        else:
            self.slru.move_to_end(best)
        return tm, self.dep[best], last

    # ------------------------------------------------------------------ eviction
    def evict_states(self, num: int) -> int:
        """Free ``num`` LRU states (``_evict_lru_plain``), the locked leaf skipped: an internal
        node becomes a tombstone, a leaf goes with its edge -> states freed."""
        slru, nch, hasst, locked = self.slru, self.nch, self.hasst, self.locked
        freed = 0
        leaves: list[int] = []
        while freed < num:
            v = ROOT
            for p in slru:
                if p != locked or nch[p]:
                    v = p
                    break
            if v == ROOT:
                break
            del slru[v]
            hasst[v] = 0
            freed += 1
            if nch[v]:
                self.c["tombstoned"] += 1
                continue
            parent = self._remove_leaf(v)
            if parent != ROOT and not nch[parent]:
                leaves.append(parent)
        self.n_states -= freed
        self.c["evicted_states"] += freed
        if self.kvt is not None:
            for p in leaves:  # parents left childless enter the KV heap (once, at the end)
                if self.isnode[p] and not nch[p]:
                    self._push(p)
        return freed

    def evict_kv(self, num_blocks: int) -> tuple[int, int]:
        """Free LRU unlocked leaves until ``num_blocks`` blocks are freed (``evict_kv``) ->
        (states freed with them, blocks freed)."""
        kvt, heap, isnode, nch = self.kvt, self.heap, self.isnode, self.nch
        assert kvt is not None, "KV eviction needs track_kv"
        states = 0
        held0 = self.n_held
        skipped = []
        while held0 - self.n_held < num_blocks and heap:
            entry = heapq.heappop(heap)
            t, _, p = entry
            if not isnode[p] or nch[p] or kvt[p] != t:
                continue  # stale
            if p == self.locked:
                skipped.append(entry)
                continue
            if self.hasst[p]:
                self.hasst[p] = 0
                del self.slru[p]
                self.n_states -= 1
                states += 1
            parent = self._remove_leaf(p)
            if parent != ROOT and not nch[parent]:
                self._push(parent)
        for entry in skipped:
            heapq.heappush(heap, entry)
        self.c["evicted_states"] += states
        return states, held0 - self.n_held

    # ------------------------------------------------------------------ insert
    def insert(self, row: memoryview, pos: tuple, hint: int) -> int:
        """``insert_prefix`` of ``row`` with states at ``pos`` (blocks, ascending; the key is cut
        at the deepest) -> states new. Splits where a position falls inside an edge and where
        the row leaves the tree, keeps or revives states on existing nodes, hangs the rest as a
        chain, refreshes the path (``_insert.insert``: ``_walk``, its revive loop, ``_chain``,
        ``RadixTree.touch_kv``). ``hint``: a guess of the row's held prefix (the match), checked."""
        end = pos[-1]
        kvp = self.kvp
        m = hint if hint < end else end
        if (m and not kvp[row[m - 1]]) or (m < end and kvp[row[m]]):
            m = self._held_prefix(row, end)
        reach = m if m < end else end
        isnode = self.isnode
        for d in pos:
            if d > m:
                break
            if not isnode[row[d - 1]]:
                self._split(row, d, d == reach)
        if 0 < m < end and not isnode[row[m - 1]]:
            self._split(row, m, True)
        new = self._existing(row, pos, m)
        if m < end:
            new += self._chain(row, [q for q in pos if q > m], m)
        self.c["states_inserted"] += new
        tail = row[end - 1]
        if self.kvt is not None:
            self._refresh(tail)
            if len(self.heap) > 4 * self.n_nodes + 1024:
                self._rebuild_heap()
        if self.path_touch:
            self._touch_path(tail)
        return new

    def _split(self, row: memoryview, d: int, at_reach: bool) -> None:
        """Cut the edge holding ``row[d - 1]`` below it (``RadixTree.split``): the upper part
        ends at a new tombstone; the lower part keeps its node. At the walk's last cut the lower
        node stays off the refreshed path with the split's tick."""
        isnode, endof, par = self.isnode, self.endof, self.par
        j = d - 2
        while j >= 0 and not isnode[row[j]]:
            j -= 1
        f, x = row[j + 1], row[d - 1]
        b = endof[f]
        endof[self.flat[self.loc[b] - self.dep[b] + d + 1]] = b  # the lower edge's first pid
        endof[f] = x
        par[x] = par[b]
        par[b] = x
        isnode[x] = 1
        self.nch[x] = 1
        self.n_nodes += 1
        self.c["splits"] += 1
        if at_reach and self.kvt is not None:
            self.tick += 1
            self.kvt[b] = self.tick
            if not self.nch[b]:
                self._push(b)

    def _existing(self, row: memoryview, pos: list[int], m: int) -> int:
        """States at positions on existing nodes, root-first: kept (touched in node mode) or
        revived on a tombstone (``_insert.insert``'s revive loop) -> revived."""
        hasst, slru = self.hasst, self.slru
        new = 0
        for q in pos:
            if q > m:
                break
            x = row[q - 1]
            if hasst[x]:
                self.c["states_existed"] += 1
                if not self.path_touch:
                    slru.move_to_end(x)
            else:
                hasst[x] = 1
                slru[x] = None
                new += 1
        self.n_states += new
        return new

    def _chain(self, row: memoryview, chain: list[int], m: int) -> int:
        """New nodes below depth ``m``, one per position, each with its state (``_chain``)."""
        isnode, hasst, nch, endof, par, slru = (
            self.isnode,
            self.hasst,
            self.nch,
            self.endof,
            self.par,
            self.slru,
        )
        self._mark(row, m, chain[-1], 1)
        parent = row[m - 1] if m else ROOT
        prev = m
        for q in chain:
            x = row[q - 1]
            endof[row[prev]] = x
            par[x] = parent
            isnode[x] = 1
            hasst[x] = 1
            nch[x] = 1
            slru[x] = None
            parent = x
            prev = q
        nch[parent] = 0
        if m:
            nch[row[m - 1]] += 1
        else:
            self.root_nch += 1
        n = len(chain)
        self.n_held += prev - m
        self.n_nodes += n
        self.n_states += n
        return n

    def _rebuild_heap(self) -> None:
        """A fresh heap of the current leaves (stale entries pile up as leaves are touched)."""
        nodes = np.flatnonzero(np.frombuffer(self.isnode, dtype=np.uint8))
        nch = np.frombuffer(self.nch, dtype=np.int32)
        kvt = self.kvt
        assert kvt is not None
        heap = []
        for p in nodes[nch[nodes] == 0].tolist():
            self.hseq += 1
            heap.append((kvt[p], self.hseq, p))
        heapq.heapify(heap)
        self.heap = heap
