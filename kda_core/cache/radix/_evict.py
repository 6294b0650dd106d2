"""Radix eviction. ``evict_states``: an internal node's state is dropped (a tombstone), a leaf
goes with its KV (its parent stays as a leaf: SGLang), in state-LRU order or the ``victim``
hook's (Marconi); a cache with no state hook and no table takes a fast loop
(``RadixTree.plain``; tests/test_radix_fastpaths.py checks it against the general one).
``evict_kv``: LRU unlocked leaves through the lazy leaf heap."""

from __future__ import annotations

import heapq

from kda_core.cache.protocol import Evicted
from kda_core.cache.radix._node import Node
from kda_core.cache.radix._tree import Freed, RadixTree


def evict_node(tree: RadixTree, node: Node, acc: Freed) -> None:
    """Evict ``node``'s (unprotected) state: internal -> tombstone, leaf -> deleted."""
    assert node.has_state and not node.sprot, "an unprotected state"
    if node.children:
        tree.detach_state(node, acc)
        acc.tombstoned += 1
        tree.counts["tombstoned"] += 1
    else:
        tree.remove_leaf(node, acc)
    tree.clock += 1


def _check_victim(tree: RadixTree) -> Node | None:
    """The node the ``victim`` hook picks (None: nothing to evict)."""
    assert tree.victim is not None and tree.table is not None
    row = tree.victim(tree.table.rows(tree.clock, tree.owner))
    if row is None or row < 0:
        return None
    node = tree.table.nodes[int(row)]
    if node is None or node.sprot:
        raise ValueError(f"victim chose row {row}, which holds no evictable state")
    return node


def evict_states(tree: RadixTree, num: int, nbytes: int) -> Evicted:
    """Evict states until ``num`` states and ``nbytes`` bytes are freed (or none is left)."""
    acc = Freed()
    if tree.plain:
        _evict_lru_plain(tree, num, nbytes, acc)
        return acc.result()
    slru = tree.slru
    while acc.states < num or acc.state_bytes < nbytes:
        if tree.victim is not None:
            victim = _check_victim(tree)
        else:  # the least recently used unprotected state
            victim = next((nd for nd in slru.values() if not nd.sprot), None)
        if victim is None:
            break
        evict_node(tree, victim, acc)
    return acc.result()


def evict_kv(tree: RadixTree, num_tokens: int) -> Evicted:
    """Evict LRU unlocked leaves (KV and state) until ``num_tokens`` tokens of KV are freed
    or nothing is evictable."""
    acc = Freed()
    skipped = []
    heap, live = tree.heap, tree.live
    while acc.kv_tokens < num_tokens and heap:
        entry = heapq.heappop(heap)
        t, _, nid = entry
        nd = live.get(nid)
        if nd is None or nd.children or nd.kv_time != t:
            continue  # stale: the node is gone, no longer a leaf, or touched since
        if nd.kv_lock > 0:
            skipped.append(entry)
            continue
        tree.remove_leaf(nd, acc)
        tree.clock += 1
    for entry in skipped:
        heapq.heappush(heap, entry)
    return acc.result()


def _evict_lru_plain(tree: RadixTree, num: int, nbytes: int, acc: Freed) -> None:
    """``evict_states``'s LRU loop for a plain tree, ``detach_state`` and ``remove_leaf``
    inlined and the counters kept in locals (the simulator evicts up to 262,000 states per
    pass)."""
    slru, live, root, tpe, epp = tree.slru, tree.live, tree.root, tree.tpe, tree.epp
    free_kv = tree.on_free_kv
    states = sbytes = kv_tok = nodes = tomb = 0
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
        nodes += 1
        k = victim.key
        del parent.children[k[0] if epp == 1 else k[:epp]]
        payload = victim.kv
        victim.alive, victim.parent, victim.kv = False, None, None
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
        if nd.alive and not nd.children:
            tree.push_leaf(nd)
    tree.n_states -= states
    tree.state_bytes -= sbytes
    tree.kv_tokens -= kv_tok
    tree.n_nodes -= nodes
    c = tree.counts
    c["evicted_states"] += states
    c["evicted_state_bytes"] += sbytes
    c["evicted_kv_tokens"] += kv_tok
    c["tombstoned"] += tomb
    acc.states, acc.state_bytes, acc.kv_tokens = states, sbytes, kv_tok
    acc.nodes, acc.tombstoned = nodes, tomb
