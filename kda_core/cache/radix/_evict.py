"""Radix eviction: states (an internal node's becomes a tombstone, a leaf goes with its KV) in
state-LRU order or the ``victim`` hook's (Marconi), then KV (LRU unlocked leaves through the
lazy leaf heap). A cache with no state hook and no table takes a fast state loop
(``RadixTree.plain``; tests/test_radix_fastpaths.py checks it against the general one)."""

from __future__ import annotations

import heapq

from kda_core.cache.protocol import Evicted
from kda_core.cache.radix._node import Node
from kda_core.cache.radix._tree import RadixTree


def evict(tree: RadixTree, kv_tokens: int, states: int, state_bytes: int) -> Evicted:
    """``RadixStateCache.evict`` on checked arguments -> what was freed (the growth of the
    tree's counters)."""
    before = _freed(tree)
    c, slru, table = tree.counts, tree.slru, tree.table
    if tree.plain:
        if states or state_bytes:
            _evict_lru_plain(tree, states, state_bytes)
    else:
        states += c["evicted_states"]
        state_bytes += c["evicted_state_bytes"]
        while c["evicted_states"] < states or c["evicted_state_bytes"] < state_bytes:
            if table is None:  # the least recently used unprotected state
                node = next((nd for nd in slru.values() if not nd.sprot), None)
                if node is None:
                    break
            else:
                row = tree.victim(table.rows(tree.clock, tree.owner))  # type: ignore[misc]
                if row is None or row < 0:
                    break
                r = int(row)
                node = tree.live.get(int(table.node_id[r])) if table.live[r] else None
                if node is None or node.sprot:
                    raise ValueError(f"victim chose row {row}, which holds no evictable state")
            if node.children:  # internal -> tombstone, leaf -> deleted
                tree.detach_state(node)
                c["tombstoned"] += 1
            else:
                tree.remove_leaf(node)
            tree.clock += 1
    # then LRU unlocked leaves (KV and state) through the lazy leaf heap
    kv_tokens += c["evicted_kv_tokens"]
    skipped = []
    heap, live = tree.heap, tree.live
    while c["evicted_kv_tokens"] < kv_tokens and heap:
        entry = heapq.heappop(heap)
        t, nid = entry
        nd = live.get(nid)
        if nd is None or nd.children or nd.kv_time != t:
            continue  # stale: the node is gone, no longer a leaf, or touched since
        if nd.kv_lock > 0:
            skipped.append(entry)
            continue
        tree.remove_leaf(nd)
        tree.clock += 1
    for entry in skipped:
        heapq.heappush(heap, entry)
    return Evicted(*[a - b for a, b in zip(_freed(tree), before)])


def _freed(tree: RadixTree) -> tuple[int, int, int, int, int]:
    """The counters whose growth is an ``Evicted`` (nodes freed: the drop in node count)."""
    c = tree.counts
    s, sb, kv = c["evicted_states"], c["evicted_state_bytes"], c["evicted_kv_tokens"]
    return s, sb, kv, -len(tree.live), c["tombstoned"]


def _evict_lru_plain(tree: RadixTree, num: int, nbytes: int) -> None:
    """``evict``'s LRU state loop for a plain tree, ``detach_state`` and ``remove_leaf``
    inlined and the counters kept in locals (the simulator evicts up to 262,000 states per
    pass)."""
    slru, live, root, tpe, epp = tree.slru, tree.live, tree.root, tree.tpe, tree.epp
    free_kv = tree.on_free_kv
    states = sbytes = kv_tok = tomb = 0
    became_leaf: list[Node] = []
    while states < num or sbytes < nbytes:
        victim = None
        for nd in slru.values():
            if not nd.sprot:
                victim = nd
                break
        if victim is None:
            break
        # unprotected: state_lock == 0, and a leaf has kv_lock == 0 (see RadixTree.sync)
        del slru[victim.id]
        nb = victim.state_bytes
        victim.has_state, victim.state, victim.state_bytes = False, None, 0
        states += 1
        sbytes += nb
        if victim.children:
            tomb += 1
            continue
        parent = victim.parent
        assert parent is not None
        ntok = len(victim.key) * tpe
        kv_tok += ntok
        k = victim.key
        del parent.children[k[0] if epp == 1 else k[:epp]]
        payload = victim.kv
        victim.parent, victim.kv = None, None
        if free_kv is not None:
            free_kv(payload, ntok)
        del live[victim.id]
        if parent is not root and not parent.children:
            became_leaf.append(parent)
        if parent.has_state:  # sync does nothing to a tombstone
            tree.sync(parent)
    tree.clock += states  # a tick per evicted state, as the general loop
    # parents left childless enter the KV heap once, at the end: a chain evicted leaf by leaf
    # would push every parent only to remove it next (nothing pops the heap here)
    for nd in became_leaf:
        if nd.parent is not None and not nd.children:
            tree.push_leaf(nd)
    tree.state_bytes -= sbytes
    tree.kv_tokens -= kv_tok
    c = tree.counts
    c["evicted_states"] += states
    c["evicted_state_bytes"] += sbytes
    c["evicted_kv_tokens"] += kv_tok
    c["tombstoned"] += tomb
