"""``RadixStateCache``: the KDA-aware radix cache behind the cache protocol (SGLang 0.5.23's
``UnifiedRadixCache``, earlier releases' ``MambaRadixCache``): every non-root node owns its
edge's KV and MAY own one checkpoint (else it is a tombstone); two LRU orders (KV leaves, states
anywhere), lock references, a soft per-path checkpoint budget. Lengths are tokens. docs/radix.md."""

from __future__ import annotations

import numbers
from typing import Any
from weakref import ref as _weakref

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.cache.protocol import (
    CacheHandle,
    Evicted,
    HandleError,
    PrefixInsert,
    PrefixMatch,
    SizeInfo,
)
from kda_core.cache.radix import _evict, _insert, _integrity
from kda_core.cache.radix._node import NO_CHILDREN, CacheStats, Node, NodeView
from kda_core.cache.radix._tree import RadixTree

__all__ = ["RadixStateCache"]

_new_handle = object.__new__
_MAX_KEY_LEN = 1 << 22  # elements of a key; caps memory


class _RadixHandle(CacheHandle):
    """A restore point or a matched path: its node held weakly (an evicted node stays
    unreachable), its cache's id, whether a lock takes the state too, and its own lock count
    (a double unlock is caught even while other holders lock the same node)."""

    __slots__ = ("_cache_id", "_node", "_state", "_locks")


