"""``check_integrity`` of a radix cache: every invariant listed in docs/radix.md, verified.

A slow full walk (tests, the simulator's ``check_integrity`` option); it changes nothing.
"""

from __future__ import annotations

from kda_core.cache.radix.nodes import _NO_CHILDREN, IntegrityError, Node


def _fail(msg: str) -> None:
    raise IntegrityError(f"radix integrity: {msg}")


class _Totals:
    """Sizes recounted by the walk, compared with the cache's running counters."""

    __slots__ = ("nodes", "kv_tokens", "kv_prot", "n_states", "s_bytes", "n_sprot", "sprot_bytes")

    def __init__(self) -> None:
        self.nodes = self.kv_tokens = self.kv_prot = 0
        self.n_states = self.s_bytes = self.n_sprot = self.sprot_bytes = 0


class _IntegrityMixin:
    """check_integrity part of ``RadixStateCache``."""

    def check_integrity(self) -> None:
        """Verify every invariant (docs/radix.md); raise ``IntegrityError``."""
        root = self.root
        if _NO_CHILDREN:
            _fail("the shared empty children dict of leaves was written to")
        if root.has_state or root.key or root.id in self._slru:
            _fail("root holds a state, a key or sits in the state LRU")
        tot = _Totals()
        leaves: set[int] = set()
        state_ids: set[int] = set()
        stack = [root]
        while stack:
            nd = stack.pop()
            self._check_links(nd, stack)
            if nd is root:
                continue
            self._check_node_sizes(nd, tot)
            if not nd.children:
                leaves.add(nd.id)
            if nd.has_state:
                state_ids.add(nd.id)
        self._check_totals(tot)
        self._check_orders(tot, leaves, state_ids)

    def _check_links(self, nd: Node, stack: list[Node]) -> None:
        """Parent/child links, page-aligned edges, filing key, plen; pushes the children."""
        if not nd.alive or nd.owner != self._owner:
            _fail(f"dead or foreign node {nd.id} reachable")
        csum = 0
        for ck, c in nd.children.items():
            if c.parent is not nd:
                _fail(f"node {c.id}: parent link does not point to {nd.id}")
            if not c.key or len(c.key) % self._epp:
                _fail(f"node {c.id}: edge length {len(c.key)} not a whole number of pages")
            if self._ck(c.key, 0) != ck:
                _fail(f"node {c.id}: filed under {ck!r}, edge starts {self._ck(c.key, 0)!r}")
            if c.plen != nd.plen + len(c.key):
                _fail(f"node {c.id}: plen {c.plen} != parent {nd.plen} + edge {len(c.key)}")
            csum += c.kv_lock
            stack.append(c)
        if nd is not self.root and nd.kv_lock < csum:
            _fail(f"node {nd.id}: kv_lock {nd.kv_lock} < children's {csum}")

    def _check_node_sizes(self, nd: Node, tot: _Totals) -> None:
        """Locks, sizes and protection of one non-root node (adds it to ``tot``)."""
        tot.nodes += 1
        if nd.state_lock < 0 or nd.kv_lock < nd.state_lock:
            _fail(f"node {nd.id}: locks kv={nd.kv_lock} state={nd.state_lock}")
        if nd.state_lock > 0 and not nd.has_state:
            _fail(f"node {nd.id}: state-locked tombstone")
        ntok = len(nd.key) * self._tpe
        tot.kv_tokens += ntok
        if nd.kv_lock > 0:
            tot.kv_prot += ntok
        if not nd.has_state:
            if nd.srow != -1 or nd.sprot:
                _fail(f"tombstone {nd.id} keeps a state row or protection")
            return
        tot.n_states += 1
        tot.s_bytes += nd.state_bytes
        prot = self._sprot_of(nd)
        if prot != nd.sprot:
            _fail(f"node {nd.id}: cached protection {nd.sprot} != {prot}")
        if prot:
            tot.n_sprot += 1
            tot.sprot_bytes += nd.state_bytes
        if self._table_on:
            self._check_table_row(nd, prot)

    def _check_table_row(self, nd: Node, prot: bool) -> None:
        r = nd.srow
        if r < 0 or self._st_node[r] is not nd or not self._st_live[r]:
            _fail(f"node {nd.id}: state table row {r} inconsistent")
        exp = (
            nd.plen * self._tpe,
            self._nearest_state_anc_tokens(nd),
            nd.state_bytes,
            nd.state_time,
            len(nd.children),
            not prot,
        )
        got = (
            int(self._st_len[r]),
            int(self._st_anc[r]),
            int(self._st_bytes[r]),
            int(self._st_time[r]),
            int(self._st_nchild[r]),
            bool(self._st_evictable[r]),
        )
        if exp != got:
            _fail(f"node {nd.id}: state table row {got} != expected {exp}")

    def _check_totals(self, tot: _Totals) -> None:
        if tot.nodes != self._n_nodes:
            _fail(f"node count {self._n_nodes} != {tot.nodes}")
        got_kv = (self._kv_tokens, self._kv_protected)
        if (tot.kv_tokens, tot.kv_prot) != got_kv:
            _fail(f"kv sizes {got_kv} != {(tot.kv_tokens, tot.kv_prot)}")
        got_s = (self._n_states, self._state_bytes, self._n_sprot, self._sprot_bytes)
        exp_s = (tot.n_states, tot.s_bytes, tot.n_sprot, tot.sprot_bytes)
        if got_s != exp_s:
            _fail(f"state sizes {got_s} != {exp_s}")
        st = self.stats()
        if st.kv_evictable + st.kv_protected != st.kv_tokens:
            _fail("kv evictable + protected != total")
        if st.state_bytes_evictable + st.state_bytes_protected != st.state_bytes:
            _fail("state evictable + protected != total")

    def _check_orders(self, tot: _Totals, leaves: set[int], state_ids: set[int]) -> None:
        """State LRU, state table, live index and KV leaf heap agree with the tree."""
        if set(self._slru) != state_ids:
            _fail("state LRU does not hold exactly the state nodes")
        times = [nd.state_time for nd in self._slru.values()]
        if any(a >= b for a, b in zip(times, times[1:])):
            _fail("state LRU not ordered by access time")
        if self._table_on and int(self._st_live.sum()) != tot.n_states:
            _fail("state table live rows != number of states")
        live_ids = {nd.id for nd, _ in self._walk() if nd is not self.root}
        if set(self._live) != live_ids:
            _fail("live-node index does not hold exactly the tree's nodes")
        current = set()
        for t, _, nid in self._heap:
            nd = self._live.get(nid)
            if nd is not None and not nd.children and nd.kv_time == t:
                current.add(nid)
        if current != leaves:
            _fail(f"KV leaf heap misses leaves {sorted(leaves - current)[:5]}")
        if self._clock < max([0] + times):
            _fail("clock behind a state access time")
