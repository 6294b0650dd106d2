"""The radix tree's state and its low-level mutations (no public operation lives here).

``_TreeBase`` holds the nodes, the two LRU orders, the size counters and the helpers every
operation shares: touching, protection sync, attaching / detaching a state, splitting an
edge, removing a leaf. The operations are mixed in by ``kda_core.cache.radix.cache``.
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.cache.protocol import DroppedState
from kda_core.cache.radix.nodes import (
    MAX_KEY_LEN,
    MAX_PAGE_SIZE,
    STATE_TOUCH_MODES,
    Node,
    _Acc,
    _default_kv_slice,
    next_cache_id,
)
from kda_core.cache.radix.table import _StateTableMixin

COUNTERS = (
    "matches",
    "state_hits",
    "token_hits",
    "states_inserted",
    "states_existed",
    "evicted_states",
    "evicted_state_bytes",
    "evicted_kv_tokens",
    "tombstoned",
    "pruned",
    "splits",
    "capped",
)


class _TreeBase(_StateTableMixin):
    """Tree state and shared helpers of ``RadixStateCache`` (arguments documented there)."""

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
        kv_slice: Callable[[Any, int, int, int], Any] | None = None,
        max_key_len: int = MAX_KEY_LEN,
    ) -> None:
        self._check_options(page_size, block_keys, grid, max_states_per_path, state_touch)
        for name, fn in (("on_free_kv", on_free_kv), ("on_free_state", on_free_state)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be callable or None")
        if kv_slice is not None and not callable(kv_slice):
            raise ValueError("kv_slice must be callable or None")
        self.on_free_kv = on_free_kv
        self.on_free_state = on_free_state
        # set by kda_core.transfer.tiers: sees a DroppedState (the path's tokens and KV and the
        # state, still attached) so a host tier can copy it before it is dropped
        self.before_drop_state: Callable[[DroppedState], Any] | None = None
        self._kv_slice = kv_slice or _default_kv_slice
        self.max_key_len = check_int("max_key_len", max_key_len, 1, MAX_KEY_LEN)
        self._init_tree()
        self._init_table()
        self._c = dict.fromkeys(COUNTERS, 0)

    def _check_options(
        self,
        page_size: Any,
        block_keys: Any,
        grid: Any,
        max_states_per_path: Any,
        state_touch: Any,
    ) -> None:
        self.page_size = check_int("page_size", page_size, 1, MAX_PAGE_SIZE)
        self.block_keys = check_bool("block_keys", block_keys)
        if grid is None:
            grid = math.lcm(64, self.page_size)
        self.grid = check_int("grid", grid, 1, 1 << 30)
        if self.grid % self.page_size:
            raise ValueError(f"grid must be a multiple of page_size={self.page_size}, got {grid}")
        if max_states_per_path is not None:
            max_states_per_path = check_int("max_states_per_path", max_states_per_path, 1)
        self.max_states_per_path = max_states_per_path
        if state_touch not in STATE_TOUCH_MODES:
            raise ValueError(f"state_touch must be one of {STATE_TOUCH_MODES}, got {state_touch!r}")
        self.state_touch = state_touch
        # elements per page, tokens per element
        self._epp = 1 if self.block_keys else self.page_size
        self._tpe = self.page_size if self.block_keys else 1

    def _init_tree(self) -> None:
        self._owner = next_cache_id()
        self._next_id = 1
        self.root = Node(0, self._owner, (), None, None, 0)
        self.root.kv_lock = 1
        self._clock = 0
        self._n_nodes = 0
        self._kv_tokens = 0
        self._kv_protected = 0
        self._n_states = 0
        self._state_bytes = 0
        self._n_sprot = 0
        self._sprot_bytes = 0
        self._slru: OrderedDict[int, Node] = OrderedDict()
        # KV leaf heap of (access time, seq, node id): ids, not nodes, so a stale entry keeps
        # nothing alive; ``_live`` maps the ids of the nodes in the tree (bug #11.5).
        self._heap: list[tuple[int, int, int]] = []
        self._live: dict[int, Node] = {}
        self._hseq = 0

    # ------------------------------------------------------------------ properties
    @property
    def cache_id(self) -> int:
        """Unique id of this cache (policies key per-cache memos on it; handles carry it)."""
        return self._owner

    @property
    def clock(self) -> int:
        """Logical time: ticks once per touched node."""
        return self._clock

    @property
    def kv_tokens(self) -> int:
        return self._kv_tokens

    @property
    def n_states(self) -> int:
        return self._n_states

    @property
    def state_bytes(self) -> int:
        return self._state_bytes

    @property
    def n_nodes(self) -> int:
        """Non-root nodes."""
        return self._n_nodes

    @property
    def evictable_state_bytes(self) -> int:
        return self._state_bytes - self._sprot_bytes

    @property
    def evictable_kv_tokens(self) -> int:
        return self._kv_tokens - self._kv_protected

    # ------------------------------------------------------------------ helpers
    def _check_key(self, key: Any, name: str = "key") -> tuple:
        if isinstance(key, np.ndarray):
            if key.ndim != 1 or not np.issubdtype(key.dtype, np.integer):
                raise ValueError(f"{name} must be a 1-D integer array, got {key.dtype} {key.shape}")
            k = tuple(key.tolist())
        elif isinstance(key, (list, tuple, range)):
            k = tuple(key)
            types = set(map(type, k))
            if types - {int}:
                if not all(issubclass(t, numbers.Integral) and t is not bool for t in types):
                    raise ValueError(f"{name} must contain ints only")
                k = tuple(int(x) for x in k)
        else:
            raise ValueError(f"{name} must be a list, tuple, range or 1-D int array")
        if len(k) > self.max_key_len:
            raise ValueError(f"{name} length must be <= {self.max_key_len}, got {len(k)}")
        return k

    def _ck(self, k: tuple, i: int) -> Any:
        return k[i] if self._epp == 1 else k[i : i + self._epp]

    def _check_node(self, node: Any, name: str = "node") -> Node:
        if not isinstance(node, Node) or node.owner != self._owner:
            raise ValueError(f"{name} must be a Node of this cache")
        if not node.alive:
            raise ValueError(f"{name} has been evicted (not alive)")
        return node

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _touch_kv(self, node: Node) -> None:
        t = self._tick()
        node.kv_time = t
        if not node.children:
            self._push_leaf(node)

    def _push_leaf(self, node: Node) -> None:
        self._hseq += 1
        heapq.heappush(self._heap, (node.kv_time, self._hseq, node.id))

    def _touch_state(self, node: Node) -> None:
        t = self._tick()
        node.state_time = t
        self._slru.move_to_end(node.id)
        if self._table_on:
            self._st_time[node.srow] = t

    def _sprot_of(self, node: Node) -> bool:
        return node.has_state and (node.state_lock > 0 or (not node.children and node.kv_lock > 0))

    def _sync(self, node: Node) -> None:
        """Recompute state protection and the state-table child count of ``node``."""
        if not node.has_state:
            return
        p = self._sprot_of(node)
        if p != node.sprot:
            node.sprot = p
            if p:
                self._n_sprot += 1
                self._sprot_bytes += node.state_bytes
            else:
                self._n_sprot -= 1
                self._sprot_bytes -= node.state_bytes
        if self._table_on:
            r = node.srow
            self._st_evictable[r] = not p
            self._st_nchild[r] = len(node.children)

    def _attach_state(
        self, node: Node, payload: Any, nbytes: int, anc_tokens: int | None = None
    ) -> None:
        """Store a state on a tombstone; ``anc_tokens`` may pass the known nearest state
        ancestor's length (else it is found by walking up)."""
        node.has_state = True
        node.state = payload
        node.state_bytes = nbytes
        node.sprot = False
        self._n_states += 1
        self._state_bytes += nbytes
        self._clock += 1
        node.state_time = self._clock
        self._slru[node.id] = node
        if self._table_on:
            self._table_add(node, anc_tokens)
        if node.children or node.kv_lock or node.state_lock:
            self._sync(node)
        self._c["states_inserted"] += 1

    def _dropped(self, node: Node) -> DroppedState:
        """The hook's view of ``node``'s state: root-first tokens and KV of its path."""
        path = []
        nd: Node | None = node
        while nd is not None and nd is not self.root:
            path.append(nd)
            nd = nd.parent
        path.reverse()
        tokens = tuple(t for p in path for t in p.key)
        return DroppedState(tokens, tuple(p.kv for p in path), node.state, node.state_bytes)

    def _detach_state(self, node: Node, acc: _Acc | None, count: bool = True) -> None:
        """Drop the node's state (callback), keep the node. Caller fixes leaf status."""
        if self.before_drop_state is not None:
            self.before_drop_state(self._dropped(node))
        if node.sprot:
            self._n_sprot -= 1
            self._sprot_bytes -= node.state_bytes
        node.sprot = False
        if self._table_on:
            r = node.srow
            if node.children:
                self._set_region_anc(node, int(self._st_anc[r]))
            self._st_live[r] = False
            self._st_evictable[r] = False
            self._st_node[r] = None
            self._st_free.append(r)
            node.srow = -1
        del self._slru[node.id]
        payload, nbytes = node.state, node.state_bytes
        node.has_state = False
        node.state = None
        node.state_bytes = 0
        self._n_states -= 1
        self._state_bytes -= nbytes
        if count:
            self._c["evicted_states"] += 1
            self._c["evicted_state_bytes"] += nbytes
        if acc is not None:
            acc.states += 1
            acc.state_bytes += nbytes
        if self.on_free_state is not None:
            self.on_free_state(payload, nbytes)

    def _split(self, child: Node, c: int) -> Node:
        """Split ``child``'s edge after ``c`` elements; returns the new upper node (tombstone)."""
        parent = child.parent
        assert parent is not None and 0 < c < len(child.key)
        e = child.key
        tpe = self._tpe
        length = len(e) * tpe
        head = self._kv_slice(child.kv, 0, c * tpe, length)
        tail = self._kv_slice(child.kv, c * tpe, length, length)
        upper = Node(self._next_id, self._owner, e[:c], head, parent, parent.plen + c)
        self._live[upper.id] = upper
        self._next_id += 1
        self._n_nodes += 1
        upper.kv_lock = child.kv_lock
        # SGLang stamps both halves as just used (unified_tree_core.py, ``_split_node``: the new
        # upper node is created with a fresh access time, then ``child.last_access_time =
        # get_and_increase_time_counter()``), on insert and on a splitting match alike. The
        # state LRU order is untouched (there ``insert_after(child, node)`` keeps it).
        upper.kv_time = self._tick()
        parent.children[self._ck(e, 0)] = upper
        child.key = e[c:]
        child.kv = tail
        child.parent = upper
        upper.children = {self._ck(child.key, 0): child}
        child.kv_time = self._tick()
        if not child.children:
            self._push_leaf(child)
        self._c["splits"] += 1
        return upper

    def _remove_leaf(self, node: Node, acc: _Acc) -> None:
        """Delete a leaf (KV + state). A parent left childless stays as a leaf, state or not.

        SGLang keeps a childless node that has KV but no state as an ordinary KV leaf
        (unified_tree_core.py: ``_delete_leaf`` then ``_update_evictable_leaf_sets(parent)``;
        no cascade): later KV eviction reaches it in LRU order, and it still serves token
        matches. (This lab pruned such tombstone leaves at once before; issue #12.)
        """
        parent = node.parent
        assert parent is not None and not node.children
        if node.has_state:
            self._detach_state(node, acc)
        ntok = len(node.key) * self._tpe
        self._kv_tokens -= ntok
        if node.kv_lock > 0:  # callers never remove a KV-locked leaf; kept for the sums
            self._kv_protected -= ntok
        del parent.children[self._ck(node.key, 0)]
        node.alive = False
        node.parent = None
        self._n_nodes -= 1
        self._c["evicted_kv_tokens"] += ntok
        acc.kv_tokens += ntok
        acc.nodes += 1
        payload = node.kv
        node.kv = None
        if self.on_free_kv is not None:
            self.on_free_kv(payload, ntok)
        # Bug #11.5: heap entries name nodes by id, so a removed node is unreachable now.
        del self._live[node.id]
        if parent is not self.root and not parent.children:
            self._push_leaf(parent)  # parent became a leaf: index it
        self._sync(parent)

    def _state_touch_path(self, nodes: list[Node]) -> None:
        holders = [n for n in nodes if n.has_state]
        if self.state_touch == "path_tail_first":
            holders.reverse()
        if self._table_on:
            for n in holders:
                self._touch_state(n)
            return
        # _touch_state inlined (no state table to update)
        clock = self._clock
        to_end = self._slru.move_to_end
        for n in holders:
            clock += 1
            n.state_time = clock
            to_end(n.id)
        self._clock = clock
