"""What a router knows of one replica, built from that replica's KV events alone.

``EventView`` is AMD-AGI/Infera's ``KvEventClient`` view of one worker
(infera/router/kv_event/client.py): a set of router-side chained block hashes recomputed from
each ``BlockStored``'s token ids (``hash_chunk(parent, chunk)``, the parent resolved through
``map[engine hash] -> router hash``; an unknown parent drops the event), and ``BlockRemoved``
popping the map entry and its view entry. Two forms:

* ``all_groups`` (before Infera#98): every event is indexed, ``n = min(len(tokens) // bs,
  len(block_hashes))`` blocks, each hash mapped to the i-th block of the event's span. On a
  hybrid, a Mamba group's event spans a whole step with ONE hash (its last block), so that hash
  is mapped to the step's FIRST block, and vLLM mixes no group id into the hash: the same hash
  is the attention group's last block. A Mamba ``BlockRemoved`` then drops an attention entry.
* fixed: attention groups only. Stores as Infera#98's ``_is_indexable_group`` (only
  ``kv_cache_spec_kind`` in the attention kinds, or absent: SGLang; a span whose block count
  disagrees with its hashes is viewed but not mapped), and removals too: a ``BlockRemoved``
  whose ``group_idx`` the stores named a non-attention group is ignored. Infera's merged fix
  filters the stores only (its ``_handle_event`` pops any removed hash), so a Mamba eviction
  still drops the attention entry with the same hash: ``filter_removals=False`` is that form.

``StateView`` (the lab's state-aware index) keeps the fixed view and adds, per block, the Mamba
groups holding its state: a Mamba hash is resolved through the attention map (a chained hash
names its whole prefix, so the attention block with that hash is the block the state ends),
keyed by group, so nothing collides. Both views are bounded: past ``cap`` entries the oldest go
(a stale entry costs a wrong hit count, never an error).
"""

from __future__ import annotations

from typing import Any

from kda_core.fleet._events import MAMBA_KIND, VLLM_ATTENTION_KINDS, BlockRemoved, BlockStored

ROUTER_SEED = 0
_ROUTER_SALT = 0x726F75746572  # the router's hash differs from the engine's (any fixed int)


def hash_chunk(parent: int, chunk: list[int]) -> int:
    """The router's chained hash (Infera ``hash_chunk``: XXH3 over parent + tokens; the lab's
    is Python's int-tuple hash, deterministic for ints)."""
    return hash((_ROUTER_SALT, parent, *chunk))


