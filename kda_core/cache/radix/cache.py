"""KDA-aware radix cache: token edges with KV payloads, sparse state checkpoints, tombstones.

A KDA layer cannot be rolled back, so a token-prefix hit is not a state hit: a request
resumes where the recurrent state was saved (a *checkpoint*) and replays the tokens between
that checkpoint and the longest token match. This tree stores both resources apart, after
SGLang's ``MambaRadixCache`` / ``UnifiedRadixCache``: every non-root node owns its edge's KV,
a node MAY own one checkpoint (else it is a *tombstone*); two LRU orders (KV leaves, states
anywhere), lock references (``kv_lock >= state_lock``), a soft per-path checkpoint budget.

Two APIs on one object:

* the cache protocol (``kda_core.cache.protocol.PrefixCache``): ``match_prefix``,
  ``insert_prefix``, ``lock_handle``, ``evict``, ``size_info``, ``check_integrity``, with
  opaque handles (``RadixHandle``) instead of nodes;
* the node API the engine and the simulator still call: ``match``, ``insert``,
  ``lock_kv`` / ``unlock_kv``, ``lock_state`` / ``unlock_state``, ``evict_states``,
  ``evict_kv``, ``evict_state_node``, ``state_table``, ``stats``, ``export``, ``paths``.

Every length is in tokens (``block_keys=True``: one key element = one ``page_size`` block).
Semantics, invariants, design choices and the SGLang / vLLM / Marconi sources: docs/radix.md.

Left out: host tiers (HiCache; ``kda_core.transfer.tiers`` hooks ``before_drop_state``),
speculative ``skip_mamba_match``, Marconi's node merging, thread safety, any clock but a
logical one ticking on every touch.
"""

from __future__ import annotations

from typing import Any
from weakref import ref as _weakref

from kda_core._checks import check_bool
from kda_core.cache.protocol import (
    CacheHandle,
    Evicted,
    HandleError,
    PrefixInsert,
    PrefixMatch,
    SizeInfo,
)
from kda_core.cache.radix.base import _TreeBase
from kda_core.cache.radix.insert import _InsertMixin
from kda_core.cache.radix.integrity import _IntegrityMixin
from kda_core.cache.radix.nodes import _NO_CHILDREN, Node
from kda_core.cache.radix.ops import _OpsMixin
from kda_core.cache.radix.views import _ViewsMixin

__all__ = ["RadixHandle", "RadixStateCache"]

_new_handle = object.__new__


class RadixHandle(CacheHandle):
    """Opaque handle of a ``RadixStateCache`` prefix (a restore point or a matched path).

    Holds its node weakly (an evicted node stays unreachable), the id of the cache that made
    it, what a lock protects (the state and its path's KV, or the KV only) and its own lock
    count (so a double unlock is caught even while other holders lock the same node).
    """

    __slots__ = ("_cache_id", "_node", "_state", "_locks")

    def __init__(self, cache_id: int, node: Node, cached_len: int, state: bool) -> None:
        super().__init__(cached_len)
        self._cache_id = cache_id
        self._node = _weakref(node)
        self._state = state
        self._locks = 0


