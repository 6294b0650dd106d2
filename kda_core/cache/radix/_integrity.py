"""``check(tree)``: every invariant of docs/radix.md, verified by a full walk (slow: tests, the
simulator's ``check_integrity`` option); it changes nothing and raises ``IntegrityError``
naming the first broken invariant."""

from __future__ import annotations

from kda_core.cache.radix._node import NO_CHILDREN, IntegrityError, Node
from kda_core.cache.radix._tree import RadixTree


def _fail(msg: str) -> None:
    raise IntegrityError(f"radix integrity: {msg}")


def check(tree: RadixTree) -> None:
    root = tree.root
    if NO_CHILDREN:
        _fail("the shared empty children dict of leaves was written to")
    if root.has_state or root.key or root.kv is not None:
        _fail("root holds a state, a key or KV")  # the state LRU check below keeps it out of that
    nodes: dict[int, Node] = {}
    stack = [root]
    while stack:  # each node is checked once, from its parent
        nd = stack.pop()
        for ck, c in nd.children.items():
            if c.parent is not nd:
                _fail(f"node {c.id}: parent link does not point to {nd.id}")
            if not c.key or len(c.key) % tree.epp:
                _fail(f"node {c.id}: edge length {len(c.key)} not a whole number of pages")
            if tree.first(c.key, 0) != ck:
                _fail(f"node {c.id}: filed under {ck!r}, edge starts {tree.first(c.key, 0)!r}")
            if c.plen != nd.plen + len(c.key):
                _fail(f"node {c.id}: plen {c.plen} != parent {nd.plen} + edge {len(c.key)}")
            _check_node(tree, c)
            nodes[c.id] = c
            stack.append(c)
    tpe = tree.tpe
    states = [nd for nd in nodes.values() if nd.has_state]
    sprot = [nd for nd in states if nd.sprot]
    kv_sizes = (tree.kv_tokens, tree.kv_protected)
    exp = (
        tpe * sum(len(nd.key) for nd in nodes.values()),
        tpe * sum(len(nd.key) for nd in nodes.values() if nd.kv_lock > 0),
    )
    if kv_sizes != exp:
        _fail(f"kv sizes {kv_sizes} != {exp}")
    state_sizes = (tree.state_bytes, tree.n_sprot, tree.sprot_bytes)
    exp = (sum(nd.state_bytes for nd in states), len(sprot), sum(nd.state_bytes for nd in sprot))
    if state_sizes != exp:
        _fail(f"state sizes {state_sizes} != {exp}")
    # the state LRU, the state table, the live index and the KV leaf heap agree with the tree
    if set(tree.slru) != {nd.id for nd in states}:
        _fail("state LRU does not hold exactly the state nodes")
    times = [nd.state_time for nd in tree.slru.values()]
    if any(a >= b for a, b in zip(times, times[1:])):
        _fail("state LRU not ordered by access time")
    if times and tree.clock < times[-1]:
        _fail("clock behind a state access time")
    if tree.table is not None and int(tree.table.live.sum()) != len(states):
        _fail("state table live rows != number of states")
    if tree.live != nodes:
        _fail("live-node index does not hold exactly the tree's nodes")
    leaves = {i for i, nd in nodes.items() if not nd.children}
    current = {i for t, i in tree.heap if i in leaves and nodes[i].kv_time == t}
    if current != leaves:
        _fail(f"KV leaf heap misses leaves {sorted(leaves - current)[:5]}")


def _check_node(tree: RadixTree, nd: Node) -> None:
    """Locks, protection and state table row of one non-root node."""
    csum = sum(c.kv_lock for c in nd.children.values())
    if nd.kv_lock < csum:
        _fail(f"node {nd.id}: kv_lock {nd.kv_lock} < children's {csum}")
    if nd.state_lock < 0 or nd.kv_lock < nd.state_lock:
        _fail(f"node {nd.id}: locks kv={nd.kv_lock} state={nd.state_lock}")
    if not nd.has_state:
        if nd.state_lock > 0 or nd.srow != -1 or nd.sprot:
            _fail(f"tombstone {nd.id} keeps a state lock, row or protection")
        return
    prot = nd.state_lock > 0 or (not nd.children and nd.kv_lock > 0)
    if prot != nd.sprot:
        _fail(f"node {nd.id}: cached protection {nd.sprot} != {prot}")
    t, r = tree.table, nd.srow
    if t is None:
        return
    if r < 0 or t.node_id[r] != nd.id or not t.live[r]:
        _fail(f"node {nd.id}: state table row {r} inconsistent")
    row = tuple(getattr(t, c)[r].item() for c in ("length", "anc_length", "nbytes", "time"))
    row += (t.nchild[r].item(), t.evictable[r].item())
    anc = tree.ancestor_tokens(nd)
    exp = (nd.plen * tree.tpe, anc, nd.state_bytes, nd.state_time, len(nd.children), not prot)
    if row != exp:
        _fail(f"node {nd.id}: state table row {row} != expected {exp}")