def request_hashes(tokens: list[int], bs: int) -> list[int]:
    """Infera ``hash_request``: chained hashes of the full blocks (a partial tail dropped);
    ``hash_chunk`` inlined (called per routing decision)."""
    out = []
    parent = ROUTER_SEED
    salt = _ROUTER_SALT
    if bs == 1:  # one token per block (SGLang pages in the simulated stream): no slicing
        for tok in tokens:
            parent = hash((salt, parent, tok))
            out.append(parent)
        return out
    for i in range(0, len(tokens) // bs * bs, bs):
        parent = hash((salt, parent, *tokens[i : i + bs]))
        out.append(parent)
    return out


class EventView:
    """Infera's per-worker view (module docstring); ``all_groups``: the pre-#98 form."""

    __slots__ = (
        "bs",
        "all_groups",
        "filter_removals",
        "cap",
        "view",
        "map",
        "kinds",
        "dropped",
        "parents",
    )

    def __init__(self, bs: int, all_groups: bool, cap: int, filter_removals: bool = True) -> None:
        self.bs, self.all_groups, self.cap = bs, all_groups, cap
        self.filter_removals = filter_removals and not all_groups
        self.view: dict[int, None] = {}
        self.map: dict[Any, int] = {}
        self.kinds: dict[int, str] = {}  # group_idx -> kind, learned from stores
        self.dropped = 0  # events whose parent was unknown
        self.parents: dict[int, int] | None = None  # router hash -> parent's (the listener's)

    def stored(self, ev: BlockStored) -> None:
        kind = ev.kv_cache_spec_kind
        if kind is not None and ev.group_idx is not None:
            self.kinds[ev.group_idx] = kind
        if not (self.all_groups or kind is None or kind in VLLM_ATTENTION_KINDS):
            return
        if ev.parent_block_hash is None:
            parent = ROUTER_SEED
        else:
            got = self.map.get(ev.parent_block_hash)
            if got is None:
                self.dropped += 1
                return
            parent = got
        toks, hs = ev.token_ids, ev.block_hashes
        bs = self.bs or ev.block_size  # 0: the event's own block size (a live stream)
        if bs <= 0:
            self.dropped += 1
            return
        if self.all_groups:
            n = min(len(toks) // bs, len(hs))
            mapped = True
        else:
            n = len(toks) // bs
            mapped = n == len(hs)
        view, m, salt, up = self.view, self.map, _ROUTER_SALT, self.parents
        if bs == 1 and mapped and up is None:  # the loop below for SGLang's pages: hot
            for tok, h in zip(toks, hs):
                parent = hash((salt, parent, tok))
                view[parent] = None
                m[h] = parent
            n = 0
        for i in range(n):
            # hash_chunk, inlined
            child = (
                hash((salt, parent, toks[i]))
                if bs == 1
                else hash((salt, parent, *toks[i * bs : (i + 1) * bs]))
            )
            view[child] = None
            if up is not None:
                up[child] = parent
            if mapped:
                m[hs[i]] = child
            parent = child
        if len(view) > self.cap or len(m) > self.cap:
            self._bound()

    def removed(self, ev: BlockRemoved) -> None:
        if self.filter_removals and ev.group_idx is not None:
            kind = self.kinds.get(ev.group_idx)
            if kind is not None and kind not in VLLM_ATTENTION_KINDS:
                return
        m, view = self.map, self.view
        for h in ev.block_hashes:  # ``_unview`` inlined (a removal per evicted block: hot)
            rh = m.pop(h, None)
            if rh is not None:
                view.pop(rh, None)

    def _unview(self, rh: int) -> None:
        self.view.pop(rh, None)

    def cleared(self) -> None:
        for rh in list(self.view):
            self._unview(rh)
        self.map.clear()

    def _bound(self) -> None:
        while len(self.view) > self.cap:
            self._unview(next(iter(self.view)))
        for d in (self.map, self.parents or {}):
            while len(d) > self.cap:
                del d[next(iter(d))]

    def hits(self, rhashes: list[int]) -> int:
        """Infera ``_cache_hits``: leading request blocks found in the view."""
        view = self.view
        n = 0
        for h in rhashes:
            if h not in view:
                break
            n += 1
        return n


class StateView(EventView):
    """The fixed view plus the states the replica holds (module docstring)."""

    __slots__ = ("states", "state_map")

    def __init__(self, bs: int, cap: int) -> None:
        super().__init__(bs, False, cap)
        self.states: dict[int, set[int]] = {}  # router hash -> Mamba groups holding it
        self.state_map: dict[tuple, int] = {}  # (engine hash, group) -> router hash

    def mamba_groups(self) -> int:
        return sum(1 for k in self.kinds.values() if k == MAMBA_KIND)

    def stored_state(self, ev: BlockStored) -> None:
        g = ev.group_idx if ev.group_idx is not None else -1
        for h in ev.block_hashes:
            rh = self.map.get(h)
            if rh is None:
                self.dropped += 1
                continue
            self.states.setdefault(rh, set()).add(g)
            self.state_map[(h, g)] = rh
        while len(self.state_map) > self.cap:
            key = next(iter(self.state_map))
            self._unstate(key, self.state_map.pop(key))

    def _unstate(self, key: tuple, rh: int) -> None:
        held = self.states.get(rh)
        if held is not None:
            held.discard(key[1])
            if not held:
                del self.states[rh]

    def removed(self, ev: BlockRemoved) -> None:
        g = ev.group_idx
        if g is not None and self.kinds.get(g) == MAMBA_KIND:
            for h in ev.block_hashes:
                rh = self.state_map.pop((h, g), None)
                if rh is not None:
                    self._unstate((h, g), rh)
            return
        super().removed(ev)

    def cleared(self) -> None:
        super().cleared()
        self.states.clear()
        self.state_map.clear()

    def state_hits(self, rhashes: list[int]) -> tuple[int, int]:
        """(blocks up to the deepest block whose state every Mamba group holds, within the
        KV overlap; the KV overlap)."""
        need = self.mamba_groups() or 1
        view, states = self.view, self.states
        best = n = 0
        for h in rhashes:
            if h not in view:
                break
            n += 1
            held = states.get(h)
            if held is not None and len(held) >= need:
                best = n
        return best, n


def apply_events(view: EventView, events: list[Any]) -> None:
    """Apply one batch to ``view`` in order; a ``StateView`` takes a batch's Mamba stores after
    its other events (vLLM puts the Mamba groups' events before the attention group's, and a
    state is resolved through the attention block it ends)."""
    later = []
    state_view = isinstance(view, StateView)
    for ev in events:
        if isinstance(ev, BlockStored):
            kind = ev.kv_cache_spec_kind
            if state_view and kind == MAMBA_KIND:
                if ev.group_idx is not None:
                    view.kinds[ev.group_idx] = kind
                later.append(ev)
            else:
                view.stored(ev)
        elif isinstance(ev, BlockRemoved):
            view.removed(ev)
        else:
            view.cleared()
    for ev in later:
        view.stored_state(ev)  # type: ignore[union-attr]
