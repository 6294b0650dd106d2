"""``RadixTree``: the radix cache's nodes, sizes, LRU orders and the mutations that keep them in
step; its fields are public to ``_insert``, ``_evict`` and ``_integrity``. docs/radix.md."""

from __future__ import annotations

import heapq
import itertools
import math
import numbers
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kda_core._checks import check_bool, check_int
from kda_core.cache.protocol import DroppedState
from kda_core.cache.radix._node import CacheStats, Node, StateRows, StateTable, common_prefix

_MAX_PAGE_SIZE = 1 << 16
_TOUCH_MODES = ("node", "path", "path_tail_first")

COUNTERS = CacheStats._fields[CacheStats._fields.index("matches") : -1]
"""The event counters: ``CacheStats``' fields after the sizes, before ``clock``."""
_cache_ids = itertools.count(1)  # handles carry their cache's id


def default_kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    """Split a KV payload on an edge split: None stays None, numbers are byte counts split
    proportionally (the pieces add up to the whole), anything else is sliced."""
    if payload is None:
        return None
    if isinstance(payload, numbers.Integral) and not isinstance(payload, bool):
        p = int(payload)
        return p * stop // length - p * start // length
    if isinstance(payload, numbers.Real) and not isinstance(payload, bool):
        return float(payload) * (stop - start) / length
    return payload[start:stop]


