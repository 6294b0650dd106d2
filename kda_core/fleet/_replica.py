"""One replica of the fleet: the lab's single-server cache model, publishing KV events.

A replica is exactly one ``kda_core.sim.simulate`` run in the sequential schedule (the same
``RadixStateCache`` built from the policy's options, ``RunCtx.lookup`` with lookups of at most
``input - 1`` tokens,
``policy.plan``, ``sim.place`` under the byte budgets, ``kv_cleanup``), fed only the
requests routed to it; tests/test_fleet_replica.py holds every replica's restore points equal to
``simulate`` on its own sub-trace. What the tree stores and drops is published as the engine
would: the KV payload of each tree page is the engine's block hash ending there (0 inside a
block; ``sim.place`` inserts it with the request's key), so the tree's ``on_free_kv`` /
``before_drop`` hooks (constructor arguments) name the blocks that leave.

Events (``_events``): vLLM 0.33 publishes per prefill step (the policy's planned positions are
vLLM's chunk ends, ``Scheduler._mamba_block_aligned_split``) one ``BlockStored`` per KV cache
group, the Mamba groups first (group order = layer order; AMD-AGI/Infera#98 captured 3 Mamba
groups then the MLA group for Kimi K3): a Mamba group names the one block whose state the step
leaves, over the whole step's tokens (``cache_full_blocks`` skips the null blocks); the
attention group names every full block the step computed. A dropped block or state is one
``BlockRemoved`` per hash and group (``_emit_block_removed_events``). SGLang 0.5.23 publishes
each new KV node's pages (``KvEventsRecorder.record_store``) and each removed node
(``record_remove``), nothing for a state; the lab adds proposed state events only when asked.

Token ids: the traces carry block ids, not tokens, so in the simulated stream one token id
stands for one trace page (the page's block id) and ``block_size`` counts pages; a live stream
(``python -m kda_core.fleet listen``) carries the engine's real tokens.
"""

from __future__ import annotations

from typing import Any

from kda_core.cache.radix import RadixStateCache
from kda_core.fleet._events import (
    MAMBA_KIND,
    SglangBlockRemoved,
    SglangBlockStored,
    VllmBlockRemoved,
    VllmBlockStored,
)
from kda_core.sim import RunCtx, kv_cleanup, place, release

MASK64 = (1 << 64) - 1
_ENGINE_SEED = 0x6B64615F6C6162  # any fixed int: the first block's parent in the chain


class _Pages:
    """A tree node's KV payload: per page, the engine hash of the block ending there (0 when
    the page ends no block). ``len`` is in tokens, as the tree checks payload lengths."""

    __slots__ = ("hashes", "page")

    def __init__(self, hashes: tuple, page: int) -> None:
        self.hashes = hashes
        self.page = page

    def __len__(self) -> int:
        return len(self.hashes) * self.page


