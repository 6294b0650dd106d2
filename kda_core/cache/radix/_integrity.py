"""``check(tree)``: every invariant of docs/radix.md, verified by a full walk.

Slow (tests, the simulator's ``check_integrity`` option); it changes nothing and raises
``IntegrityError`` naming the first broken invariant.
"""

from __future__ import annotations

from kda_core.cache.radix._node import NO_CHILDREN, Node
from kda_core.cache.radix._tree import RadixTree
from kda_core.cache.radix.views import IntegrityError


def _fail(msg: str) -> None:
    raise IntegrityError(f"radix integrity: {msg}")


class _Totals:
    """Sizes recounted by the walk, compared with the tree's running counters."""

    __slots__ = ("nodes", "kv_tokens", "kv_prot", "n_states", "s_bytes", "n_sprot", "sprot_bytes")

    def __init__(self) -> None:
        self.nodes = self.kv_tokens = self.kv_prot = 0
        self.n_states = self.s_bytes = self.n_sprot = self.sprot_bytes = 0


def check(tree: RadixTree) -> None:
    """Verify every invariant (docs/radix.md); raise ``IntegrityError``."""
    root = tree.root
    if NO_CHILDREN:
        _fail("the shared empty children dict of leaves was written to")
    if root.has_state or root.key or root.id in tree.slru:
        _fail("root holds a state, a key or sits in the state LRU")
    tot = _Totals()
    leaves: set[int] = set()
    state_ids: set[int] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        nd = stack.pop()
        _check_links(tree, nd, stack)
        if nd is root:
            continue
        seen.add(nd.id)
        _check_node(tree, nd, tot)
        if not nd.children:
            leaves.add(nd.id)
        if nd.has_state:
            state_ids.add(nd.id)
    _check_totals(tree, tot)
    _check_orders(tree, tot, leaves, state_ids, seen)


def _check_links(tree: RadixTree, nd: Node, stack: list[Node]) -> None:
    """Parent/child links, page-aligned edges, filing key, plen; pushes the children."""
    if not nd.alive or nd.owner != tree.owner:
        _fail(f"dead or foreign node {nd.id} reachable")
    csum = 0
    for ck, c in nd.children.items():
        if c.parent is not nd:
            _fail(f"node {c.id}: parent link does not point to {nd.id}")
        if not c.key or len(c.key) % tree.epp:
            _fail(f"node {c.id}: edge length {len(c.key)} not a whole number of pages")
        if tree.first(c.key, 0) != ck:
            _fail(f"node {c.id}: filed under {ck!r}, edge starts {tree.first(c.key, 0)!r}")
        if c.plen != nd.plen + len(c.key):
            _fail(f"node {c.id}: plen {c.plen} != parent {nd.plen} + edge {len(c.key)}")
        csum += c.kv_lock
        stack.append(c)
    if nd is not tree.root and nd.kv_lock < csum:
        _fail(f"node {nd.id}: kv_lock {nd.kv_lock} < children's {csum}")


def _check_node(tree: RadixTree, nd: Node, tot: _Totals) -> None:
    """Locks, sizes and protection of one non-root node (adds it to ``tot``)."""
    tot.nodes += 1
    if nd.state_lock < 0 or nd.kv_lock < nd.state_lock:
        _fail(f"node {nd.id}: locks kv={nd.kv_lock} state={nd.state_lock}")
    if nd.state_lock > 0 and not nd.has_state:
        _fail(f"node {nd.id}: state-locked tombstone")
    ntok = len(nd.key) * tree.tpe
    tot.kv_tokens += ntok
    if nd.kv_lock > 0:
        tot.kv_prot += ntok
    if not nd.has_state:
        if nd.srow != -1 or nd.sprot:
            _fail(f"tombstone {nd.id} keeps a state row or protection")
        return
    tot.n_states += 1
    tot.s_bytes += nd.state_bytes
    prot = nd.state_lock > 0 or (not nd.children and nd.kv_lock > 0)
    if prot != nd.sprot:
        _fail(f"node {nd.id}: cached protection {nd.sprot} != {prot}")
    if prot:
        tot.n_sprot += 1
        tot.sprot_bytes += nd.state_bytes
    t = tree.table
    if t is None:
        return
    if nd.srow < 0 or t.nodes[nd.srow] is not nd or not t.live[nd.srow]:
        _fail(f"node {nd.id}: state table row {nd.srow} inconsistent")
    anc = tree.ancestor_tokens(nd)
    exp = (nd.plen * tree.tpe, anc, nd.state_bytes, nd.state_time, len(nd.children), not prot)
    if t.row(nd) != exp:
        _fail(f"node {nd.id}: state table row {t.row(nd)} != expected {exp}")


def _check_totals(tree: RadixTree, tot: _Totals) -> None:
    if tot.nodes != tree.n_nodes:
        _fail(f"node count {tree.n_nodes} != {tot.nodes}")
    got_kv = (tree.kv_tokens, tree.kv_protected)
    if (tot.kv_tokens, tot.kv_prot) != got_kv:
        _fail(f"kv sizes {got_kv} != {(tot.kv_tokens, tot.kv_prot)}")
    got_s = (tree.n_states, tree.state_bytes, tree.n_sprot, tree.sprot_bytes)
    exp_s = (tot.n_states, tot.s_bytes, tot.n_sprot, tot.sprot_bytes)
    if got_s != exp_s:
        _fail(f"state sizes {got_s} != {exp_s}")


def _check_orders(
    tree: RadixTree, tot: _Totals, leaves: set[int], state_ids: set[int], seen: set[int]
) -> None:
    """State LRU, state table, live index and KV leaf heap agree with the tree."""
    if set(tree.slru) != state_ids:
        _fail("state LRU does not hold exactly the state nodes")
    times = [nd.state_time for nd in tree.slru.values()]
    if any(a >= b for a, b in zip(times, times[1:])):
        _fail("state LRU not ordered by access time")
    if tree.table is not None and int(tree.table.live.sum()) != tot.n_states:
        _fail("state table live rows != number of states")
    if set(tree.live) != seen:
        _fail("live-node index does not hold exactly the tree's nodes")
    current = set()
    for t, _, nid in tree.heap:
        nd = tree.live.get(nid)
        if nd is not None and not nd.children and nd.kv_time == t:
            current.add(nid)
    if current != leaves:
        _fail(f"KV leaf heap misses leaves {sorted(leaves - current)[:5]}")
    if tree.clock < max([0] + times):
        _fail("clock behind a state access time")
