"""Radix insert: checkpoints at token positions, the key cut at the deepest one, path cap.

The walk down the existing path splits edges where the key diverges or a checkpoint falls
inside an edge; checkpoints on existing nodes are kept (``existed``) or revive tombstones;
the rest become a new chain, one node per checkpoint (docs/radix.md, "insert").
"""

from __future__ import annotations

import heapq
import numbers
from collections.abc import Iterable
from typing import Any

from kda_core._checks import check_int
from kda_core.cache.radix.nodes import _NO_CHILDREN, InsertResult, Node, _common_prefix


class _InsertMixin:
    """insert part of ``RadixStateCache``."""

    def _parse_states(self, states: Any, n_elems: int, default_bytes: int) -> list:
        fast = self._parse_states_fast(states, n_elems, default_bytes)
        if fast is not None:
            return fast
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
                pos = check_int("states position", pos, 1, max(max_pos, 1))
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
                    nb = check_int("states nbytes", nb, 0)
            out.append((pos // tpe, it[1], nb))
        if any(a[0] >= b[0] for a, b in zip(out, out[1:])):
            out.sort(key=lambda x: x[0])
            for a, b in zip(out, out[1:]):
                if a[0] == b[0]:
                    raise ValueError(f"states positions must be unique, got {a[0] * tpe} twice")
        return out

    def _parse_states_fast(self, states: Any, n_elems: int, default_bytes: int) -> list | None:
        """``_parse_states`` for the common call (a list / tuple of ``(position, payload)``
        pairs, int positions strictly ascending and valid) in one lean pass; None at the first
        entry that is anything else, and the per-entry loop then checks (and words the error
        of) the whole call."""
        if type(states) is not list and type(states) is not tuple:
            return None
        tpe, page = self._tpe, self.page_size
        max_pos = n_elems * tpe
        prev = 0
        out = []
        for it in states:
            if type(it) is not tuple or len(it) != 2:
                return None
            pos = it[0]
            if type(pos) is not int or not prev < pos <= max_pos or pos % page:
                return None
            out.append((pos // tpe, it[1], default_bytes))
            prev = pos
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
        k = self._check_key(key)
        state_bytes = check_int("state_bytes", state_bytes, 0)
        epp, tpe = self._epp, self._tpe
        sts = self._parse_states(states, len(k) - len(k) % epp, state_bytes)
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
        at: list[Node | None] = [None] * len(sts)
        node, path, i, pi = self._insert_walk(k, end, [s[0] for s in sts], at)
        new, existed = self._insert_existing(sts, at, pi)
        if pi < len(sts):
            path = path + self._insert_chain(k, kv, kv_len, sts, at, pi, node, i, new)
        self._insert_refresh(path)
        tail = at[-1]
        capped = 0
        if self.max_states_per_path is not None:
            capped = self._apply_path_cap(tail)
        if len(self._heap) > 4 * self._n_nodes + 1024:
            self._rebuild_heap()
        return InsertResult(i * tpe, end * tpe, tail, tuple(new), tuple(existed), capped)

    def _insert_walk(
        self, k: tuple, end: int, positions: list[int], at: list[Node | None]
    ) -> tuple[Node, list[Node], int, int]:
        """Walk the existing path of ``k[:end]``, splitting edges where the key diverges or a
        checkpoint position falls inside an edge. Fills ``at`` with the nodes found at
        checkpoint positions; returns (deepest node, path, elements matched, checkpoints found).
        """
        epp = self._epp
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
            if le <= end - i and (le == epp or k[i : i + le] == e):  # one page: found whole
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
        return node, path, i, pi

    def _insert_existing(
        self, sts: list, at: list[Node | None], pi: int
    ) -> tuple[list[int], list[int]]:
        """Checkpoints that fall on existing nodes, root-first: kept or revive a tombstone."""
        tpe = self._tpe
        new: list[int] = []
        existed: list[int] = []
        node_touch = self.state_touch == "node"
        for j in range(pi):
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
        return new, existed

    def _insert_chain(
        self,
        k: tuple,
        kv: Any,
        kv_len: int,
        sts: list,
        at: list[Node | None],
        pi: int,
        node: Node,
        prev: int,
        new: list[int],
    ) -> list[Node]:
        """The new chain below ``node``: one node per remaining checkpoint, attached as made."""
        epp, tpe = self._epp, self._tpe
        parent = node
        anc = None
        if parent.has_state:
            anc = parent.plen * tpe
        elif parent is self.root:
            anc = 0
        slicer = self._kv_slice
        owner = self._owner
        slru = self._slru
        table_on = self._table_on
        live = self._live
        nid = self._next_id
        clock = self._clock
        added_tokens = added_bytes = 0
        created: list[Node] = []
        for j in range(pi, len(sts)):
            pos, payload, nb = sts[j]
            clock += 1
            seg = Node(
                nid,
                owner,
                k[prev:pos],
                None if kv is None else slicer(kv, prev * tpe, pos * tpe, kv_len),
                parent,
                pos,
                True,
                payload,
                nb,
                clock,
            )
            live[nid] = seg
            first = k[prev] if epp == 1 else k[prev : prev + epp]
            if parent.children is _NO_CHILDREN:
                parent.children = {first: seg}
            else:
                parent.children[first] = seg
            added_tokens += (pos - prev) * tpe
            added_bytes += nb
            slru[nid] = seg
            nid += 1
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
        self._next_id = nid
        self._clock = clock
        n_new = len(sts) - pi
        self._n_nodes += n_new
        self._kv_tokens += added_tokens
        self._n_states += n_new
        self._state_bytes += added_bytes
        self._c["states_inserted"] += n_new
        self._sync(node)  # the attach point lost leaf status (locks, child count)
        return created

    def _insert_refresh(self, walked: list[Node]) -> None:
        """Refresh the KV order along the inserted path (and the states in the path modes)."""
        clock = self._clock
        for nd in walked:
            clock += 1
            nd.kv_time = clock
        self._clock = clock
        last = walked[-1] if walked else None
        if last is not None and not last.children:
            self._push_leaf(last)
        if self.state_touch != "node":
            self._state_touch_path(walked)

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
