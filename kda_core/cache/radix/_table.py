"""The state table: one numpy row per checkpoint, kept only by a cache built with a ``victim``
hook (Marconi's FLOP-aware eviction), so LRU users never pay for it. A row's version changes
whenever its length, ancestor or bytes change (a policy may cache values derived from it)."""

from __future__ import annotations

import numpy as np

from kda_core.cache.radix._node import Node
from kda_core.cache.radix.views import StateRows

_INT_COLUMNS = ("nchild", "time", "length", "anc_length", "nbytes", "version", "node_id")


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class StateTable:
    """One row per checkpoint (see the module docstring); the tree calls ``add`` / ``remove``
    / ``touch`` / ``protect`` as its states come, go and change."""

    def __init__(self, capacity: int = 64) -> None:
        self.nodes: list[Node | None] = [None] * capacity
        self.live = np.zeros(capacity, dtype=bool)
        self.evictable = np.zeros(capacity, dtype=bool)
        self.nchild = np.zeros(capacity, dtype=np.int64)
        self.time = np.zeros(capacity, dtype=np.int64)
        self.length = np.zeros(capacity, dtype=np.int64)
        self.anc_length = np.zeros(capacity, dtype=np.int64)
        self.nbytes = np.zeros(capacity, dtype=np.int64)
        self.version = np.zeros(capacity, dtype=np.int64)
        self.node_id = np.zeros(capacity, dtype=np.int64)
        self.free_rows: list[int] = list(range(capacity - 1, -1, -1))
        self.ver = 0

    def _grow(self) -> None:
        old = len(self.nodes)
        self.nodes.extend([None] * old)
        for name in ("live", "evictable", *_INT_COLUMNS):
            a = getattr(self, name)
            b = np.zeros(2 * old, dtype=a.dtype)
            b[:old] = a
            setattr(self, name, b)
        self.free_rows = list(range(2 * old - 1, old - 1, -1))

    def _bump(self, row: int) -> None:
        self.ver += 1
        self.version[row] = self.ver

    def add(self, node: Node, length: int, anc_length: int) -> None:
        """A new checkpoint at ``node`` (``length`` tokens; nearest checkpointed ancestor at
        ``anc_length``); the checkpoints below it now have it as their ancestor."""
        if not self.free_rows:
            self._grow()
        r = self.free_rows.pop()
        node.srow = r
        self.nodes[r] = node
        self.live[r] = True
        self.length[r] = length
        self.anc_length[r] = anc_length
        self.nbytes[r] = node.state_bytes
        self.time[r] = node.state_time
        self.node_id[r] = node.id
        self.evictable[r] = not node.sprot
        self.nchild[r] = len(node.children)
        self._bump(r)
        if node.children:
            self.set_region_ancestor(node, length)

    def remove(self, node: Node) -> None:
        """``node``'s checkpoint is gone: the checkpoints below it fall back to its ancestor."""
        r = node.srow
        if node.children:
            self.set_region_ancestor(node, int(self.anc_length[r]))
        self.live[r] = False
        self.evictable[r] = False
        self.nodes[r] = None
        self.free_rows.append(r)
        node.srow = -1

    def set_region_ancestor(self, node: Node, anc_length: int) -> None:
        """The nearest checkpointed ancestor of the checkpoints right below ``node``."""
        stack = list(node.children.values())
        while stack:
            c = stack.pop()
            if c.has_state:
                self.anc_length[c.srow] = anc_length
                self._bump(c.srow)
            else:
                stack.extend(c.children.values())

    def touch(self, node: Node) -> None:
        self.time[node.srow] = node.state_time

    def protect(self, node: Node) -> None:
        """``node``'s protection or child count changed."""
        r = node.srow
        self.evictable[r] = not node.sprot
        self.nchild[r] = len(node.children)

    def row(self, node: Node) -> tuple[int, int, int, int, int, bool]:
        """(length, ancestor length, bytes, time, children, evictable) of ``node``'s row."""
        r = node.srow
        return (
            int(self.length[r]),
            int(self.anc_length[r]),
            int(self.nbytes[r]),
            int(self.time[r]),
            int(self.nchild[r]),
            bool(self.evictable[r]),
        )

    def rows(self, clock: int, owner: int) -> StateRows:
        return StateRows(
            *(_readonly(getattr(self, n)) for n in ("live", "evictable", *_INT_COLUMNS)),
            clock,
            owner,
        )
