"""The numpy state table of a radix cache (per-checkpoint arrays for vectorised policies).

Built on the first ``state_table()`` call and maintained from then on, so vectorised policies
(Marconi) pay for it and LRU users do not. Rows mirror the state nodes (length, nearest
checkpointed ancestor, bytes, access time, protection, child count, a version per row).
"""

from __future__ import annotations

import numpy as np

from kda_core.cache.radix.nodes import Node, StateTable


class _StateTableMixin:
    """State-table part of ``RadixStateCache`` (uses the tree fields of ``_TreeBase``)."""

    def _init_table(self) -> None:
        cap = 64
        self._st_node: list[Node | None] = [None] * cap
        self._st_live = np.zeros(cap, dtype=bool)
        self._st_evictable = np.zeros(cap, dtype=bool)
        self._st_nchild = np.zeros(cap, dtype=np.int64)
        self._st_time = np.zeros(cap, dtype=np.int64)
        self._st_len = np.zeros(cap, dtype=np.int64)
        self._st_anc = np.zeros(cap, dtype=np.int64)
        self._st_bytes = np.zeros(cap, dtype=np.int64)
        self._st_ver = np.zeros(cap, dtype=np.int64)
        self._ver = 0
        self._st_free: list[int] = list(range(cap - 1, -1, -1))
        self._table_on = False  # maintained only once a policy asks for it

    def _nearest_state_anc_tokens(self, node: Node) -> int:
        p = node.parent
        while p is not None and not p.has_state:
            p = p.parent
        return 0 if p is None else p.plen * self._tpe

    def _set_region_anc(self, node: Node, anc_tokens: int) -> None:
        stack = list(node.children.values())
        while stack:
            c = stack.pop()
            if c.has_state:
                self._st_anc[c.srow] = anc_tokens
                self._ver += 1
                self._st_ver[c.srow] = self._ver
            else:
                stack.extend(c.children.values())

    def _alloc_row(self) -> int:
        if not self._st_free:
            old = len(self._st_node)
            new = old * 2
            self._st_node.extend([None] * old)
            for name in (
                "_st_live",
                "_st_evictable",
                "_st_nchild",
                "_st_time",
                "_st_len",
                "_st_anc",
                "_st_bytes",
                "_st_ver",
            ):
                a = getattr(self, name)
                b = np.zeros(new, dtype=a.dtype)
                b[:old] = a
                setattr(self, name, b)
            self._st_free = list(range(new - 1, old - 1, -1))
        return self._st_free.pop()

    def _table_add(self, node: Node, anc_tokens: int | None) -> None:
        r = self._st_free.pop() if self._st_free else self._alloc_row()
        node.srow = r
        self._st_node[r] = node
        self._st_live[r] = True
        ntok = node.plen * self._tpe
        self._st_len[r] = ntok
        if anc_tokens is None:
            anc_tokens = self._nearest_state_anc_tokens(node)
        self._st_anc[r] = anc_tokens
        self._st_bytes[r] = node.state_bytes
        self._ver += 1
        self._st_ver[r] = self._ver
        self._st_time[r] = node.state_time
        self._st_evictable[r] = not node.sprot
        self._st_nchild[r] = len(node.children)
        if node.children:
            self._set_region_anc(node, ntok)

    def _enable_table(self) -> None:
        """Start maintaining the numpy state table (first ``state_table`` call)."""
        if self._table_on:
            return
        self._table_on = True
        for nd in self._slru.values():  # root-first not needed: anc found by walking up
            self._table_add(nd, None)

    def state_table(self) -> StateTable:
        """Views of the per-state arrays (valid until the next mutation). The table is
        maintained from the first call on (LRU-only users never pay for it)."""
        self._enable_table()
        return StateTable(
            self._st_live,
            self._st_evictable,
            self._st_nchild,
            self._st_time,
            self._st_len,
            self._st_anc,
            self._st_bytes,
            self._st_ver,
        )

    def node_at_row(self, row: int) -> Node:
        self._enable_table()
        nd = self._st_node[int(row)]
        if nd is None:
            raise ValueError(f"row {row} holds no state")
        return nd
