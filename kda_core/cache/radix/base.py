"""KDA-aware radix cache: token edges with KV payloads, sparse state checkpoints, tombstones.

A KDA layer cannot be rolled back, so a token-prefix hit is not a state hit: a request can
only resume where the recurrent state was saved (a *checkpoint*) and must replay the tokens
between that checkpoint and the longest token match. This tree stores both resources and
keeps them apart, following SGLang's ``MambaRadixCache`` (engines.md §1.2-1.8):

* every non-root node owns the KV payload of its edge (tokens ``[start, end)``),
* a node MAY own one checkpoint: the state after consuming every token up to its ``end``;
  a node without one is a *tombstone* (KV present, state absent),
* ``match`` returns the longest token match AND the restore point (the deepest node on the
  path holding a checkpoint; the root never counts), KV payloads only up to the restore
  point, and SGLang's branch hint,
* two LRU orders: KV (eviction takes the least recent unlocked *leaf*, frees its KV and its
  state; a parent left childless becomes a leaf, tombstone or not, as in SGLang) and states
  (eviction takes the least recent unlocked state anywhere: internal node -> tombstone,
  leaf -> deleted like a KV leaf),
* lock references: ``lock_kv`` on the path to the root, ``lock_state`` on one node (it also
  takes a KV lock on the path, so ``kv_lock >= state_lock`` as in SGLang),
* a soft per-path checkpoint budget (SGLang ``--mamba-max-states-per-path``).

Keys are sequences of ints. With ``block_keys=False`` (the engine) every element is a token
and edges are matched in pages of ``page_size`` tokens. With ``block_keys=True`` (the trace
simulator) every element is the hash of one ``page_size``-token block (Mooncake
``hash_ids``). **Every length in the API is in tokens** (a block key of n elements is
``n * page_size`` tokens); keys are truncated down to whole pages.

Payloads are opaque. ``kv`` is sliced with ``kv_slice(payload, start, stop, length)`` on
splits (default: ``None`` stays ``None``, numbers are split proportionally as byte counts,
anything else is sliced ``payload[start:stop]`` - numpy arrays, lists). A state is any
object plus its byte size. When the cache frees a payload it calls
``on_free_kv(payload, n_tokens)`` / ``on_free_state(payload, n_bytes)``.

Invariants (``check_integrity`` verifies all of them):

1. parent/child links agree; a child is filed under its first element (page); every edge is
   non-empty and a whole number of pages; ``end(child) = end(parent) + len(edge)``.
2. a leaf may be a tombstone (KV, no state): SGLang keeps it and evicts it by KV LRU.
3. the root holds no state, no KV and is in neither LRU order.
4. ``kv_lock(n) >= sum(kv_lock(children))``, ``kv_lock(n) >= state_lock(n) >= 0``,
   ``state_lock > 0`` only on nodes holding a state.
5. token and state sizes add up: totals, protected (KV: ``kv_lock > 0``; state:
   ``state_lock > 0`` or a KV-locked leaf) and ``evictable = total - protected``.
6. the state LRU holds exactly the state nodes in increasing access time; the KV leaf heap
   holds a current entry for exactly the leaves; the state table (numpy arrays used by
   vectorised eviction policies) mirrors the state nodes.

Design choices:

* ``match`` does not split by default (``split=False``): a lookup that ends inside an edge
  leaves the tree unchanged and reports ``mid_edge=True``; the next ``insert`` splits there.
  ``split=True`` reproduces SGLang (the upper half becomes a tombstone, ``last_node`` is it).
  Not splitting keeps lookups pure (replay app, policy probes, brute-force model tests); the
  restore point is the same either way.
* ``insert`` takes the KV of the whole key and the checkpoints as ``(position, payload[,
  nbytes])``; the key is cut at the deepest checkpoint (KV beyond it could never be
  restored - SGLang frees that tail too). It reports which checkpoints already existed so the
  caller frees its redundant copies (those are NOT passed to ``on_free_state``).
* KV eviction order is exact LRU over unlocked leaves (a lazy heap keyed by access time,
  SGLang's ``evictable_device_leaves`` + ``last_access_time``), O(log n) per operation.
  The state order is an ``OrderedDict`` (O(1) touch, eviction skips only protected nodes).
  Children are a dict keyed by the first element (page); ``match``/``insert`` cost is linear
  in the key length (edges compared with C-speed slice comparisons).
* The numpy state table (``state_table()``: per-checkpoint length, nearest checkpointed
  ancestor, bytes, access time, lock and child count) is built on first use and maintained
  from then on, so vectorised policies (Marconi) pay for it and LRU users do not.
* Bulk runs (12k-request traces) spend ~40% of insert time in CPython's cyclic GC scanning
  the growing tree; callers may wrap such loops in ``gc.disable()`` / ``gc.enable()``.
* ``state_touch`` decides which states a hit refreshes: ``"node"`` only the restore node
  (SGLang PRs #31643/#31648, Marconi), ``"path"`` every state on the path with ancestors
  older (legacy SGLang: ancestors evicted first), ``"path_tail_first"`` every state with the
  deepest oldest (vLLM frees a request's blocks tail-first). An insert refreshes the
  checkpoints it names ("node") or every state on its path (the path modes). The KV order is
  refreshed along the path: root to restore node on a hit, the whole inserted path on insert.

Left out: host tiers (HiCache), speculative ``skip_mamba_match``, Marconi's node merging
(evicting a single-child node's state tombstones it instead; same memory), thread safety,
and any notion of time other than a logical clock ticking on every touch.

Usage::

    cache = RadixStateCache(page_size=1, max_states_per_path=None,
                            on_free_state=lambda slot, nbytes: pool.free(slot))
    r = cache.insert(tokens, kv=kv_array, states=[(64, slot_a, 1024), (100, slot_b, 1024)])
    for pos in r.existed: ...                     # the tree already had them: free yours
    m = cache.match(prompt[:-1])                  # m.token_match >= m.restore_at
    cache.lock_state(m.node)                      # no-op when m.restore_at == 0 (root)
    # restore m.state + m.kv (tokens [0, m.restore_at)), replay [m.restore_at, m.token_match)
    cache.unlock_state(m.node)
    cache.evict_states(num=1)                     # or policy.evict_states(cache, num=1)
    cache.evict_kv(4096)                          # free >= 4096 tokens of KV (leaves first)
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from kda_core._checks import check_integral as _check_int

MAX_KEY_LEN = 1 << 22
"""Longest key (elements) accepted by ``match``/``insert``; caps memory per call."""
MAX_PAGE_SIZE = 1 << 16
STATE_TOUCH_MODES = ("node", "path", "path_tail_first")

__all__ = [
    "MAX_KEY_LEN",
    "STATE_TOUCH_MODES",
    "CacheStats",
    "Evicted",
    "InsertResult",
    "IntegrityError",
    "MatchResult",
    "Node",
    "NodeView",
    "RadixStateCache",
    "StateTable",
]


class IntegrityError(AssertionError):
    """Raised by ``RadixStateCache.check_integrity`` when an invariant is broken."""


_NO_CHILDREN: dict = {}
"""Shared (never written) children dict of leaves: fewer GC-tracked objects per node."""


class Node:
    """One tree node. Opaque handle for callers: pass it back to lock/unlock/evict.

    ``plen`` is the prefix length in key elements at the node's end.
    """

    __slots__ = (
        "id",
        "owner",
        "key",
        "kv",
        "parent",
        "children",
        "plen",
        "has_state",
        "state",
        "state_bytes",
        "kv_lock",
        "state_lock",
        "kv_time",
        "state_time",
        "srow",
        "sprot",
        "alive",
        "__weakref__",  # tests check that removed nodes are unreachable (issue #11, bug 5)
    )

    def __init__(self, nid: int, owner: int, key: tuple, kv: Any, parent: Node | None, plen: int):
        self.id = nid
        self.owner = owner
        self.key = key
        self.kv = kv
        self.parent = parent
        self.children: dict = _NO_CHILDREN
        self.plen = plen
        self.has_state = False
        self.state: Any = None
        self.state_bytes = 0
        self.kv_lock = 0
        self.state_lock = 0
        self.kv_time = 0
        self.state_time = 0
        self.srow = -1
        self.sprot = False
        self.alive = True

    def __repr__(self) -> str:
        tag = "state" if self.has_state else "tombstone"
        return f"Node(id={self.id}, plen={self.plen}, edge={len(self.key)}, {tag})"


class MatchResult(NamedTuple):
    """Result of ``RadixStateCache.match``; lengths in tokens.

    token_match >= restore_at; ``kv`` holds the edge payloads root-first covering exactly
    ``[0, restore_at)``; ``node`` is the restore node (the root when restore_at == 0);
    ``branch`` is SGLang's hint ``floor(token_match/grid)*grid`` if that exceeds restore_at.
    """

    token_match: int
    restore_at: int
    node: Node
    state: Any
    state_bytes: int
    kv: tuple
    branch: int | None
    mid_edge: bool
    last_node: Node


class InsertResult(NamedTuple):
    """Result of ``RadixStateCache.insert``; lengths in tokens.

    prefix_len: tokens of the key already in the tree before the insert.
    inserted_len: tokens of the key now in the tree (the deepest checkpoint position).
    new / existed: checkpoint positions stored now / already present (caller frees its copy).
    capped: states tombstoned by the per-path budget (freed through ``on_free_state``).
    """

    prefix_len: int
    inserted_len: int
    node: Node | None
    new: tuple[int, ...]
    existed: tuple[int, ...]
    capped: int


class Evicted(NamedTuple):
    """What one eviction call freed."""

    states: int
    state_bytes: int
    kv_tokens: int
    nodes: int
    tombstoned: int


class CacheStats(NamedTuple):
    nodes: int
    tombstones: int
    kv_tokens: int
    kv_protected: int
    kv_evictable: int
    states: int
    state_bytes: int
    states_protected: int
    state_bytes_protected: int
    states_evictable: int
    state_bytes_evictable: int
    matches: int
    state_hits: int
    token_hits: int
    states_inserted: int
    states_existed: int
    evicted_states: int
    evicted_state_bytes: int
    evicted_kv_tokens: int
    tombstoned: int
    pruned: int
    splits: int
    capped: int
    clock: int


class NodeView(NamedTuple):
    """One node for drawing (``RadixStateCache.export``); lengths in tokens, ages in ticks."""

    id: int
    parent: int
    depth: int
    start: int
    end: int
    key: tuple
    has_state: bool
    state_bytes: int
    kv_lock: int
    state_lock: int
    kv_age: int
    state_age: int
    is_leaf: bool


class StateTable(NamedTuple):
    """Read-only views of the per-state arrays (rows with ``live`` False are free).

    length: tokens at the node's end; anc_length: tokens at the nearest state-holding proper
    ancestor's end (0 = root); time: last state access (logical clock); evictable: not
    protected by a lock; nchild: number of children of the node; version: changes whenever
    length, anc_length or nbytes of the row change (lets policies cache derived values).
    """

    live: np.ndarray
    evictable: np.ndarray
    nchild: np.ndarray
    time: np.ndarray
    length: np.ndarray
    anc_length: np.ndarray
    nbytes: np.ndarray
    version: np.ndarray


def _default_kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    if payload is None:
        return None
    if isinstance(payload, numbers.Integral) and not isinstance(payload, bool):
        p = int(payload)
        return p * stop // length - p * start // length
    if isinstance(payload, numbers.Real) and not isinstance(payload, bool):
        return float(payload) * (stop - start) / length
    return payload[start:stop]


def _common_prefix(e: tuple, k: tuple, i: int, limit: int) -> int:
    """Length of the common prefix of ``e`` and ``k[i:]``, at most ``limit`` (C-speed slices)."""
    j = 0
    step = 32
    while j < limit:
        s = min(step, limit - j)
        if e[j : j + s] == k[i + j : i + j + s]:
            j += s
            if step < 8192:
                step *= 2
            continue
        lo, hi = j, j + s
        while hi - lo > 16:
            mid = (lo + hi) // 2
            if e[lo:mid] == k[i + lo : i + mid]:
                lo = mid
            else:
                hi = mid
        while lo < hi and e[lo] == k[i + lo]:
            lo += 1
        return lo
    return limit


class _Acc:
    __slots__ = ("states", "state_bytes", "kv_tokens", "nodes", "tombstoned")

    def __init__(self) -> None:
        self.states = 0
        self.state_bytes = 0
        self.kv_tokens = 0
        self.nodes = 0
        self.tombstoned = 0

    def result(self) -> Evicted:
        return Evicted(self.states, self.state_bytes, self.kv_tokens, self.nodes, self.tombstoned)


_owner_counter = [0]


class RadixStateCache:
    """KDA-aware radix tree (see the module docstring for semantics and invariants).

    Args:
        page_size: tokens per page (1 for the engine; 512 for Mooncake block traces), in
            [1, 65536]. Edges split only at page boundaries.
        block_keys: key elements are block hashes (one element = one page of tokens) instead
            of tokens.
        grid: alignment of the branch hint in tokens; default ``lcm(64, page_size)``
            (SGLang ``lcm(mamba_cache_chunk_size, page)``); must be a multiple of page_size.
        max_states_per_path: soft cap on checkpoints per root-to-node path (None = no cap).
        state_touch: which states a hit refreshes: "node", "path" or "path_tail_first".
        on_free_kv: called as ``on_free_kv(payload, n_tokens)`` when the tree drops KV.
        on_free_state: called as ``on_free_state(payload, n_bytes)`` when it drops a state.
        kv_slice: ``kv_slice(payload, start, stop, length) -> payload`` for splitting KV.
        max_key_len: longest key in elements (default ``MAX_KEY_LEN``).
    """

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
        self.page_size = _check_int(page_size, "page_size", 1, MAX_PAGE_SIZE)
        if not isinstance(block_keys, bool):
            raise ValueError(f"block_keys must be a bool, got {type(block_keys).__name__}")
        self.block_keys = block_keys
        if grid is None:
            grid = math.lcm(64, self.page_size)
        self.grid = _check_int(grid, "grid", 1, 1 << 30)
        if self.grid % self.page_size:
            raise ValueError(f"grid must be a multiple of page_size={self.page_size}, got {grid}")
        if max_states_per_path is not None:
            max_states_per_path = _check_int(max_states_per_path, "max_states_per_path", 1)
        self.max_states_per_path = max_states_per_path
        if state_touch not in STATE_TOUCH_MODES:
            raise ValueError(f"state_touch must be one of {STATE_TOUCH_MODES}, got {state_touch!r}")
        self.state_touch = state_touch
        for name, fn in (("on_free_kv", on_free_kv), ("on_free_state", on_free_state)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be callable or None")
        if kv_slice is not None and not callable(kv_slice):
            raise ValueError("kv_slice must be callable or None")
        self.on_free_kv = on_free_kv
        self.on_free_state = on_free_state
        # set by kda_core.transfer.tiers: sees a node while its state is still attached, so a
        # host tier can copy the state (and the path's tokens and KV) before it is dropped
        self.before_drop_state: Callable[[Node], Any] | None = None
        self._kv_slice = kv_slice or _default_kv_slice
        self.max_key_len = _check_int(max_key_len, "max_key_len", 1, MAX_KEY_LEN)
        # elements per page, tokens per element
        self._epp = 1 if block_keys else self.page_size
        self._tpe = self.page_size if block_keys else 1
        _owner_counter[0] += 1
        self._owner = _owner_counter[0]
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
        # state table
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
        # counters
        self._c = dict.fromkeys(
            (
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
            ),
            0,
        )

    # ------------------------------------------------------------------ properties
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
    def _as_key(self, key: Any, name: str = "key") -> tuple:
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

    def _detach_state(self, node: Node, acc: _Acc | None, count: bool = True) -> None:
        """Drop the node's state (callback), keep the node. Caller fixes leaf status."""
        if self.before_drop_state is not None:
            self.before_drop_state(node)
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
        for n in holders:
            self._touch_state(n)

    # ------------------------------------------------------------------ match
    def match(self, key: Any, *, touch: bool = True, split: bool = False) -> MatchResult:
        """Longest token match and restore point of ``key`` (truncated to whole pages).

        With ``touch`` the KV of the path up to the restore node is refreshed and the states
        per ``state_touch``. With ``split`` a match ending inside an edge splits it (SGLang):
        the upper half becomes a tombstone and is returned as ``last_node``.
        """
        return self._match(self._as_key(key), touch, split, True)

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
            if k[i : i + le] == e:
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
            for nd in used:
                self._touch_kv(nd)
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

    # ------------------------------------------------------------------ insert
    def _parse_states(self, states: Any, n_elems: int, default_bytes: int) -> list:
        if isinstance(states, dict):
            items = list(states.items())
        elif isinstance(states, Iterable) and not isinstance(states, (str, bytes)):
            items = list(states)
        else:
            raise ValueError(
                "states must be a dict {position: payload} or (position, payload[, nbytes]) tuples"
            )
        out = []
        tpe = self._tpe
        page = self.page_size
        max_pos = n_elems * tpe
        for it in items:
            if type(it) is not tuple or len(it) not in (2, 3):
                raise ValueError("states entries must be (position, payload[, nbytes]) tuples")
            pos = it[0]
            if type(pos) is not int or not 0 < pos <= max_pos:
                pos = _check_int(pos, "states position", 1, max(max_pos, 1))
                if pos > max_pos:
                    raise ValueError(f"states position must be <= key length {max_pos}, got {pos}")
            if pos % page:
                raise ValueError(
                    f"states position must be a multiple of page_size={page}, got {pos}"
                )
            if len(it) == 2:
                nb = default_bytes
            else:
                nb = it[2]
                if type(nb) is not int or nb < 0:
                    nb = _check_int(nb, "states nbytes", 0)
            out.append((pos // tpe, it[1], nb))
        if any(a[0] >= b[0] for a, b in zip(out, out[1:])):
            out.sort(key=lambda x: x[0])
            for a, b in zip(out, out[1:]):
                if a[0] == b[0]:
                    raise ValueError(f"states positions must be unique, got {a[0] * tpe} twice")
        return out

    def insert(
        self, key: Any, kv: Any = None, states: Any = (), *, state_bytes: int = 0
    ) -> InsertResult:
        """Insert ``key`` with its KV and checkpoints at given token positions.

        Args:
            key: tokens (or block hashes); truncated to whole pages.
            kv: payload covering the whole key (sliced per node with ``kv_slice``), or None.
            states: ``{position: payload}`` or ``(position, payload[, nbytes])`` tuples;
                positions in tokens, multiples of page_size, in [1, len(key)].
            state_bytes: byte size for entries that give none.

        The key is cut at the deepest checkpoint. Existing nodes on the path are refreshed,
        edges split where the key diverges or a checkpoint falls inside an edge, tombstones
        at a checkpoint position are revived, and the per-path budget is applied.
        """
        k = self._as_key(key)
        state_bytes = _check_int(state_bytes, "state_bytes", 0)
        epp, tpe = self._epp, self._tpe
        n_al = len(k) - len(k) % epp
        sts = self._parse_states(states, n_al, state_bytes)
        kv_len = len(k) * tpe
        if not sts:
            m = self._match(k, False, False, False)
            return InsertResult(m.token_match, 0, None, (), (), 0)
        end = sts[-1][0]
        if (
            kv is not None
            and not isinstance(kv, numbers.Number)
            and hasattr(kv, "__len__")
            and len(kv) < end * tpe
        ):
            raise ValueError(
                f"kv must cover the inserted key ({end * tpe} tokens), got length {len(kv)}"
            )
        if len(k) != end:
            k = k[:end]
        positions = [s[0] for s in sts]
        m_pos = len(positions)
        at: list[Node | None] = [None] * m_pos
        pi = 0
        node = self.root
        path: list[Node] = []
        i = 0
        while i < end:
            child = node.children.get(k[i] if epp == 1 else k[i : i + epp])
            if child is None:
                break
            e = child.key
            le = len(e)
            if le <= end - i and k[i : i + le] == e:
                c = le
            else:
                c = _common_prefix(e, k, i, min(le, end - i))
                c -= c % epp
                if c == 0:
                    break
            p = positions[pi] - i
            if p < c:
                child = self._split(child, p)
                c = p
            elif c < le:
                child = self._split(child, c)
            i += c
            node = child
            path.append(child)
            if positions[pi] == i:
                at[pi] = child
                pi += 1
        prefix_len = i * tpe
        new: list[int] = []
        existed: list[int] = []
        node_touch = self.state_touch == "node"
        for j in range(pi):  # checkpoints on existing nodes, root-first
            t = at[j]
            assert t is not None
            pos, payload, nb = sts[j]
            if t.has_state:
                existed.append(pos * tpe)
                self._c["states_existed"] += 1
                if node_touch:
                    self._touch_state(t)
            else:
                self._attach_state(t, payload, nb)
                new.append(pos * tpe)
        created: list[Node] = []
        parent = node
        prev = i
        if pi < m_pos:
            anc = None
            if parent.has_state:
                anc = parent.plen * tpe
            elif parent is self.root:
                anc = 0
            slicer = self._kv_slice
            owner = self._owner
            slru = self._slru
            table_on = self._table_on
            added_tokens = added_bytes = 0
            for j in range(pi, m_pos):  # new chain: one node per checkpoint, attached as made
                pos, payload, nb = sts[j]
                nid = self._next_id
                self._next_id = nid + 1
                seg = Node(
                    nid,
                    owner,
                    k[prev:pos],
                    None if kv is None else slicer(kv, prev * tpe, pos * tpe, kv_len),
                    parent,
                    pos,
                )
                self._live[nid] = seg
                if parent.children is _NO_CHILDREN:
                    parent.children = {}
                parent.children[k[prev] if epp == 1 else k[prev : prev + epp]] = seg
                added_tokens += (pos - prev) * tpe
                seg.has_state = True
                seg.state = payload
                seg.state_bytes = nb
                added_bytes += nb
                self._clock += 1
                seg.state_time = self._clock
                slru[nid] = seg
                if table_on:
                    if parent.has_state:
                        self._st_nchild[parent.srow] = len(parent.children)
                    self._table_add(seg, anc)
                anc = pos * tpe
                created.append(seg)
                at[j] = seg
                new.append(anc)
                parent = seg
                prev = pos
            n_new = m_pos - pi
            self._n_nodes += n_new
            self._kv_tokens += added_tokens
            self._n_states += n_new
            self._state_bytes += added_bytes
            self._c["states_inserted"] += n_new
            self._sync(node)  # the attach point lost leaf status (locks, child count)
        walked = path + created if created else path
        clock = self._clock
        for nd in walked:
            clock += 1
            nd.kv_time = clock
        self._clock = clock
        last = walked[-1] if walked else None
        if last is not None and not last.children:
            self._push_leaf(last)
        if not node_touch:
            self._state_touch_path(walked)
        tail = at[-1]
        capped = 0
        if self.max_states_per_path is not None:
            capped = self._apply_path_cap(tail)
        if len(self._heap) > 4 * self._n_nodes + 1024:
            self._rebuild_heap()
        return InsertResult(prefix_len, end * tpe, tail, tuple(new), tuple(existed), capped)

    def _apply_path_cap(self, tail: Node) -> int:
        holders = []
        nd: Node | None = tail
        while nd is not None and nd is not self.root:
            if nd.has_state:
                holders.append(nd)
            nd = nd.parent
        excess = len(holders) - self.max_states_per_path
        capped = 0
        for nd in reversed(holders):
            if excess <= 0:
                break
            if nd is tail or nd.state_lock > 0 or len(nd.children) != 1:
                continue
            self._detach_state(nd, None, count=False)
            self._c["capped"] += 1
            capped += 1
            excess -= 1
        return capped

    def _rebuild_heap(self) -> None:
        heap = []
        stack = list(self.root.children.values())
        while stack:
            nd = stack.pop()
            if nd.children:
                stack.extend(nd.children.values())
            else:
                self._hseq += 1
                heap.append((nd.kv_time, self._hseq, nd.id))
        heapq.heapify(heap)
        self._heap = heap

    # ------------------------------------------------------------------ locks
    def lock_kv(self, node: Node) -> None:
        """Protect the KV of ``node`` and all its ancestors (no-op on the root)."""
        self._check_node(node)
        if node is self.root:
            return
        nd = node
        tpe = self._tpe
        while nd is not self.root:
            if nd.kv_lock == 0:
                self._kv_protected += len(nd.key) * tpe
            nd.kv_lock += 1
            nd = nd.parent
        self._sync(node)

    def unlock_kv(self, node: Node) -> None:
        """Release one ``lock_kv``. A tombstone leaf stays (SGLang ``dec_lock_ref`` only moves
        sizes from protected to evictable; the leaf is evicted later in KV LRU order)."""
        self._check_node(node)
        if node is self.root:
            return
        if node.kv_lock <= 0:
            raise ValueError("node is not KV-locked (unlock_kv without lock_kv)")
        nd = node
        tpe = self._tpe
        while nd is not self.root:
            nd.kv_lock -= 1
            if nd.kv_lock == 0:
                self._kv_protected -= len(nd.key) * tpe
            nd = nd.parent
        self._sync(node)

    def lock_state(self, node: Node) -> None:
        """Protect the checkpoint of ``node`` (and the KV of its path). No-op on the root."""
        self._check_node(node)
        if node is self.root:
            return
        if not node.has_state:
            raise ValueError("node has no state (tombstone): cannot lock_state")
        node.state_lock += 1
        self.lock_kv(node)

    def unlock_state(self, node: Node) -> None:
        """Release one ``lock_state`` (and its KV lock). No-op on the root."""
        self._check_node(node)
        if node is self.root:
            return
        if node.state_lock <= 0:
            raise ValueError("node is not state-locked (unlock_state without lock_state)")
        node.state_lock -= 1
        self.unlock_kv(node)

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
        num = _check_int(num, "num", 0)
        nbytes = _check_int(nbytes, "nbytes", 0)
        acc = _Acc()
        while acc.states < num or acc.state_bytes < nbytes:
            victim = self.lru_state_victim()
            if victim is None:
                break
            self._evict_state(victim, acc)
            self._clock += 1
        return acc.result()

    def evict_kv(self, num_tokens: int) -> Evicted:
        """Evict LRU unlocked leaves (KV + state + tombstone cascade) until ``num_tokens``
        tokens of KV are freed or nothing is evictable."""
        num_tokens = _check_int(num_tokens, "num_tokens", 0)
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

    # ------------------------------------------------------------------ views
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

    def stats(self) -> CacheStats:
        c = self._c
        return CacheStats(
            nodes=self._n_nodes,
            tombstones=self._n_nodes - self._n_states,
            kv_tokens=self._kv_tokens,
            kv_protected=self._kv_protected,
            kv_evictable=self._kv_tokens - self._kv_protected,
            states=self._n_states,
            state_bytes=self._state_bytes,
            states_protected=self._n_sprot,
            state_bytes_protected=self._sprot_bytes,
            states_evictable=self._n_states - self._n_sprot,
            state_bytes_evictable=self._state_bytes - self._sprot_bytes,
            matches=c["matches"],
            state_hits=c["state_hits"],
            token_hits=c["token_hits"],
            states_inserted=c["states_inserted"],
            states_existed=c["states_existed"],
            evicted_states=c["evicted_states"],
            evicted_state_bytes=c["evicted_state_bytes"],
            evicted_kv_tokens=c["evicted_kv_tokens"],
            tombstoned=c["tombstoned"],
            pruned=c["pruned"],
            splits=c["splits"],
            capped=c["capped"],
            clock=self._clock,
        )

    def _walk(self) -> list[tuple[Node, int]]:
        out = []
        stack = [(self.root, 0)]
        while stack:
            nd, d = stack.pop()
            out.append((nd, d))
            stack.extend((c, d + 1) for c in reversed(list(nd.children.values())))
        return out

    def export(self) -> list[NodeView]:
        """All nodes, depth-first with the root first, for drawing."""
        tpe = self._tpe
        now = self._clock
        out = []
        for nd, d in self._walk():
            end = nd.plen * tpe
            out.append(
                NodeView(
                    id=nd.id,
                    parent=-1 if nd.parent is None else nd.parent.id,
                    depth=d,
                    start=end - len(nd.key) * tpe,
                    end=end,
                    key=tuple(nd.key),
                    has_state=nd.has_state,
                    state_bytes=nd.state_bytes,
                    kv_lock=nd.kv_lock if nd is not self.root else 0,
                    state_lock=nd.state_lock,
                    kv_age=now - nd.kv_time if nd is not self.root else 0,
                    state_age=now - nd.state_time if nd.has_state else -1,
                    is_leaf=not nd.children and nd is not self.root,
                )
            )
        return out

    def paths(self) -> list[tuple[tuple, tuple[int, ...]]]:
        """Every root-to-leaf key with its checkpoint positions (tokens); for tests/debug."""
        out = []
        tpe = self._tpe
        stack: list[tuple[Node, tuple, list]] = [(self.root, (), [])]
        while stack:
            nd, prefix, pos = stack.pop()
            key = prefix + nd.key
            ps = pos + [nd.plen * tpe] if nd.has_state else pos
            if not nd.children and nd is not self.root:
                out.append((tuple(key), tuple(ps)))
            for c in nd.children.values():
                stack.append((c, key, ps))
        return out

    # ------------------------------------------------------------------ integrity
    def check_integrity(self) -> None:
        """Verify every invariant in the module docstring; raise ``IntegrityError``."""

        def fail(msg: str) -> None:
            raise IntegrityError(f"radix integrity: {msg}")

        root = self.root
        tpe = self._tpe
        if _NO_CHILDREN:
            fail("the shared empty children dict of leaves was written to")
        if root.has_state or root.key or root.id in self._slru:
            fail("root holds a state, a key or sits in the state LRU")
        nodes = 0
        kv_tokens = kv_prot = 0
        n_states = s_bytes = n_sprot = sprot_bytes = 0
        leaves: set[int] = set()
        state_ids: set[int] = set()
        stack = [root]
        while stack:
            nd = stack.pop()
            if not nd.alive or nd.owner != self._owner:
                fail(f"dead or foreign node {nd.id} reachable")
            csum = 0
            for ck, c in nd.children.items():
                if c.parent is not nd:
                    fail(f"node {c.id}: parent link does not point to {nd.id}")
                if not c.key or len(c.key) % self._epp:
                    fail(f"node {c.id}: edge length {len(c.key)} not a whole number of pages")
                if self._ck(c.key, 0) != ck:
                    fail(f"node {c.id}: filed under {ck!r}, edge starts {self._ck(c.key, 0)!r}")
                if c.plen != nd.plen + len(c.key):
                    fail(f"node {c.id}: plen {c.plen} != parent {nd.plen} + edge {len(c.key)}")
                csum += c.kv_lock
                stack.append(c)
            if nd is root:
                continue
            nodes += 1
            if nd.kv_lock < csum:
                fail(f"node {nd.id}: kv_lock {nd.kv_lock} < children's {csum}")
            if nd.state_lock < 0 or nd.kv_lock < nd.state_lock:
                fail(f"node {nd.id}: locks kv={nd.kv_lock} state={nd.state_lock}")
            if nd.state_lock > 0 and not nd.has_state:
                fail(f"node {nd.id}: state-locked tombstone")
            ntok = len(nd.key) * tpe
            kv_tokens += ntok
            if nd.kv_lock > 0:
                kv_prot += ntok
            if not nd.children:
                leaves.add(nd.id)
            if nd.has_state:
                n_states += 1
                s_bytes += nd.state_bytes
                state_ids.add(nd.id)
                prot = self._sprot_of(nd)
                if prot != nd.sprot:
                    fail(f"node {nd.id}: cached protection {nd.sprot} != {prot}")
                if prot:
                    n_sprot += 1
                    sprot_bytes += nd.state_bytes
                if self._table_on:
                    r = nd.srow
                    if r < 0 or self._st_node[r] is not nd or not self._st_live[r]:
                        fail(f"node {nd.id}: state table row {r} inconsistent")
                    exp = (
                        nd.plen * tpe,
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
                        fail(f"node {nd.id}: state table row {got} != expected {exp}")
            elif nd.srow != -1 or nd.sprot:
                fail(f"tombstone {nd.id} keeps a state row or protection")
        if nodes != self._n_nodes:
            fail(f"node count {self._n_nodes} != {nodes}")
        if (kv_tokens, kv_prot) != (self._kv_tokens, self._kv_protected):
            fail(f"kv sizes {(self._kv_tokens, self._kv_protected)} != {(kv_tokens, kv_prot)}")
        got_s = (self._n_states, self._state_bytes, self._n_sprot, self._sprot_bytes)
        exp_s = (n_states, s_bytes, n_sprot, sprot_bytes)
        if got_s != exp_s:
            fail(f"state sizes {got_s} != {exp_s}")
        st = self.stats()
        if st.kv_evictable + st.kv_protected != st.kv_tokens:
            fail("kv evictable + protected != total")
        if st.state_bytes_evictable + st.state_bytes_protected != st.state_bytes:
            fail("state evictable + protected != total")
        if set(self._slru) != state_ids:
            fail("state LRU does not hold exactly the state nodes")
        times = [nd.state_time for nd in self._slru.values()]
        if any(a >= b for a, b in zip(times, times[1:])):
            fail("state LRU not ordered by access time")
        if self._table_on and int(self._st_live.sum()) != n_states:
            fail("state table live rows != number of states")
        live_ids = {nd.id for nd, _ in self._walk() if nd is not root}
        if set(self._live) != live_ids:
            fail("live-node index does not hold exactly the tree's nodes")
        current = set()
        for t, _, nid in self._heap:
            nd = self._live.get(nid)
            if nd is not None and not nd.children and nd.kv_time == t:
                current.add(nid)
        if current != leaves:
            fail(f"KV leaf heap misses leaves {sorted(leaves - current)[:5]}")
        if self._clock < max([0] + times):
            fail("clock behind a state access time")
