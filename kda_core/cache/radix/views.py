"""Read-only views of a radix cache: counters, the node list for drawing, root-to-leaf paths."""

from __future__ import annotations

from typing import Any

from kda_core.cache.radix.nodes import CacheStats, Node, NodeView


class _ViewsMixin:
    """stats / export / paths part of ``RadixStateCache``."""

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

    def state_payloads(self) -> list[Any]:
        """The payload of every stored state, depth-first (e.g. a caller checking that its
        own slot table owns exactly these)."""
        return [nd.state for nd, _ in self._walk() if nd.has_state]
