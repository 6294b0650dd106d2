"""Radix operations on nodes: match, KV / state locks, LRU eviction (the legacy API).

These take and return tree nodes; ``kda_core.cache.radix.cache`` wraps them in the opaque
handles of the cache protocol.
"""

from __future__ import annotations

import heapq
from typing import Any

from kda_core._checks import check_int
from kda_core.cache.radix.nodes import Evicted, MatchResult, Node, _Acc, _common_prefix


class _OpsMixin:
    """match / lock / evict part of ``RadixStateCache``."""

    def match(self, key: Any, *, touch: bool = True, split: bool = False) -> MatchResult:
        """Longest token match and restore point of ``key`` (truncated to whole pages).

        With ``touch`` the KV of the path up to the restore node is refreshed and the states
        per ``state_touch``. With ``split`` a match ending inside an edge splits it (SGLang):
        the upper half becomes a tombstone and is returned as ``last_node``.
        """
        return self._match(self._check_key(key), touch, split, True)

    def _match(self, k: tuple, touch: bool, split: bool, count: bool) -> MatchResult:
        epp = self._epp
        n = len(k) - len(k) % epp
        if n != len(k):
            k = k[:n]
        node = self.root
        path: list[Node] = []
        best = self.root
        best_i = 0
        best_depth = 0
        i = 0
        mid = False
        while i < n:
            child = node.children.get(k[i] if epp == 1 else k[i : i + epp])
            if child is None:
                break
            e = child.key
            le = len(e)
            # the child was found by its first page of elements: a one-page edge matches whole
            if le == epp or k[i : i + le] == e:
                i += le
                node = child
                path.append(child)
                if child.has_state:
                    best = child
                    best_i = i
                    best_depth = len(path)
                continue
            c = _common_prefix(e, k, i, min(le, n - i))
            c -= c % epp
            if c > 0:
                mid = True
                i += c
                if split:
                    node = self._split(child, c)
                    path.append(node)
            break
        tpe = self._tpe
        token_match = i * tpe
        restore_at = best_i * tpe
        if count:
            self._c["matches"] += 1
            if restore_at:
                self._c["state_hits"] += 1
            if token_match:
                self._c["token_hits"] += 1
        if touch and best is not self.root:
            used = path[:best_depth]
            clock = self._clock
            for nd in used:  # _touch_kv inlined (up to one call per key element)
                clock += 1
                nd.kv_time = clock
                if not nd.children:
                    self._push_leaf(nd)
            self._clock = clock
            if self.state_touch == "node":
                self._touch_state(best)
            else:
                self._state_touch_path(used)
        aligned = token_match // self.grid * self.grid
        return MatchResult(
            token_match=token_match,
            restore_at=restore_at,
            node=best,
            state=best.state,
            state_bytes=best.state_bytes,
            kv=tuple(nd.kv for nd in path[:best_depth]),
            branch=aligned if aligned > restore_at else None,
            mid_edge=mid,
            last_node=node,
        )

    # ------------------------------------------------------------------ locks
    # The public lock methods check their node, then call the unchecked ``_*_node`` twins,
    # which the cache protocol's ``lock_handle`` calls directly on a validated handle.
    def lock_kv(self, node: Node) -> None:
        """Protect the KV of ``node`` and all its ancestors (no-op on the root)."""
        self._check_node(node)
        if node is not self.root:
            self._lock_kv_node(node)

    def unlock_kv(self, node: Node) -> None:
        """Release one ``lock_kv``. A tombstone leaf stays (SGLang ``dec_lock_ref`` only moves
        sizes from protected to evictable; the leaf is evicted later in KV LRU order)."""
        self._check_node(node)
        if node is self.root:
            return
        if node.kv_lock <= 0:
            raise ValueError("node is not KV-locked (unlock_kv without lock_kv)")
        self._unlock_kv_node(node)

    def lock_state(self, node: Node) -> None:
        """Protect the checkpoint of ``node`` (and the KV of its path). No-op on the root."""
        self._check_node(node)
        if node is self.root:
            return
        if not node.has_state:
            raise ValueError("node has no state (tombstone): cannot lock_state")
        self._lock_state_node(node)

    def unlock_state(self, node: Node) -> None:
        """Release one ``lock_state`` (and its KV lock). No-op on the root."""
        self._check_node(node)
        if node is self.root:
            return
        if node.state_lock <= 0:
            raise ValueError("node is not state-locked (unlock_state without lock_state)")
        self._unlock_state_node(node)

    def _lock_kv_node(self, node: Node) -> None:
        assert node.alive and node is not self.root, "a live non-root node of this cache"
        nd = node
        root = self.root
        tpe = self._tpe
        while nd is not root:
            if nd.kv_lock == 0:
                self._kv_protected += len(nd.key) * tpe
            nd.kv_lock += 1
            nd = nd.parent
        self._sync(node)

    def _unlock_kv_node(self, node: Node) -> None:
        assert node.alive and node.kv_lock > 0, "unlock of a KV-locked live node"
        nd = node
        root = self.root
        tpe = self._tpe
        while nd is not root:
            nd.kv_lock -= 1
            if nd.kv_lock == 0:
                self._kv_protected -= len(nd.key) * tpe
            nd = nd.parent
        self._sync(node)

    def _lock_state_node(self, node: Node) -> None:
        assert node.has_state, "lock_state needs a state node"
        node.state_lock += 1
        self._lock_kv_node(node)

    def _unlock_state_node(self, node: Node) -> None:
        assert node.state_lock > 0, "unlock of a state-locked node"
        node.state_lock -= 1
        self._unlock_kv_node(node)

    # ------------------------------------------------------------------ eviction
    def lru_state_victim(self) -> Node | None:
        """Least recently used unprotected state node (None if there is none)."""
        for nd in self._slru.values():
            if not nd.sprot:
                return nd
        return None

    def _evict_state(self, node: Node, acc: _Acc) -> None:
        if node.children:
            self._detach_state(node, acc)
            acc.tombstoned += 1
            self._c["tombstoned"] += 1
        else:
            self._remove_leaf(node, acc)

    def evict_state_node(self, node: Node) -> Evicted:
        """Evict the state of one chosen node (internal -> tombstone, leaf -> deleted)."""
        self._check_node(node)
        if node is self.root or not node.has_state:
            raise ValueError("node has no state to evict")
        if node.sprot:
            raise ValueError("node's state is protected by a lock")
        acc = _Acc()
        self._evict_state(node, acc)
        self._clock += 1
        return acc.result()

    def evict_states(self, num: int = 0, nbytes: int = 0) -> Evicted:
        """Evict LRU unprotected states until ``num`` states and ``nbytes`` bytes are freed.

        Internal nodes become tombstones; leaves are deleted with their KV, and tombstone
        parents left childless stay as leaves (SGLang). Stops early when nothing is evictable.
        """
        num = check_int("num", num, 0)
        nbytes = check_int("nbytes", nbytes, 0)
        acc = _Acc()
        if self._plain():
            self._evict_lru_plain(num, nbytes, acc)
            return acc.result()
        slru = self._slru
        counters = self._c
        # lru_state_victim and _evict_state inlined: this loop runs once per evicted state
        while acc.states < num or acc.state_bytes < nbytes:
            victim = None
            for nd in slru.values():
                if not nd.sprot:
                    victim = nd
                    break
            if victim is None:
                break
            if victim.children:
                self._detach_state(victim, acc)
                acc.tombstoned += 1
                counters["tombstoned"] += 1
            else:
                self._remove_leaf(victim, acc)
            self._clock += 1
        return acc.result()

    def evict_kv(self, num_tokens: int) -> Evicted:
        """Evict LRU unlocked leaves (KV + state + tombstone cascade) until ``num_tokens``
        tokens of KV are freed or nothing is evictable."""
        num_tokens = check_int("num_tokens", num_tokens, 0)
        acc = _Acc()
        skipped = []
        heap = self._heap
        while acc.kv_tokens < num_tokens and heap:
            entry = heapq.heappop(heap)
            t, _, nid = entry
            nd = self._live.get(nid)
            if nd is None or nd.children or nd.kv_time != t:
                continue
            if nd.kv_lock > 0:
                skipped.append(entry)
                continue
            self._remove_leaf(nd, acc)
            self._clock += 1
        for entry in skipped:
            heapq.heappush(heap, entry)
        return acc.result()

    def _plain(self) -> bool:
        """No hook, no callback and no state table: eviction has nothing to tell anyone."""
        return (
            self.before_drop_state is None
            and self.on_free_state is None
            and self.on_free_kv is None
            and not self._table_on
        )

    def _evict_lru_plain(self, num: int, nbytes: int, acc: _Acc) -> None:
        """``evict_states``'s loop for a plain cache (``_plain``), with ``_detach_state`` and
        ``_remove_leaf`` inlined and the counters kept in locals (the simulator evicts up to
        262,000 states per pass). tests/test_radix_rules.py checks it against the general
        loop (a no-op hook forces that one)."""
        slru, live, root, tpe = self._slru, self._live, self.root, self._tpe
        epp = self._epp
        states = sbytes = kv_tok = nodes = tomb = 0
        became_leaf: list[Node] = []
        while acc.states + states < num or acc.state_bytes + sbytes < nbytes:
            victim = None
            for nd in slru.values():
                if not nd.sprot:
                    victim = nd
                    break
            if victim is None:
                break
            # unprotected: state_lock == 0, and a leaf has kv_lock == 0 (see _sprot_of)
            del slru[victim.id]
            nb = victim.state_bytes
            victim.has_state = False
            victim.state = None
            victim.state_bytes = 0
            states += 1
            sbytes += nb
            if victim.children:
                tomb += 1
                continue
            parent = victim.parent
            ntok = len(victim.key) * tpe
            kv_tok += ntok
            nodes += 1
            k = victim.key
            del parent.children[k[0] if epp == 1 else k[:epp]]
            victim.alive = False
            victim.parent = None
            victim.kv = None
            del live[victim.id]
            if parent is not root and not parent.children:
                became_leaf.append(parent)
            if parent.has_state:  # _sync does nothing to a tombstone
                self._sync(parent)
        self._clock += states  # a tick per evicted state, as the general loop
        # parents left childless enter the KV heap once, at the end: a chain evicted leaf by
        # leaf would push every parent only to remove it next (nothing pops the heap here)
        for nd in became_leaf:
            if nd.alive and not nd.children:
                self._push_leaf(nd)
        self._n_states -= states
        self._state_bytes -= sbytes
        self._kv_tokens -= kv_tok
        self._n_nodes -= nodes
        c = self._c
        c["evicted_states"] += states
        c["evicted_state_bytes"] += sbytes
        c["evicted_kv_tokens"] += kv_tok
        c["tombstoned"] += tomb
        acc.states += states
        acc.state_bytes += sbytes
        acc.kv_tokens += kv_tok
        acc.nodes += nodes
        acc.tombstoned += tomb
