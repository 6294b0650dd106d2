"""Radix insert: checkpoints at token positions, the key cut at the deepest one, the per-path
cap (docs/radix.md); ``parse_states`` has a lean path for the common call."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from kda_core._checks import check_int
from kda_core.cache.radix._node import NO_CHILDREN, Node, common_prefix
from kda_core.cache.radix._tree import RadixTree


def parse_states_fast(tree: RadixTree, states: Any, n_elems: int, nbytes: int) -> list | None:
    """``parse_states`` for the common call (a list / tuple of ``(position, payload)`` pairs,
    int positions strictly ascending and valid) in one lean pass; None at the first entry
    that is anything else (the per-entry loop then checks, and words the error of, the call)."""
    if type(states) is not list and type(states) is not tuple:
        return None
    tpe, page = tree.tpe, tree.page_size
    max_pos = n_elems * tpe
    prev = 0
    out = []
    for it in states:
        if type(it) is not tuple or len(it) != 2:
            return None
        pos = it[0]
        if type(pos) is not int or not prev < pos <= max_pos or pos % page:
            return None
        out.append((pos // tpe, it[1], nbytes))
        prev = pos
    return out


def parse_states(tree: RadixTree, states: Any, n_elems: int, nbytes: int) -> list:
    """``states`` as ``[(position in key elements, payload, nbytes)]``, ascending and unique;
    ``nbytes`` is the size of entries that give none. Raises ``ValueError``."""
    fast = parse_states_fast(tree, states, n_elems, nbytes)
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
    tpe, page = tree.tpe, tree.page_size
    max_pos = n_elems * tpe
    for it in items:
        if type(it) is not tuple or len(it) not in (2, 3):
            raise ValueError("states entries must be (position, payload[, nbytes]) tuples")
        pos = check_int("states position", it[0], 1, max(max_pos, 1))
        if pos > max_pos:
            raise ValueError(f"states position must be <= key length {max_pos}, got {pos}")
        if pos % page:
            raise ValueError(f"states position must be a multiple of page_size={page}, got {pos}")
        nb = nbytes if len(it) == 2 else check_int("states nbytes", it[2], 0)
        out.append((pos // tpe, it[1], nb))
    out.sort(key=lambda x: x[0])
    for a, b in zip(out, out[1:]):
        if a[0] == b[0]:
            raise ValueError(f"states positions must be unique, got {a[0] * tpe} twice")
    return out


def insert(tree: RadixTree, k: tuple, kv: Any, sts: list) -> tuple:
    """Insert the checked key ``k`` (whole pages) with checkpoints ``sts`` (``parse_states``)
    -> (tokens cached before, tokens inserted, deepest checkpoint node or None, new
    positions, existed positions, states capped)."""
    tpe = tree.tpe
    if not sts:
        return tree.match(k, False, False, False)[0], 0, None, (), (), 0
    end = sts[-1][0]
    if hasattr(kv, "__len__") and len(kv) < end * tpe:  # None and numbers have no length
        raise ValueError(
            f"kv must cover the inserted key ({end * tpe} tokens), got length {len(kv)}"
        )
    kv_len = len(k) * tpe
    k = k[:end]
    node, path, i, found = _walk(tree, k, [s[0] for s in sts])
    new: list[int] = []
    existed: list[int] = []
    for (pos, payload, nb), nd in zip(sts, found):  # existing nodes: kept, or revived
        if nd.has_state:
            existed.append(pos * tpe)
            tree.counts["states_existed"] += 1
            if tree.state_touch == "node":
                tree.touch_states([nd])
        else:
            tree.attach_state(nd, payload, nb)
            new.append(pos * tpe)
    if len(found) < len(sts):
        path += _chain(tree, k, kv, kv_len, sts[len(found) :], node, i)
        new += [s[0] * tpe for s in sts[len(found) :]]
    tree.touch_kv(path)  # the whole inserted path; its last node is the deepest checkpoint
    if tree.state_touch != "node":
        tree.touch_states(path)
    tail = path[-1]
    capped = 0 if tree.max_states_per_path is None or not new else _cap_path(tree, tail)
    if len(tree.heap) > 4 * len(tree.live) + 1024:  # stale entries pile up as leaves are touched
        tree.heap = [(nd.kv_time, nd.id) for nd in tree.live.values() if not nd.children]
        heapq.heapify(tree.heap)
    return i * tpe, end * tpe, tail, tuple(new), tuple(existed), capped


def _walk(tree: RadixTree, k: tuple, positions: list[int]) -> tuple[Node, list[Node], int, list]:
    """Walk the existing path of ``k``, splitting edges where the key diverges or a checkpoint
    position falls inside an edge -> (deepest node, path, elements matched, the nodes found at
    the first checkpoint positions)."""
    epp, end = tree.epp, len(k)
    i = 0
    node = tree.root
    path: list[Node] = []
    found: list[Node] = []
    while i < end:
        child = node.children.get(k[i] if epp == 1 else k[i : i + epp])
        if child is None:
            break
        e = child.key
        le = len(e)
        if le <= end - i and (le == epp or k[i : i + le] == e):  # one page: found whole
            c = le
        else:
            c = common_prefix(e, k, i, min(le, end - i))
            c -= c % epp
            if c == 0:
                break
        nxt = positions[len(found)]  # the next checkpoint position
        c = min(c, nxt - i)
        if c < le:
            child = tree.split(child, c)
        i += c
        node = child
        path.append(child)
        if nxt == i:
            found.append(child)
    return node, path, i, found


def _chain(
    tree: RadixTree, k: tuple, kv: Any, kv_len: int, sts: list, node: Node, prev: int
) -> list[Node]:
    """The new chain below ``node`` (at element ``prev``): one node per checkpoint of ``sts``,
    each made with its state (``attach_state`` inlined: one pass, the sizes summed once)."""
    epp, tpe, slicer = tree.epp, tree.tpe, tree.kv_slice
    slru, live, table = tree.slru, tree.live, tree.table
    parent, start = node, prev
    nid, clock = tree.next_id, tree.clock
    created: list[Node] = []
    for pos, payload, nb in sts:
        clock += 1
        piece = None if kv is None else slicer(kv, prev * tpe, pos * tpe, kv_len)
        seg = Node(nid, k[prev:pos], piece, parent, pos)
        seg.has_state, seg.state, seg.state_bytes, seg.state_time = True, payload, nb, clock
        live[nid] = seg
        first = k[prev] if epp == 1 else k[prev : prev + epp]
        if parent.children is NO_CHILDREN:
            parent.children = {first: seg}
        else:
            parent.children[first] = seg
        slru[nid] = seg
        nid += 1
        if table is not None:
            if parent.has_state:
                table.protect(parent)
            table.add(seg, pos * tpe, tree.ancestor_tokens(seg))
        created.append(seg)
        parent = seg
        prev = pos
    tree.next_id, tree.clock = nid, clock
    tree.kv_tokens += (prev - start) * tpe
    tree.state_bytes += sum(s[2] for s in sts)
    tree.counts["states_inserted"] += len(sts)
    tree.sync(node)  # the attach point lost leaf status (locks, child count)
    return created


def _cap_path(tree: RadixTree, tail: Node) -> int:
    """SGLang's ``_evict_excess_path_states`` (unified_cache/components/mamba.py): tombstone
    the states of ``tail``'s path beyond the cap, root-first, skipping the tail, locked states
    and forks (a soft cap). Run only when the insert stored a state, as SGLang emits it from
    ``commit_insert_component_data`` for a new or revived state, not an existing one."""
    holders = []
    nd = tail
    while nd is not tree.root:
        if nd.has_state:
            holders.append(nd)
        nd = nd.parent  # type: ignore[assignment]
    excess = len(holders) - tree.max_states_per_path  # type: ignore[operator]
    capped = 0
    for nd in reversed(holders):
        if capped >= excess:
            break
        if nd is not tail and nd.state_lock == 0 and len(nd.children) == 1:
            tree.detach_state(nd, count=False)
            capped += 1
    tree.counts["capped"] += capped
    return capped