def _slice_pages(payload: Any, start: int, stop: int, length: int) -> Any:
    """The tree's ``kv_slice``: offsets are tokens, whole pages (edges split on pages)."""
    if payload is None:
        return None
    p = payload.page
    return _Pages(payload.hashes[start // p : stop // p], p)


def block_hashes(pages: list[int], ppb: int, signed: bool) -> list[int]:
    """Chained engine block hashes of a page list, one per block of ``ppb`` pages (a trailing
    partial block has none): ``h_j = H(h_{j-1}, pages of block j)``, as vLLM chains
    ``hash_block_tokens(parent, tokens)`` (the values are the lab's, the chaining the engine's).
    ``signed``: SGLang's int64 range, else vLLM's unsigned 64 bits."""
    out = []
    h = _ENGINE_SEED
    if ppb == 1:
        for p in pages:
            h = hash((h, p))
            out.append(h if signed else h & MASK64)
        return out
    for j in range(len(pages) // ppb):
        h = hash((h, *pages[j * ppb : (j + 1) * ppb]))
        out.append(h if signed else h & MASK64)
    return out


class Replica:
    """One server: a radix tree under ``pol`` and budgets, emitting events as ``engine`` does.

    ``page``: tokens per tree page; ``ppb``: pages per event block (vLLM's ``block_size`` /
    page; 1 for SGLang); ``groups``: (Mamba group ids, attention group ids, attention kind);
    ``state_events``: publish the lab's proposed state events on SGLang; ``publish=False``:
    no events at all (no router reads them), the tree built without hooks, as ``simulate``'s."""

    def __init__(
        self,
        pol: Any,  # a kda_core.policy.make policy
        page: int,
        ppb: int,
        engine: str,
        groups: tuple[tuple[int, ...], tuple[int, ...], str],
        budgets: tuple[int | None, int | None, int | None],
        sizes: tuple[int, int],
        state_events: bool = False,
        publish: bool = True,
    ) -> None:
        self.pol, self.page, self.ppb, self.engine = pol, page, ppb, engine
        self.mamba, self.attn, self.kind = groups
        self.state_events, self.publish = state_events, publish
        self.events: list[Any] = []
        hooks: dict[str, Any] = {}
        if publish:
            hooks.update(on_free_kv=self._free_kv, kv_slice=_slice_pages)
            if engine == "vllm" or state_events:  # SGLang drops a state silently
                hooks["before_drop"] = self._drop_state
        self.cache = cache = RadixStateCache(page, block_keys=True, **pol.cache_options(), **hooks)
        sb, kb, ub = budgets
        self.ctx = RunCtx(cache, pol, sb, kb, ub, sizes[0], sizes[1], page)
        self.ctx.cap_last = True

    # ---------------------------------------------------------------- drops (tree hooks)
    def _free_kv(self, payload: Any, n_tokens: int) -> None:
        gone = [h for h in payload.hashes if h] if payload is not None else []
        if not gone:
            return
        if self.engine == "sglang":
            self.events.append(SglangBlockRemoved(gone, "GPU"))
            return
        for h in gone:
            self.events.extend(VllmBlockRemoved([h], "GPU", group_idx=g) for g in self.attn)

    def _drop_state(self, dropped: Any) -> None:
        node_kv = dropped.kv[-1] if dropped.kv else None
        h = node_kv.hashes[-1] if node_kv is not None and node_kv.hashes else 0
        if not h:
            return
        if self.engine == "vllm":
            self.events.extend(VllmBlockRemoved([h], "GPU", group_idx=g) for g in self.mamba)
        elif self.state_events:
            self.events.append(SglangBlockRemoved([h], "GPU", group_idx=self.mamba[0]))

    # ---------------------------------------------------------------- one request
    def serve(
        self, key: Any, ins_key: Any, length: int, total: int | None, pages: list[int]
    ) -> tuple[int, int]:
        """Serve one request (``run_sequential``'s body); -> (token match, restore point).
        ``pages``: the insert key's page ids as ints (``ins_key`` as a list)."""
        ctx, pol, cache = self.ctx, self.pol, self.cache
        hashes: list[int] = []
        payload = None
        if self.publish:
            hashes = block_hashes(pages, self.ppb, self.engine == "sglang")
            ppb = self.ppb
            if ppb == 1:
                per_page = tuple(hashes)
            else:
                per_page = [0] * len(pages)
                for j, h in enumerate(hashes):
                    per_page[(j + 1) * ppb - 1] = h
            payload = _Pages(tuple(per_page), self.page)
        r = None
        m = ctx.lookup(key, length)
        tm = min(m.token_match, length)
        ra = min(m.restore_at, tm)
        pos = pol.plan(length, m.token_match, m.restore_at, total, ctx.page)
        ctx.steps += len(key)
        if pos:
            path = m.path
            sb = ctx.sb
            tight = sb is not None and cache.state_bytes + len(pos) * ctx.ckpt > sb
            locked = path.cached_len > 0 and (tight or ctx.ub is not None or ctx.kb is not None)
            if locked:
                cache.lock_handle(path)
            _, r = place(ctx, ins_key, list(pos), path.cached_len, payload)
            if locked:
                release(cache, path)
        kv_cleanup(ctx)
        if r is not None and self.publish:
            self._stored(ra, r, hashes, pages)
        return tm, ra

    def _stored(self, start: int, r: Any, hashes: list[int], pages: list[int]) -> None:
        """The insert ``r`` as the engine publishes it (``start``: the restore point)."""
        page = self.page
        if self.engine == "sglang":
            self._sglang_stored(r, hashes, pages)
            return
        states = sorted(r.new + r.existed)
        prev = start
        bt = self.ppb * page
        for p in states:
            if p <= prev:
                continue
            a, b = prev // bt, p // bt  # the step's full blocks: a .. b - 1
            if b > a:
                parent = hashes[a - 1] if a else None
                toks = pages[a * self.ppb : b * self.ppb]
                for g in self.mamba:
                    mh = [hashes[b - 1]] if p % bt == 0 else []
                    self.events.append(self._vstored(mh, parent, toks, g, MAMBA_KIND))
                for g in self.attn:
                    self.events.append(self._vstored(hashes[a:b], parent, toks, g, self.kind))
            prev = p

    def _vstored(self, hs: list[int], parent: Any, toks: list[int], g: int, kind: str) -> Any:
        return VllmBlockStored(
            list(hs), parent, list(toks), self.ppb, None, "GPU", None, None, g, kind
        )

    def _sglang_stored(self, r: Any, hs: list[int], pages: list[int]) -> None:
        """New KV pages ``[cached_len, inserted_len)``, one coalesced event (SGLang's
        ``KvEventsRecorder.enqueue`` joins a node chain's per-page events)."""
        page = self.page
        a, b = r.cached_len // page, r.inserted_len // page
        if b > a:
            parent = hs[a - 1] if a else None
            self.events.append(SglangBlockStored(hs[a:b], parent, list(pages[a:b]), 1, None, "GPU"))
        if self.state_events:
            for p in r.new:
                h = hs[p // page - 1]
                ev = SglangBlockStored([h], None, [], 1, None, "GPU")
                ev.group_idx, ev.kv_cache_spec_kind = self.mamba[0], MAMBA_KIND
                self.events.append(ev)

    def take_events(self) -> list[Any]:
        out, self.events = self.events, []
        return out

    def probe(self, key: Any, length: int) -> int:
        """The restore point this replica would give ``key`` now (no LRU touch): the oracle
        behind the routing regret, never shown to a router."""
        m = self.cache.match_prefix(key, touch=False)
        if m.restore_at >= length:
            m = self.cache.match_prefix(key[:-1], touch=False)
        return min(m.restore_at, m.token_match, length)
