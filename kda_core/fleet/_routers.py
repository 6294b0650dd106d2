"""The routers people run, each after the source it cites, and the lab's state-aware scorer.

A router sees only what a real one sees: the request (its page ids stand for its tokens), its
own dispatch history and, for the event-fed ones, the replicas' KV event batches. It never
reads a replica's cache. ``pick`` returns (replica, tokens it counts as cached there).
Candidates are enumerated in ``order`` (a seeded permutation of the replicas; a tie goes to
the first, as ``min`` / ``min_by_key`` do in the sources).

* ``round_robin``: sgl-router ``RoundRobinPolicy`` (a counter modulo the workers).
* ``least_loaded``: the fewest requests in flight, the shortest-queue fallback of sgl-router's
  ``CacheAwarePolicy::select_worker`` (``min_by_key(load)``).
* ``sglang_cache_aware``: sgl-router ``CacheAwarePolicy::select_worker`` with
  ``RouterArgs``' defaults (cache_threshold 0.3, balance_abs_threshold 64,
  balance_rel_threshold 1.5): imbalanced (max - min > abs and max > rel * min in-flight) ->
  the least loaded; else the approximate tree's best match if its share of the prompt exceeds
  the threshold, else the tenant with the smallest tree; the tree learns the routed text.
* ``kv_events`` / ``kv_events_all_groups``: AMD-AGI/Infera ``KvEventAwarePolicy.pick``
  (infera/router/policy/kv_event_aware.py), the event-fed overlap scorer NVIDIA Dynamo and
  llm-d also run: ``cost = w * (request_blocks - hits) + load``, ``load`` = distinct blocks in
  flight plus a per-pick decayed sum of the blocks each pick missed (Infera#103's fix, decay
  0.97; ``recent_decay=0`` drops the term: the router before it), ties to the lower load,
  then the first.
  ``hits``: the leading request blocks in the worker's ``EventView`` (fixed, or all groups;
  ``filter_removals=False``: Infera#98 as merged, removals not filtered by group).
* ``state_aware`` (the lab's): the same cost with ``hits`` counted only up to the deepest block
  whose state the replica's Mamba events say it holds (``StateView.state_hits``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kda_core.fleet._approx_tree import ApproxTree
from kda_core.fleet._index import (
    EventView,
    StateView,
    apply_events,
    request_hashes,
)

ROUTERS = (
    "round_robin",
    "least_loaded",
    "sglang_cache_aware",
    "kv_events",
    "kv_events_all_groups",
    "state_aware",
)
EVENT_ROUTERS = frozenset({"kv_events", "kv_events_all_groups", "state_aware"})
SGLANG_DEFAULTS = {
    "cache_threshold": 0.3,
    "balance_abs_threshold": 64,
    "balance_rel_threshold": 1.5,
}
KV_DEFAULTS = {"recent_decay": 0.97, "index_cap": 1 << 22, "filter_removals": True}


@dataclass(slots=True)
class Request:
    """What a router is shown: ``pages`` (the prompt's page ids; ``full`` of them whole)."""

    pages: list[int]
    full: int
    length: int


class _Base:
    uses_events = False

    def __init__(self, n: int, order: list[int], block_tokens: int, page: int) -> None:
        self.n, self.order, self.bt, self.page = n, order, block_tokens, page
        self.inflight = [0] * n

    def started(self, r: int, req: Request, handle: Any) -> None:
        self.inflight[r] += 1

    def finished(self, r: int, handle: Any) -> None:
        self.inflight[r] -= 1

    def events(self, r: int, evs: list[Any]) -> None:
        """A replica's event batch (event-fed routers only)."""

    def handle(self, req: Request) -> Any:
        """What ``finished`` needs back about a request."""
        return None


class RoundRobin(_Base):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.k = 0

    def pick(self, req: Request) -> tuple[int, int]:
        r = self.order[self.k % self.n]
        self.k += 1
        return r, 0


class LeastLoaded(_Base):
    def pick(self, req: Request) -> tuple[int, int]:
        load = self.inflight
        return min(self.order, key=lambda r: load[r]), 0


class SGLangCacheAware(_Base):
    def __init__(self, *args: Any, params: dict) -> None:
        super().__init__(*args)
        self.p = params
        self.tree = ApproxTree(self.n)

    def pick(self, req: Request) -> tuple[int, int]:
        load, p, tree = self.inflight, self.p, self.tree
        hi, lo = max(load), min(load)
        text = req.pages
        if hi - lo > p["balance_abs_threshold"] and hi > lo * p["balance_rel_threshold"]:
            r = min(self.order, key=lambda k: load[k])
        else:
            matched, tenant = tree.prefix_match(text)
            rate = matched / len(text) if text else 0.0
            r = tenant if rate > p["cache_threshold"] else tree.smallest_tenant()
        expected = min(tree.match_tenant(text, r) * self.page, req.length)
        tree.insert(text, r)
        return r, expected


class KVEvents(_Base):
    uses_events = True

    def __init__(self, *args: Any, weight: float, params: dict, kind: str) -> None:
        super().__init__(*args)
        self.w, self.decay = weight, params["recent_decay"]
        ppb = self.bt // self.page
        cap = params["index_cap"]
        if kind == "state_aware":
            self.views: list[EventView] = [StateView(ppb, cap) for _ in range(self.n)]
        else:
            fr, every = params["filter_removals"], kind == "kv_events_all_groups"
            self.views = [EventView(ppb, every, cap, fr) for _ in range(self.n)]
        self.state = kind == "state_aware"
        # per replica, in-flight requests per block (a Counter: ``started`` counts in C)
        self.refs: list[Counter[int]] = [Counter() for _ in range(self.n)]
        self.recent = [0.0] * self.n
        self._hashes: list[int] = []

    def events(self, r: int, evs: list[Any]) -> None:
        apply_events(self.views[r], evs)

    def _hits(self, rh: list[int]) -> list[int]:
        """Per replica, the blocks the router counts: the KV overlap (``hits``), or the deepest
        state within it (``state_hits``)."""
        if self.state:
            return [v.state_hits(rh)[0] for v in self.views]  # type: ignore[attr-defined]
        out = []
        for v in self.views:  # ``EventView.hits`` inlined (every replica, every decision)
            view, n = v.view, 0
            for h in rh:
                if h not in view:
                    break
                n += 1
            out.append(n)
        return out

    def pick(self, req: Request) -> tuple[int, int]:
        rh = request_hashes(req.pages[: req.full], self.bt // self.page)
        self._hashes = rh
        total = len(rh)
        w, refs, recent = self.w, self.refs, self.recent
        counted = self._hits(rh)
        best_cost = best_load = 0.0
        r = hits = -1
        for k in self.order:  # the least (cost, load), the first on a tie
            h = counted[k]
            load = len(refs[k]) + recent[k]
            cost = w * (total - h) + load
            if r < 0 or cost < best_cost or (cost == best_cost and load < best_load):
                best_cost, best_load, r, hits = cost, load, k, h
        self._dispatch(r, total - hits)
        return r, hits * self.bt

    def _dispatch(self, r: int, missed: int) -> None:
        """Infera ``_record_dispatch``: decay every total, then charge the pick's misses."""
        rec, d = self.recent, self.decay
        rec[:] = [v if v >= 1e-3 else 0.0 for v in [x * d for x in rec]]
        if missed > 0 and d > 0:  # decay 0: no recent term (the router before Infera#103)
            rec[r] += missed

    def handle(self, req: Request) -> Any:
        return self._hashes

    def started(self, r: int, req: Request, handle: Any) -> None:
        super().started(r, req, handle)
        self.refs[r].update(handle)

    def finished(self, r: int, handle: Any) -> None:
        super().finished(r, handle)
        refs = self.refs[r]
        for h in handle:  # every h was counted by ``started``
            c = refs[h] - 1
            if c:
                refs[h] = c
            else:
                refs.pop(h)  # dict's (Counter's ``del`` runs in Python)


def make_router(
    name: str, n: int, order: list[int], block_tokens: int, page: int, weight: float, params: dict
) -> _Base:
    """A router by name with its parameters (defaults filled in by the caller)."""
    args = (n, order, block_tokens, page)
    if name == "round_robin":
        return RoundRobin(*args)
    if name == "least_loaded":
        return LeastLoaded(*args)
    if name == "sglang_cache_aware":
        return SGLangCacheAware(*args, params=params)
    return KVEvents(*args, weight=weight, params=params, kind=name)
