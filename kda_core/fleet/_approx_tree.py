"""SGLang router's approximate multi-tenant tree (sgl-project/sglang sgl-router/src/policies/
tree.rs ``Tree``): one prefix tree over the texts routed so far, each node holding the tenants
(workers) whose requests passed through it with their last access time, and a per-tenant
character count.

The lab's tree is a trie over trace pages (one "character" = one page), which answers
``prefix_match`` exactly as the Rust radix tree does (an edge is only ever shared whole by the
tenants on it, since an insert that leaves it mid-way splits it). Where ``prefix_match`` ends
on a node several tenants share, the Rust code takes the first key of a ``DashMap`` (no defined
order); the lab takes the most recently used tenant (then the lowest index), a deterministic
choice of its own. ``smallest_tenant`` is ``get_smallest_tenant`` (fewest characters; ties:
lowest index). Left out: the background LRU eviction above ``max_tree_size`` characters per
tenant (2**26 by default, ``RouterArgs``: far above the traces here).
"""

from __future__ import annotations


class _Node:
    __slots__ = ("children", "tenants")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.tenants: dict[int, int] = {}  # tenant -> last access (a logical clock)


class ApproxTree:
    """The router's approximate tree over page sequences, tenants ``0 .. n - 1``."""

    __slots__ = ("root", "chars", "clock")

    def __init__(self, n_tenants: int) -> None:
        self.root = _Node()
        self.chars = [0] * n_tenants
        self.clock = 0
        for t in range(n_tenants):
            self.root.tenants[t] = 0

    def insert(self, text: list[int], tenant: int) -> None:
        """``Tree::insert``: every node on the path gets the tenant (its count grows by the
        characters it newly covers) and the current time."""
        self.clock += 1
        now = self.clock
        node = self.root
        node.tenants[tenant] = now
        added = 0
        for ch in text:
            nxt = node.children.get(ch)
            if nxt is None:
                nxt = _Node()
                node.children[ch] = nxt
            node = nxt
            if tenant not in node.tenants:
                added += 1
            node.tenants[tenant] = now
        self.chars[tenant] += added

    def prefix_match(self, text: list[int]) -> tuple[int, int]:
        """``Tree::prefix_match``: (characters matched, the tenant at the deepest match), the
        tenant's path refreshed; (0, -1) on an empty tree."""
        node = self.root
        n = 0
        for ch in text:
            nxt = node.children.get(ch)
            if nxt is None:
                break
            node = nxt
            n += 1
        if n == 0:
            return 0, -1
        tenant = max(node.tenants.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        self._touch(text[:n], tenant)
        return n, tenant

    def match_tenant(self, text: list[int], tenant: int) -> int:
        """``Tree::prefix_match_tenant`` without the refresh: characters matched on nodes the
        tenant holds."""
        node = self.root
        n = 0
        for ch in text:
            nxt = node.children.get(ch)
            if nxt is None or tenant not in nxt.tenants:
                break
            node = nxt
            n += 1
        return n

    def _touch(self, text: list[int], tenant: int) -> None:
        self.clock += 1
        node = self.root
        node.tenants[tenant] = self.clock
        for ch in text:
            node = node.children[ch]
            node.tenants[tenant] = self.clock

    def smallest_tenant(self) -> int:
        """``get_smallest_tenant``: the tenant with the fewest characters."""
        return min(range(len(self.chars)), key=lambda t: (self.chars[t], t))
