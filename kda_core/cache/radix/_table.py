"""The state table: one numpy row per checkpoint, kept only by a cache built with a ``victim``
hook (Marconi's FLOP-aware eviction), so LRU users never pay for it. A row's version changes
whenever its length, ancestor or bytes change (a policy may cache values derived from it)."""

from __future__ import annotations

import numpy as np

from kda_core.cache.radix._node import Node
from kda_core.cache.radix.views import StateRows

_COLUMNS = StateRows._fields[:-2]
"""The table's numpy columns, named as in ``StateRows``: ``live`` and ``evictable`` are bool,
the others int64."""


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class StateTable:
    """One row per checkpoint (see the module docstring): ``nodes`` and the ``_COLUMNS``
    arrays; the tree calls ``add`` / ``remove`` / ``protect`` as its states come, go and
    change, and writes ``time`` when it touches one."""

    def __init__(self, capacity: int = 64) -> None:
        self.nodes: list[Node | None] = [None] * capacity
        self.free_rows = list(range(capacity - 1, -1, -1))
        self.ver = 0
        for name in _COLUMNS:
            kind = bool if name in ("live", "evictable") else np.int64
            setattr(self, name, np.zeros(capacity, dtype=kind))

    def _grow(self) -> None:
        old = len(self.nodes)
        self.nodes.extend([None] * old)
        self.free_rows = list(range(2 * old - 1, old - 1, -1))
        for name in _COLUMNS:
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros_like(a)]))

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
        self.protect(node)
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

    def protect(self, node: Node) -> None:
        """``node``'s protection or child count changed."""
        r = node.srow
        self.evictable[r] = not node.sprot
        self.nchild[r] = len(node.children)

    def rows(self, clock: int, owner: int) -> StateRows:
        return StateRows(*(_readonly(getattr(self, n)) for n in _COLUMNS), clock, owner)
