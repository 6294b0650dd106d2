"""The policy interface: the validated call context and the ``Policy`` base.

A policy answers ``checkpoint_positions(prompt_len, match, *, total_len, chunk_size,
page_size)`` (where a request saves states) and names the options of the cache it runs on
(``cache_options``: how the tree refreshes and caps, and, for a policy that picks its own
victims, the cache's ``victim`` hook; the base evicts in LRU order). docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from kda_core.cache.policy._context import MAX_LEN, PlanContext

__all__ = ["MAX_LEN", "Policy"]


@dataclass(slots=True)
class Policy:
    """Base: placement left to subclasses; the cache it makes evicts in LRU order."""

    name = "base"

    def cache_options(self) -> dict:
        """Keyword options of the ``RadixStateCache`` this policy runs on (how the tree
        refreshes and caps, and a policy's own ``victim`` hook): its owner builds the cache
        as ``RadixStateCache(page_size, **policy.cache_options(), **its own hooks)``."""
        return {"state_touch": "node", "max_states_per_path": None}

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init}

    def checkpoint_positions(
        self,
        prompt_len: int,
        match: Any = None,
        *,
        total_len: int | None = None,
        chunk_size: int | None = None,
        page_size: int = 1,
    ) -> tuple[int, ...]:
        """Sorted positions in ``(restore_at, total_len]``, multiples of ``page_size``."""
        ctx = PlanContext(prompt_len, match, total_len, chunk_size, page_size)
        self.check_page(ctx.page)
        self._check_sizes(ctx)
        return ctx.finish(self._positions(ctx))

    def plan(
        self, prompt_len: int, token_match: int, restore_at: int, total_len: int | None, page: int
    ) -> tuple[int, ...]:
        """``checkpoint_positions`` for a caller whose values are validated (the simulator:
        lengths from a trace checked when read, a match from the cache, ``check_page`` run
        once per run). Only ``_check_sizes``, a bound on this call's work, stays per call."""
        ctx = PlanContext.trusted(prompt_len, token_match, restore_at, total_len, page)
        self._check_sizes(ctx)
        return ctx.finish(self._positions(ctx))

    def check_page(self, page: int) -> None:
        """Raise ``ValueError`` if this policy's parameters do not suit ``page_size``."""

    def _check_sizes(self, ctx: PlanContext) -> None:
        """Raise ``ValueError`` if one call would plan more than ``MAX_POSITIONS`` steps."""

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        """The policy's positions for a checked context (any order; ``finish`` filters)."""
        return ()
