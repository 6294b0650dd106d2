"""Every place the engine and ``serve/`` touch the radix cache, in one adapter.

``CacheOps`` wraps the engine's ``RadixStateCache`` (built by the policy), the policy's state
eviction and the checkpoint pool that holds the tree's states: match, lock / unlock, insert
(the checkpoint slots change owner to "tree"; copies the tree already had are freed), KV and
state eviction, the MLA KV along a matched path, sizes, and the check of the tree's states
against the pool. It speaks the cache protocol (``kda_core.cache.protocol``: ``match_prefix``
/ ``insert_prefix`` / ``lock_handle`` / ``evict`` / ``size_info`` / ``check_integrity``):
callers hold opaque handles, never tree nodes. One exception, ``tree_kv``: the teaching-only
inconsistent restore takes MLA KV up to the token match, past the restore point, which a
consistent engine never needs (it replays), so the protocol does not offer it; it reads the
tree's node API here and nowhere else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kda_core.cache.pool import CheckpointPool
from kda_core.cache.protocol import CacheHandle, Evicted, HandleError, PrefixInsert, PrefixMatch
from kda_core.cache.radix import RadixStateCache

__all__ = ["CacheOps", "kv_slice"]


def kv_slice(payload: Any, start: int, stop: int, length: int) -> Any:
    """The tree's KV payload splitter (rows of an ``[n, n_mla, C]`` array, copied)."""
    return payload[start:stop].copy()


class CacheOps:
    """The radix cache as the engine uses it (see the module docstring)."""

    def __init__(self, policy: Any, checkpoints: CheckpointPool) -> None:
        self.policy = policy
        self.checkpoints = checkpoints
        self.tree: RadixStateCache = policy.make_cache(
            1, on_free_state=self._on_free_state, kv_slice=kv_slice
        )

    def _on_free_state(self, payload: Any, nbytes: int) -> None:
        self.checkpoints.free(payload)

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
        """MLA KV of ids[:upto] along the matched path (upto <= token_match; node API, see the
        module docstring)."""
        nodes = []
        nd = self.tree.match(ids, touch=False).last_node
        while nd is not None and nd is not self.tree.root:
            nodes.append(nd)
            nd = nd.parent
        nodes.reverse()
        parts = [n.kv for n in nodes]
        end = nodes[-1].plen if nodes else 0
        if end < upto:  # the match ends inside an edge: take that edge's head
            child = (nodes[-1] if nodes else self.tree.root).children[ids[end]]
            parts.append(child.kv[: upto - end])
        kv = np.concatenate(parts, axis=0) if parts else empty
        return kv[:upto]

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

    def still_held(self, res: PrefixInsert, ckpts: list[tuple[int, int]]) -> int:
        """New states of an insert still in the tree (the per-path cap may tombstone one the
        same insert added; its slot was freed through ``on_free_state``)."""
        slot_at = dict(ckpts)
        return sum(self.checkpoints.owner(slot_at[p]) is not None for p in res.new)

    # -- eviction ------------------------------------------------------------------------------
    def evict_one_state(self) -> int:
        """Evict one unlocked cached state through the policy. -> states evicted (0: none)."""
        return self.policy.evict_states(self.tree, num=1).states

    def evict_kv(self, n: int) -> Evicted:
        """Evict LRU leaves until ``n`` KV tokens are freed (or nothing is evictable)."""
        return self.tree.evict(kv_tokens=n)

    # -- sizes and integrity -------------------------------------------------------------------
    @property
    def kv_tokens(self) -> int:
        return self.tree.size_info.kv_total

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
        for slot in self.tree.state_payloads():
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