class RadixStateCache:
    """KDA-aware radix tree behind the cache protocol (module docstring).

    Args:
        page_size: tokens per page (1 for the engine; 512 for Mooncake block traces), in
            [1, 65536]. Edges split only at page boundaries.
        block_keys: key elements are block hashes (one element = one page of tokens).
        grid: alignment of the branch hint in tokens; default ``lcm(64, page_size)``
            (SGLang ``lcm(mamba_cache_chunk_size, page)``); must be a multiple of page_size.
        max_states_per_path: soft cap on checkpoints per root-to-node path (None = no cap).
        state_touch: which states a hit refreshes: "node", "path" or "path_tail_first".
        on_free_kv: called as ``on_free_kv(payload, n_tokens)`` when the tree drops KV.
        on_free_state: called as ``on_free_state(payload, n_bytes)`` when it drops a state.
        before_drop: called with a ``DroppedState`` (the path's tokens and KV, the state)
            before a state is dropped, while still attached: a lower tier may copy it.
        kv_slice: ``kv_slice(payload, start, stop, length) -> payload`` for splitting KV.
        victim: ``victim(StateRows) -> row`` (-1: none) picks each state ``evict`` frees,
            instead of the LRU order (a policy's own choice: Marconi); the cache then keeps
            the state table it reads.
    """

    def __init__(self, page_size: int = 1, **options: Any) -> None:
        self._options = dict(options, page_size=page_size)  # reset builds a fresh tree
        self._tree = RadixTree(**self._options)
        self.grid = self._tree.grid  # the branch hint's alignment (its default is derived)

    def __del__(self) -> None:
        self._unlink()

    def _unlink(self) -> None:
        # Parent <-> children links make the tree one reference cycle that only the cycle
        # collector frees, at some later allocation (0.1-0.2 s after a 170,000-node simulator
        # run); cut, reference counting frees the nodes at once.
        tree = getattr(self, "_tree", None)
        if tree is not None:
            for nd in tree.live.values():
                nd.parent = None
                nd.children = NO_CHILDREN
            tree.root.children = NO_CHILDREN

    # ------------------------------------------------------------------ sizes (O(1))
    @property
    def kv_tokens(self) -> int:
        return self._tree.kv_tokens

    @property
    def state_bytes(self) -> int:
        return self._tree.state_bytes

    @property
    def n_states(self) -> int:
        return len(self._tree.slru)

    @property
    def n_nodes(self) -> int:
        """Non-root nodes."""
        return len(self._tree.live)

    @property
    def size_info(self) -> SizeInfo:
        s = self.stats()  # holds the four sizes under the same names
        return SizeInfo(*(getattr(s, f) for f in SizeInfo._fields))

    # ------------------------------------------------------------------ the protocol
    def _check_key(self, key: Any) -> tuple:
        if isinstance(key, np.ndarray):
            # dtype.kind, not np.issubdtype: the simulator passes two int64 slices a request
            if key.ndim != 1 or key.dtype.kind not in "iu":
                raise ValueError(f"key must be a 1-D integer array, got {key.dtype} {key.shape}")
            k = tuple(key.tolist())
        elif isinstance(key, (list, tuple, range)):
            k = tuple(key)
            types = set(map(type, k))
            if types - {int}:
                if not all(issubclass(t, numbers.Integral) and t is not bool for t in types):
                    raise ValueError("key must contain ints only")
                k = tuple(int(x) for x in k)
        else:
            raise ValueError("key must be a list, tuple, range or 1-D int array")
        if len(k) > _MAX_KEY_LEN:
            raise ValueError(f"key length must be <= {_MAX_KEY_LEN}, got {len(k)}")
        return k[: len(k) - len(k) % self._tree.epp]  # whole pages only

    def _handle(self, node: Node, state: bool) -> _RadixHandle:
        # built without __init__ (two per match, one per insert: hot)
        h = _new_handle(_RadixHandle)
        h.cached_len = node.plen * self._tree.tpe
        h._cache_id = self._tree.owner
        h._node = _weakref(node)
        h._state = state
        h._locks = 0
        return h

    def match_prefix(self, key: Any, *, touch: bool = True, split: bool = False) -> PrefixMatch:
        """Longest token match and restore point of ``key`` (truncated to whole pages).
        ``touch`` refreshes the KV of the path up to the restore point and the states per
        ``state_touch``; ``split`` splits an edge the match ends inside, as SGLang's
        ``match_prefix`` does (the upper half becomes a tombstone; ``path`` names it)."""
        if touch is not True:
            check_bool("touch", touch)
        if split is not False:
            check_bool("split", split)
        tm, ra, node, kv, branch, mid, last = self._tree.match(self._check_key(key), touch, split)
        restore, path = self._handle(node, True), self._handle(last, False)
        return PrefixMatch(tm, ra, node.state, node.state_bytes, kv, branch, mid, restore, path)

    def insert_prefix(
        self, key: Any, kv: Any = None, states: Any = (), *, state_bytes: int = 0
    ) -> PrefixInsert:
        """Insert ``key`` with its KV (the whole key's, sliced per node, or None) and the
        checkpoints ``states``: ``{position: payload}`` or ``(position, payload[, nbytes])``,
        positions in tokens, multiples of page_size, in [1, len(key)]; ``state_bytes`` sizes
        entries that give none. The key is cut at the deepest checkpoint; tombstones there are
        revived; an insert that stores a state applies the per-path cap; ``existed``
        checkpoints stay the caller's to free."""
        t = self._tree
        k = self._check_key(key)
        nb = check_int("state_bytes", state_bytes, 0)
        sts = _insert.parse_states(t, states, len(k), nb)
        cached, inserted, tail, new, existed, capped = _insert.insert(t, k, kv, sts)
        handle = None if tail is None else self._handle(tail, True)
        return PrefixInsert(cached, inserted, new, existed, capped, handle)

    def lock_handle(self, handle: CacheHandle, unlock: bool = False) -> None:
        """Lock or release one lock of ``handle``: a restore-point / insert handle locks the
        state and its path's KV, a path handle the KV only, a root handle nothing. A foreign,
        stale or unlocked handle raises ``HandleError`` saying which."""
        if unlock is not False and unlock is not True:
            check_bool("unlock", unlock)
        if not isinstance(handle, _RadixHandle):
            raise HandleError(
                "handle must be a handle returned by match_prefix / insert_prefix, "
                f"got {type(handle).__name__}"
            )
        t = self._tree
        if handle._cache_id != t.owner:
            raise HandleError("handle belongs to another cache")
        node = handle._node()
        if node is None or (node.parent is None and node is not t.root):
            raise HandleError("handle is stale: its node was evicted")
        if handle._state and node is not t.root and not node.has_state:
            raise HandleError("handle is stale: its state was evicted (node is a tombstone)")
        if unlock and handle._locks <= 0:
            raise HandleError("handle is not locked (unlock without lock, or a double unlock)")
        if node is not t.root:
            t.lock(node, unlock, handle._state)
        handle._locks += -1 if unlock else 1

    def evict(self, kv_tokens: int = 0, *, states: int = 0, state_bytes: int = 0) -> Evicted:
        """Free states first (LRU, or the ``victim`` hook's choice) until ``states`` states
        and ``state_bytes`` bytes are freed, then LRU KV leaves until ``kv_tokens`` tokens
        are; stops early when nothing is evictable and reports what it freed."""
        kv_tokens = check_int("kv_tokens", kv_tokens, 0)
        states = check_int("states", states, 0)
        state_bytes = check_int("state_bytes", state_bytes, 0)
        return _evict.evict(self._tree, kv_tokens, states, state_bytes)

    def read_kv(self, key: Any, length: int) -> tuple:
        """The KV payloads covering ``key[:length]`` root first, the last one cut with
        ``kv_slice`` (``length`` at most the key's token match; read-only: nothing touched)."""
        t = self._tree
        k = self._check_key(key)
        n = check_int("length", length, 0, len(k) * t.tpe) // t.tpe
        out, node, i = [], t.root, 0
        while i < n:
            child = node.children.get(t.first(k, i))
            if child is None or k[i : i + len(child.key)][: n - i] != child.key[: n - i]:
                raise ValueError(f"length {length} runs past the cached prefix of key")
            le, kv = len(child.key), child.kv
            out.append(kv if n - i >= le else t.kv_slice(kv, 0, (n - i) * t.tpe, le * t.tpe))
            node, i = child, i + le
        return tuple(out)

    def reset(self) -> int:
        """Drop every node (SGLang's flush, mini-sglang's ``reset``): each state and each
        edge's KV goes through ``on_free_state`` / ``on_free_kv`` (not ``before_drop``).
        Handles made before are foreign afterwards. -> states dropped."""
        t = self._tree
        n = len(t.slru)
        for nd in list(t.live.values()):
            if nd.has_state and t.on_free_state is not None:
                t.on_free_state(nd.state, nd.state_bytes)
            if t.on_free_kv is not None:
                t.on_free_kv(nd.kv, len(nd.key) * t.tpe)
        self._unlink()
        self._tree = RadixTree(**self._options)
        return n

    def check_integrity(self) -> None:
        """Verify every invariant (docs/radix.md); raise ``IntegrityError``."""
        _integrity.check(self._tree)

    # ------------------------------------------------------------------ read-only views
    def export(self) -> list[NodeView]:
        """All nodes, depth-first with the root first, for drawing."""
        t = self._tree
        tpe, now, root = t.tpe, t.clock, t.root
        out = []
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            nd, d = stack.pop()
            stack.extend((c, d + 1) for c in reversed(list(nd.children.values())))
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
                    kv_lock=nd.kv_lock,
                    state_lock=nd.state_lock,
                    kv_age=now - nd.kv_time if nd is not root else 0,
                    state_age=now - nd.state_time if nd.has_state else -1,
                    is_leaf=not nd.children and nd is not root,
                    state=nd.state,
                    kv=nd.kv,
                )
            )
        return out

    def stats(self) -> CacheStats:
        """Sizes and event counters."""
        t = self._tree
        nodes, states = len(t.live), len(t.slru)
        return CacheStats(
            nodes=nodes,
            tombstones=nodes - states,
            kv_tokens=t.kv_tokens,
            kv_protected=t.kv_protected,
            kv_evictable=t.kv_tokens - t.kv_protected,
            states=states,
            state_bytes=t.state_bytes,
            states_protected=t.n_sprot,
            state_bytes_protected=t.sprot_bytes,
            states_evictable=states - t.n_sprot,
            state_bytes_evictable=t.state_bytes - t.sprot_bytes,
            **t.counts,
            clock=t.clock,
        )
