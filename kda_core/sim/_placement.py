"""One request's checkpoints into the tree under the byte budgets, and the per-request log.

Shared by both schedules of the simulator (``_sequential`` and ``_inflight``): ``place`` makes
room for a list of new checkpoint positions (states evicted through the policy, a unified
budget falling back to KV-leaf eviction, a KV budget evicting LRU KV leaves; positions that
still do not fit are dropped, deepest first) and inserts them (the tree cuts the key at the
deepest position). The caller holds whatever locks protect the request's own path.
``RequestLog`` holds the per-request arrays a run returns. Budget rules: docs/simulator.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kda_core.cache import policy as policy_mod
from kda_core.cache.protocol import HandleError, PrefixCache


@dataclass(slots=True)
class RunCtx:
    """One run's cache, policy, budgets (bytes, None = unlimited) and running counters."""

    cache: PrefixCache
    pol: policy_mod.Policy
    sb: int | None
    kb: int | None
    ub: int | None
    ckpt: int
    kvb: int
    page: int
    evictions: int = 0
    dropped: int = 0
    steps: int = 0
    cap_last: bool = False  # the lookup matches at most input - 1 tokens (the engines' rule)
    shared: list[int] | None = None  # vLLM with drafts: each request's shared prefix

    def lookup(self, key: list[int], input_len: int, i: int = -1) -> Any:
        """``cache.match_prefix(key)`` for request ``i``; with ``cap_last``, a state at the
        prompt's end is not a hit: SGLang and vLLM look up at most ``input - 1`` tokens (the
        last one is recomputed for its logits), so the match falls back to the deepest state
        before the last block (a tree of whole blocks holds no state strictly inside it).

        With ``shared`` (vLLM with drafts) the attention group's hit is shorter (lookahead
        hashes or the trailing-block drop, ``VLLMPolicy.lookup_limit``, at most ``input - 1``
        tokens) and the KDA state restores at or below it. vLLM keeps the KV of whole prompts
        while the tree keeps it up to the deepest state only, so the hit is taken from the
        prefix the request shares with any earlier one (``shared[i]``, the lab's assumption:
        that KV is still there)."""
        m = self.cache.match_prefix(key)
        if self.shared is not None:
            pol: Any = self.pol
            limit = pol.lookup_limit(input_len, self.shared[i], self.page)
            if m.token_match > limit:
                m = self.cache.match_prefix(key[: limit // self.page])
        elif self.cap_last and m.restore_at >= input_len:
            m = self.cache.match_prefix(key[:-1])
        return m


def _room_for_states(ctx: RunCtx, pos: list[int]) -> list[int]:
    """Evict states (policy order) until ``pos`` fit the state budget; drop the deepest rest."""
    cache, ckpt, sb = ctx.cache, ctx.ckpt, ctx.sb
    need = len(pos) * ckpt
    if sb is None or cache.state_bytes + need <= sb:
        return pos
    ctx.evictions += cache.evict(state_bytes=cache.state_bytes + need - sb).states
    room = sb - cache.state_bytes
    if room < need:
        keep = max(room, 0) // ckpt
        ctx.dropped += len(pos) - keep
        pos = pos[:keep]
    return pos


def _room_unified(ctx: RunCtx, pos: list[int], held_tokens: int) -> list[int]:
    """Fit states + KV under the unified budget: states first, then KV leaves, else drop.

    New KV = tokens beyond the locked path (``held_tokens``) up to the deepest position (a
    partly matched edge below it may be evicted and re-inserted)."""
    cache, ckpt, kvb, ub = ctx.cache, ctx.ckpt, ctx.kvb, ctx.ub
    assert ub is not None
    need = len(pos) * ckpt
    new_kv = max(pos[-1] - held_tokens, 0) * kvb
    while pos:
        over = cache.state_bytes + need + cache.kv_tokens * kvb + new_kv - ub
        if over <= 0:
            break
        r = cache.evict(states=1)
        ctx.evictions += r.states
        if r.states == 0:
            r = cache.evict(kv_tokens=max(1, -(-over // kvb)))
            ctx.evictions += r.states
            if r.kv_tokens == 0:
                ctx.dropped += 1
                pos = pos[:-1]
                need -= ckpt
                new_kv = max((pos[-1] if pos else 0) - held_tokens, 0) * kvb
    return pos


def place(
    ctx: RunCtx, ins_key: list[int], pos: list[int], held_tokens: int, kv: Any = None
) -> tuple[int, Any]:
    """Make room for checkpoints at ``pos`` (ascending) and insert them with ``ins_key``.

    ``held_tokens``: the length of the request's path the caller keeps locked. ``kv``: the
    KV payload of ``ins_key`` the cache stores (None: the simulator's, which sizes KV by
    tokens only; the fleet's replicas pass the engine's block hashes per page, sliced by
    the cache's ``kv_slice`` when the insert is cut at the deepest position).
    -> (states new, the cache's PrefixInsert or None when every position was dropped)."""
    pos = _room_for_states(ctx, pos)
    if ctx.ub is not None and pos:
        pos = _room_unified(ctx, pos, held_tokens)
    if ctx.kb is not None and pos:
        # make room for the new KV first (beyond the locked path)
        new_tok = max(pos[-1] - held_tokens, 0)
        over = (ctx.cache.kv_tokens + new_tok) * ctx.kvb - ctx.kb
        if over > 0:
            ctx.evictions += ctx.cache.evict(kv_tokens=-(-over // ctx.kvb)).states
    if not pos:
        return 0, None
    r = ctx.cache.insert_prefix(ins_key, kv, [(p, p) for p in pos], state_bytes=ctx.ckpt)
    ctx.steps += r.inserted_len // ctx.page
    return len(r.new), r


def try_lock(cache: PrefixCache, handle: Any) -> bool:
    """Lock ``handle`` unless it is None or stale (its state was evicted or capped). -> locked?"""
    if handle is None:
        return False
    try:
        cache.lock_handle(handle)
    except HandleError:
        return False
    return True


def release(cache: PrefixCache, handle: Any) -> None:
    """Unlock ``handle``; a stale one (its node or state evicted) holds nothing to release."""
    try:
        cache.lock_handle(handle, unlock=True)
    except HandleError:
        if not _is_stale(cache, handle):
            raise  # a real misuse: an unlock without a lock


def _is_stale(cache: PrefixCache, handle: Any) -> bool:
    """Probe: a stale handle cannot be locked."""
    try:
        cache.lock_handle(handle)
    except HandleError:
        return True
    cache.lock_handle(handle, unlock=True)
    return False


def kv_cleanup(ctx: RunCtx) -> None:
    """With a KV budget, evict LRU KV leaves down to it (after a request's own path alone
    was larger than the budget)."""
    kb, kvb, cache = ctx.kb, ctx.kvb, ctx.cache
    if kb is not None and cache.kv_tokens * kvb > kb:
        ctx.evictions += cache.evict(kv_tokens=-(-(cache.kv_tokens * kvb - kb) // kvb)).states


@dataclass(slots=True)
class RequestLog:
    """Per-request arrays of one run (arrival order), filled as requests are matched / end."""

    SERIES: ClassVar[tuple[str, ...]] = (
        "token_match",
        "restore_at",
        "state_bytes",
        "kv_tokens",
        "kv_peak",
        "n_states",
        "new",
        "evicted_cum",
    )
    n: int
    token_match: np.ndarray = field(init=False)
    restore_at: np.ndarray = field(init=False)
    state_bytes: np.ndarray = field(init=False)
    kv_tokens: np.ndarray = field(init=False)
    kv_peak: np.ndarray = field(init=False)
    n_states: np.ndarray = field(init=False)
    new: np.ndarray = field(init=False)
    evicted_cum: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        for f in self.SERIES:
            setattr(self, f, np.zeros(self.n, dtype=np.int64))

    def sample(self, i: int, ctx: RunCtx) -> None:
        """The tree after request ``i`` (and its evictions)."""
        c = ctx.cache
        self.state_bytes[i] = c.state_bytes
        self.kv_tokens[i] = c.kv_tokens
        self.n_states[i] = c.n_states
        self.evicted_cum[i] = ctx.evictions

    def as_dict(self, ctx: RunCtx) -> dict:
        out = {f: getattr(self, f) for f in self.SERIES}
        out.update(dropped=ctx.dropped, steps=ctx.steps, stats=ctx.cache.stats())
        return out