class RadixStateCache(_OpsMixin, _InsertMixin, _ViewsMixin, _IntegrityMixin, _TreeBase):
    """KDA-aware radix tree (module docstring; semantics and invariants in docs/radix.md).

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

    def __del__(self) -> None:
        # Parent <-> children links make the tree one reference cycle that only the cycle
        # collector frees: a full pass over every node, at some later allocation (0.1-0.2 s
        # after a 170,000-node simulator run). Cutting the links when the cache goes lets
        # reference counting free the nodes at once. Nodes a caller still holds lose their
        # links (they belong to no tree any more).
        live = getattr(self, "_live", None)
        if live:
            for nd in live.values():
                nd.parent = None
                nd.children = _NO_CHILDREN
        root = getattr(self, "root", None)
        if root is not None:
            root.children = _NO_CHILDREN

    # ------------------------------------------------------------------ cache protocol
    def _handle(self, node: Node, state: bool) -> RadixHandle:
        # built without RadixHandle.__init__ (two calls per match, one per insert: hot)
        h = _new_handle(RadixHandle)
        h.cached_len = node.plen * self._tpe
        h._cache_id = self._owner
        h._node = _weakref(node)
        h._state = state
        h._locks = 0
        return h

    def match_prefix(self, key: Any, *, touch: bool = True) -> PrefixMatch:
        """``match`` (never splits) with opaque handles: ``restore`` locks the restore
        point's state and KV (``lock_state``), ``path`` the matched path's KV (``lock_kv``)."""
        if touch is not True:
            check_bool("touch", touch)
        m = self._match(self._check_key(key), touch, False, True)
        return PrefixMatch(
            m.token_match,
            m.restore_at,
            m.state,
            m.state_bytes,
            m.kv,
            m.branch,
            m.mid_edge,
            self._handle(m.node, True),
            self._handle(m.last_node, False),
        )

    def insert_prefix(
        self, key: Any, kv: Any = None, states: Any = (), *, state_bytes: int = 0
    ) -> PrefixInsert:
        """``insert``; ``handle`` (deepest checkpoint) locks like a match's ``restore``."""
        r = self.insert(key, kv, states, state_bytes=state_bytes)
        handle = None if r.node is None else self._handle(r.node, True)
        return PrefixInsert(r.prefix_len, r.inserted_len, r.new, r.existed, r.capped, handle)

    def _check_handle(self, handle: Any) -> Node:
        """The live node behind ``handle``, or a ``HandleError`` saying why there is none."""
        if not isinstance(handle, RadixHandle):
            raise HandleError(
                "handle must be a handle returned by match_prefix / insert_prefix, "
                f"got {type(handle).__name__}"
            )
        if handle._cache_id != self._owner:
            raise HandleError("handle belongs to another cache")
        node = handle._node()
        if node is None or not node.alive:
            raise HandleError("handle is stale: its node was evicted")
        if handle._state and node is not self.root and not node.has_state:
            raise HandleError("handle is stale: its state was evicted (node is a tombstone)")
        return node

    def lock_handle(self, handle: CacheHandle, unlock: bool = False) -> None:
        """Lock (``unlock=False``) or release one lock of ``handle``; a locked prefix is never
        evicted. A restore-point / insert handle locks the state and its path's KV, a path
        handle the KV only; handles at the root (``cached_len == 0``) lock nothing."""
        if unlock is not False and unlock is not True:
            check_bool("unlock", unlock)
        node = self._check_handle(handle)
        assert isinstance(handle, RadixHandle)
        if unlock and handle._locks <= 0:
            raise HandleError("handle is not locked (unlock without lock, or a double unlock)")
        # the handle is validated: the node is live, of this cache, and holds the state a
        # state handle needs, so the unchecked node operations apply (each asserts its rule)
        if node is not self.root:
            if handle._state:
                (self._unlock_state_node if unlock else self._lock_state_node)(node)
            else:
                (self._unlock_kv_node if unlock else self._lock_kv_node)(node)
        handle._locks += -1 if unlock else 1

    def evict(self, kv_tokens: int = 0, *, states: int = 0, state_bytes: int = 0) -> Evicted:
        """LRU: ``evict_states(states, state_bytes)`` first, then ``evict_kv(kv_tokens)``."""
        a = self.evict_states(states, state_bytes)
        b = self.evict_kv(kv_tokens)
        return Evicted(*(x + y for x, y in zip(a, b)))

    @property
    def size_info(self) -> SizeInfo:
        return SizeInfo(
            kv_evictable=self._kv_tokens - self._kv_protected,
            kv_protected=self._kv_protected,
            state_bytes_evictable=self._state_bytes - self._sprot_bytes,
            state_bytes_protected=self._sprot_bytes,
        )