class RadixTree:
    """The tree's record (arguments: ``RadixStateCache``): ``live`` maps id -> every non-root
    node, ``slru`` is the state LRU (oldest first): their sizes are the node and state counts;
    ``heap`` the KV leaf heap of (access time, id), ``table`` the state table (None
    without a ``victim``); ``epp`` / ``tpe``: key elements per page, tokens per key element."""

    def __init__(
        self,
        page_size: int = 1,
        *,
        block_keys: bool = False,
        grid: int | None = None,
        max_states_per_path: int | None = None,
        state_touch: str = "node",
        on_free_kv: Callable[[Any, int], Any] | None = None,
        on_free_state: Callable[[Any, int], Any] | None = None,
        before_drop: Callable[[DroppedState], Any] | None = None,
        kv_slice: Callable[[Any, int, int, int], Any] | None = None,
        victim: Callable[[StateRows], int] | None = None,
    ) -> None:
        self.page_size = check_int("page_size", page_size, 1, _MAX_PAGE_SIZE)
        self.block_keys = check_bool("block_keys", block_keys)
        grid = math.lcm(64, self.page_size) if grid is None else grid
        self.grid = check_int("grid", grid, 1, 1 << 30)
        if self.grid % self.page_size:
            raise ValueError(f"grid must be a multiple of page_size={self.page_size}, got {grid}")
        if max_states_per_path is not None:
            max_states_per_path = check_int("max_states_per_path", max_states_per_path, 1)
        self.max_states_per_path = max_states_per_path
        if state_touch not in _TOUCH_MODES:
            raise ValueError(f"state_touch must be one of {_TOUCH_MODES}, got {state_touch!r}")
        self.state_touch = state_touch
        hooks = dict(on_free_kv=on_free_kv, on_free_state=on_free_state, before_drop=before_drop)
        for name, fn in {**hooks, "kv_slice": kv_slice, "victim": victim}.items():
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be callable or None")
        self.on_free_kv, self.on_free_state, self.before_drop = hooks.values()
        self.kv_slice = kv_slice or default_kv_slice
        self.victim = victim
        self.epp = 1 if self.block_keys else self.page_size
        self.tpe = self.page_size if self.block_keys else 1
        self.owner = next(_cache_ids)
        self.next_id = 1
        self.root = Node(0, (), None, None, 0)
        self.clock = self.kv_tokens = self.kv_protected = 0
        self.state_bytes = self.n_sprot = self.sprot_bytes = 0
        self.slru: OrderedDict[int, Node] = OrderedDict()
        # ids, not nodes, in the heap: a stale entry keeps nothing alive (``live`` maps them);
        # every stamp is a fresh tick, so no two nodes tie on access time
        self.heap: list[tuple[int, int]] = []
        self.live: dict[int, Node] = {}
        self.table = StateTable() if victim is not None else None
        self.counts = dict.fromkeys(COUNTERS, 0)
        # without state hooks or a table only ``on_free_kv`` may hear of an eviction, and evict's
        # fast loop tells it, in eviction order (the tree's counters settle after the loop)
        self.plain = all(fn is None for fn in (on_free_state, before_drop, victim))

    # ------------------------------------------------------------------ touching
    def first(self, k: tuple, i: int) -> Any:
        """The child key of ``k`` at element ``i`` (its first page)."""
        return k[i] if self.epp == 1 else k[i : i + self.epp]

    def push_leaf(self, node: Node) -> None:
        heapq.heappush(self.heap, (node.kv_time, node.id))

    def touch_kv(self, path: list[Node]) -> None:
        """Stamp ``path`` (root-first) as just used, one tick per node (up to one per key
        element); only its last node can be a leaf: index it."""
        clock = self.clock
        for nd in path:
            clock += 1
            nd.kv_time = clock
        self.clock = clock
        if path and not path[-1].children:
            self.push_leaf(path[-1])

    def touch_states(self, nodes: list[Node]) -> None:
        """Refresh the states on ``nodes``, one tick each (deepest first in "path_tail_first")."""
        holders = [n for n in nodes if n.has_state]
        if self.state_touch == "path_tail_first":
            holders.reverse()
        clock, to_end, table = self.clock, self.slru.move_to_end, self.table
        for n in holders:
            clock += 1
            n.state_time = clock
            to_end(n.id)
            if table is not None:
                table.time[n.srow] = clock
        self.clock = clock

    def sync(self, node: Node) -> None:
        """Recompute ``node``'s state protection (and its table row's child count)."""
        if not node.has_state:
            return
        p = node.state_lock > 0 or (not node.children and node.kv_lock > 0)
        if p != node.sprot:
            node.sprot = p
            sign = 1 if p else -1
            self.n_sprot += sign
            self.sprot_bytes += sign * node.state_bytes
        if self.table is not None:
            self.table.protect(node)

    # ------------------------------------------------------------------ locks
    def lock(self, node: Node, unlock: bool, state: bool) -> None:
        """One KV lock more (or less) on the live non-root ``node`` and every ancestor but the
        root; with ``state``, one state lock more (or less) on ``node`` too (``lock_handle``
        checked the handle: its node holds the state, and an unlock follows its lock)."""
        d, nd, root, tpe = -1 if unlock else 1, node, self.root, self.tpe
        if state:
            node.state_lock += d
        while nd is not root:
            if nd.kv_lock == (1 if unlock else 0):
                self.kv_protected += d * len(nd.key) * tpe
            nd.kv_lock += d
            nd = nd.parent  # type: ignore[assignment]
        self.sync(node)

    # ------------------------------------------------------------------ states
    def attach_state(self, node: Node, payload: Any, nbytes: int) -> None:
        """Store a state on a tombstone."""
        node.has_state, node.state, node.state_bytes, node.sprot = True, payload, nbytes, False
        self.state_bytes += nbytes
        self.clock += 1
        node.state_time = self.clock
        self.slru[node.id] = node
        if self.table is not None:
            self.table.add(node, node.plen * self.tpe, self.ancestor_tokens(node))
        self.sync(node)  # a KV-locked leaf protects its new state
        self.counts["states_inserted"] += 1

    def ancestor_tokens(self, node: Node) -> int:
        """Tokens at the end of ``node``'s nearest checkpointed proper ancestor (0: root)."""
        p = node.parent
        while p is not None and not p.has_state:
            p = p.parent
        return 0 if p is None else p.plen * self.tpe

    def detach_state(self, node: Node, count: bool = True) -> None:
        """Drop ``node``'s unprotected state (hooks called), keep the node; the caller fixes leaf
        status. ``count``: an eviction (counted as one), not the per-path cap."""
        if self.before_drop is not None:
            path = []
            nd = node
            while nd is not self.root:
                path.append(nd)
                nd = nd.parent  # type: ignore[assignment]
            path.reverse()
            tokens = tuple(t for p in path for t in p.key)
            kv = tuple(p.kv for p in path)
            self.before_drop(DroppedState(tokens, kv, node.state, node.state_bytes))
        assert not node.sprot  # callers pick unlocked states, or KV-unlocked leaves
        if self.table is not None:
            self.table.remove(node)
        del self.slru[node.id]
        payload, nbytes = node.state, node.state_bytes
        node.has_state, node.state, node.state_bytes = False, None, 0
        self.state_bytes -= nbytes
        if count:
            self.counts["evicted_states"] += 1
            self.counts["evicted_state_bytes"] += nbytes
        if self.on_free_state is not None:
            self.on_free_state(payload, nbytes)

    # ------------------------------------------------------------------ edges
    def split(self, child: Node, c: int) -> Node:
        """Split ``child``'s edge after ``c`` elements; returns the new upper node (tombstone).

        SGLang stamps both halves as just used (unified_tree_core.py ``_split_node``: the new
        upper node gets a fresh access time, then ``child.last_access_time =
        get_and_increase_time_counter()``); the state LRU order is untouched."""
        parent = child.parent
        assert parent is not None and 0 < c < len(child.key)
        e, tpe = child.key, self.tpe
        length = len(e) * tpe
        head = self.kv_slice(child.kv, 0, c * tpe, length)
        tail = self.kv_slice(child.kv, c * tpe, length, length)
        upper = Node(self.next_id, e[:c], head, parent, parent.plen + c)
        self.live[upper.id] = upper
        self.next_id += 1
        upper.kv_lock = child.kv_lock
        self.clock += 1
        upper.kv_time = self.clock
        parent.children[self.first(e, 0)] = upper
        child.key, child.kv, child.parent = e[c:], tail, upper
        upper.children = {self.first(child.key, 0): child}
        self.clock += 1
        child.kv_time = self.clock
        if not child.children:
            self.push_leaf(child)
        self.counts["splits"] += 1
        return upper

    def remove_leaf(self, node: Node) -> None:
        """Delete an unlocked leaf (KV and state). A parent left childless stays as a leaf,
        state or not (SGLang unified_tree_core.py ``_delete_unbacked_device_leaf``: the
        parent is re-filed by ``_update_evictable_leaf_sets``, and
        ``_iteratively_delete_tombstone_leaf`` stops at a parent holding KV; later KV eviction
        reaches it in LRU order)."""
        parent = node.parent
        assert parent is not None and not node.children and node.kv_lock == 0
        if node.has_state:
            self.detach_state(node)
        ntok = len(node.key) * self.tpe
        self.kv_tokens -= ntok
        del parent.children[self.first(node.key, 0)]
        node.parent = None
        self.counts["evicted_kv_tokens"] += ntok
        payload, node.kv = node.kv, None
        if self.on_free_kv is not None:
            self.on_free_kv(payload, ntok)
        del self.live[node.id]
        if parent is not self.root and not parent.children:
            self.push_leaf(parent)  # parent became a leaf: index it
        self.sync(parent)

    # ------------------------------------------------------------------ match
    def match(self, k: tuple, touch: bool, split: bool, count: bool = True) -> tuple:
        """The walk of ``match_prefix`` on a checked key (whole pages) -> (token_match,
        restore_at, restore node, KV payloads root-first up to it, branch hint, mid_edge, last
        matched node); ``count``: a lookup of the cache's user (not an insert's own walk)."""
        epp, n = self.epp, len(k)
        node = best = self.root
        path: list[Node] = []
        best_i = best_depth = i = 0
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
                    best, best_i, best_depth = child, i, len(path)
                continue
            c = common_prefix(e, k, i, min(le, n - i))
            c -= c % epp
            if c > 0:
                mid = True
                i += c
                if split:
                    node = self.split(child, c)
                    path.append(node)
            break
        token_match, restore_at = i * self.tpe, best_i * self.tpe
        if count:
            cnt = self.counts
            cnt["matches"] += 1
            cnt["state_hits"] += restore_at > 0
            cnt["token_hits"] += token_match > 0
        if touch and best is not self.root:
            used = path[:best_depth]
            self.touch_kv(used)
            self.touch_states([best] if self.state_touch == "node" else used)
        aligned = token_match // self.grid * self.grid
        branch = aligned if aligned > restore_at else None
        kv = tuple([nd.kv for nd in path[:best_depth]])
        return token_match, restore_at, best, kv, branch, mid, node
