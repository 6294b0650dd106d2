"""Every place the engine and ``serve/`` touch the radix cache, in one adapter.

``CacheOps`` wraps the engine's ``RadixStateCache`` (built by the policy, which may pick the
states it evicts) and the checkpoint pool that holds the tree's states: match, lock / unlock,
insert (the checkpoint slots change owner to "tree"; copies the tree already had are freed),
KV and state eviction, the MLA KV along a matched path, sizes, and the check of the tree's
states against the pool. It counts the states the tree frees (``frees``, ``freed_at``), so a
request can tell which of the checkpoints it inserted are still there when it finishes. It
speaks the cache protocol (``kda_core.cache.protocol``): callers hold opaque handles, never
tree nodes. The teaching-only inconsistent restore takes MLA KV up to the token match, past
the restore point (a consistent engine never needs it: it replays); ``tree_kv`` reads it from
the read-only ``export`` view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core.cache.pool import CheckpointPool
from kda_core.cache.protocol import (
    CacheHandle,
    DroppedState,
    Evicted,
    HandleError,
    PrefixInsert,
    PrefixMatch,
)
from kda_core.cache.radix import RadixStateCache

__all__ = ["CacheOps", "kv_slice"]


def kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    """The tree's KV payload splitter (rows of an ``[n, n_mla, C]`` array, copied)."""
    return payload[start:stop].copy()


class CacheOps:
    """The radix cache as the engine uses it (see the module docstring)."""

    def __init__(
        self,
        policy: Any,
        checkpoints: CheckpointPool,
        before_drop: Callable[[DroppedState], Any] | None = None,
    ) -> None:
        self.policy = policy
        self.checkpoints = checkpoints
        self.before_drop = before_drop
        self.frees = 0  # states the tree has freed so far
        self.freed_at: dict[int, int] = {}  # checkpoint slot -> ``frees`` when last freed
        self.tree: RadixStateCache = self._new_tree()

    def _new_tree(self) -> RadixStateCache:
        return self.policy.make_cache(
            1,
            on_free_state=self._on_free_state,
            kv_slice=kv_slice,
            before_drop=None if self.before_drop is None else self._before_drop,
        )

    def clear(self) -> int:
        """Drop the whole tree and free every checkpoint slot it held (SGLang's flush:
        ``MambaRadixCache.reset`` and ``HybridReqToTokenPool.clear``, which also clears the
        INT8 checkpoint pool). No state is offered to ``before_drop``. -> slots freed."""
        held = sorted(s for s, o in self.checkpoints.owned().items() if o == "tree")
        for slot in held:
            self._on_free_state(slot, 0)
        self.tree = self._new_tree()
        return len(held)

    def _on_free_state(self, payload: Any, nbytes: int) -> None:
        self.frees += 1
        self.freed_at[payload] = self.frees
        self.checkpoints.free(payload)

    def _before_drop(self, d: DroppedState) -> None:
        """The caller's hook sees the state as arrays (S, conv), not as a pool slot."""
        assert self.before_drop is not None
        self.before_drop(d._replace(state=self.checkpoints.buffers(d.state)))

    # -- lookups and locks -------------------------------------------------------------------
    def match(self, ids: list[int], *, touch: bool = True) -> PrefixMatch:
        return self.tree.match_prefix(ids, touch=touch)

    def lock(self, handle: CacheHandle) -> None:
        self.tree.lock_handle(handle)

    def unlock(self, handle: CacheHandle) -> None:
        self.tree.lock_handle(handle, unlock=True)

    def try_lock(self, handle: CacheHandle | None) -> bool:
        """Lock an insert's checkpoint handle if its state is still in the tree (the per-path
        cap may have tombstoned it during the same insert). -> locked?"""
        if handle is None:
            return False
        try:
            self.tree.lock_handle(handle)
        except HandleError:  # stale: the state this handle names is gone
            return False
        return True

    def path_kv(self, m: Any) -> np.ndarray:
        """MLA KV of ``[0, m.restore_at)`` (the matched checkpoint's path)."""
        return np.concatenate(m.kv, axis=0)

    def tree_kv(self, ids: list[int], upto: int, empty: np.ndarray) -> np.ndarray:
        """MLA KV of ``ids[:upto]`` as the tree holds it (``upto`` <= the token match)."""
        kids: dict[int, list] = {}
        for v in self.tree.export():
            kids.setdefault(v.parent, []).append(v)
        parts, pos, node = [], 0, kids[-1][0].id  # the root's view is the only parentless one
        while pos < upto:
            child = next(v for v in kids[node] if v.key[0] == ids[pos])
            parts.append(child.kv[: upto - pos])
            pos, node = child.end, child.id
        return np.concatenate(parts, axis=0) if parts else empty

    # -- insert --------------------------------------------------------------------------------
    def insert(
        self, tokens: list[int], kv: np.ndarray, ckpts: list[tuple[int, int]]
    ) -> PrefixInsert:
        """Insert ``tokens`` / ``kv`` with checkpoints ``(position, checkpoint slot)`` (sorted
        here); their slots go to the tree, the ones it had already are freed. -> the insert
        result (``.new``, ``.existed`` positions, ``.handle`` of the deepest checkpoint)."""
        ckpts.sort()
        for _, slot in ckpts:
            self.checkpoints.set_owner(slot, "tree")
        # (position, slot) pairs with one state_bytes: the tree's lean parse of the common call
        res = self.tree.insert_prefix(tokens, kv, ckpts, state_bytes=self.checkpoints.slot_bytes)
        slot_at = dict(ckpts)
        for p in res.existed:
            self.checkpoints.free(slot_at[p])
        return res

    def still_held(self, inserted: list[tuple[int, int]]) -> int:
        """How many of these (slot, ``frees`` when inserted) the tree still holds."""
        freed_at = self.freed_at
        return sum(freed_at.get(slot, -1) <= n for slot, n in inserted)

    # -- eviction ------------------------------------------------------------------------------
    def evict_one_state(self) -> int:
        """Evict one unlocked cached state (the policy's choice). -> states evicted (0: none)."""
        return self.tree.evict(states=1).states

    def evict_kv(self, n: int) -> Evicted:
        """Evict LRU leaves until ``n`` KV tokens are freed (or nothing is evictable)."""
        return self.tree.evict(kv_tokens=n)

    # -- sizes and integrity -------------------------------------------------------------------
    @property
    def kv_tokens(self) -> int:
        return self.tree.kv_tokens

    @property
    def n_states(self) -> int:
        return self.tree.n_states

    @property
    def n_nodes(self) -> int:
        return self.tree.n_nodes

    def check_integrity(self) -> None:
        """The tree's own invariants, and its states are exactly the checkpoint slots owned by
        "tree"."""
        self.tree.check_integrity()
        tree_slots = set()
        for slot in (v.state for v in self.tree.export() if v.has_state):
            if slot in tree_slots:
                raise AssertionError(f"engine: checkpoint slot {slot} held twice")
            tree_slots.add(slot)
        ck = self.checkpoints
        owned = {s for s, o in ck.owned().items() if o == "tree"}
        if owned != tree_slots or ck.n_used != len(tree_slots):
            raise AssertionError(
                f"engine: tree holds {len(tree_slots)} states, checkpoint pool "
                f"{ck.n_used} slots ({len(owned)} owned by the tree)"
            )
