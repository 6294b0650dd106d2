"""The policy interface: the validated call context and the ``Policy`` base.

A policy answers ``checkpoint_positions(prompt_len, match, *, total_len, chunk_size,
page_size)`` (where a request saves states) and builds the cache it runs on (``make_cache``:
how the tree refreshes and caps, and, for a policy that picks its own victims, the cache's
``victim`` hook; the base evicts in LRU order). docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from kda_core._checks import check_int
from kda_core.cache.radix import RadixStateCache

MAX_LEN = 1 << 24
"""Longest prompt / total length (tokens) a policy plans for."""
MAX_POSITIONS = 1 << 18
"""Most checkpoint positions one call may return (caps memory)."""

__all__ = ["MAX_LEN", "MAX_POSITIONS", "PlanContext", "Policy"]


class PlanContext:
    """Validated arguments of one ``checkpoint_positions`` call."""

    __slots__ = ("prompt_len", "total_len", "token_match", "restore_at", "chunk", "page")

    def __init__(
        self, prompt_len: Any, match: Any, total_len: Any, chunk_size: Any, page_size: Any
    ) -> None:
        self.prompt_len = check_int("prompt_len", prompt_len, 1, MAX_LEN)
        self.total_len = (
            self.prompt_len
            if total_len is None
            else check_int("total_len", total_len, self.prompt_len, MAX_LEN)
        )
        self.page = check_int("page_size", page_size, 1, 1 << 16)
        self.chunk = None if chunk_size is None else check_int("chunk_size", chunk_size, 1, MAX_LEN)
        if match is None:
            tm, ra = 0, 0
        else:
            try:
                tm, ra = match.token_match, match.restore_at
            except AttributeError:
                raise ValueError(
                    "match must have token_match and restore_at (or be None)"
                ) from None
            tm = check_int("match.token_match", tm, 0, MAX_LEN)
            ra = check_int("match.restore_at", ra, 0, tm)
            # a block-key match may cover the prompt's partial last block: clip to the prompt
            tm = min(tm, self.prompt_len)
            ra = min(ra, tm)
        self.token_match = tm
        self.restore_at = ra

    @classmethod
    def trusted(
        cls, prompt_len: int, token_match: int, restore_at: int, total_len: int | None, page: int
    ) -> PlanContext:
        """A context from values the caller has validated (``Policy.plan``): no checks."""
        assert 1 <= prompt_len <= MAX_LEN and 0 <= restore_at <= token_match, "validated"
        ctx = cls.__new__(cls)
        ctx.prompt_len = prompt_len
        ctx.total_len = prompt_len if total_len is None else total_len
        assert prompt_len <= ctx.total_len <= MAX_LEN, "total_len validated by the caller"
        ctx.page = page
        ctx.chunk = None
        ctx.token_match = tm = min(token_match, prompt_len)
        ctx.restore_at = min(restore_at, tm)
        return ctx

    def down(self, x: int, unit: int) -> int:
        return x // unit * unit

    def finish(self, positions: Iterable[int]) -> tuple[int, ...]:
        lo, hi, page = self.restore_at, self.total_len, self.page
        return tuple(sorted({p for p in positions if lo < p <= hi and p % page == 0}))

    def multiples(self, unit: int, lo: int, hi: int, name: str) -> range:
        first = (lo // unit + 1) * unit
        if hi >= first and (hi - first) // unit + 1 > MAX_POSITIONS:
            raise ValueError(
                f"{name}={unit} gives more than {MAX_POSITIONS} positions up to {hi} tokens"
            )
        return range(first, hi + 1, unit)


@dataclass(slots=True)
class Policy:
    """Base: placement left to subclasses; the cache it makes evicts in LRU order."""

    name = "base"

    def cache_options(self) -> dict:
        """Keyword options for ``RadixStateCache`` that this policy prescribes."""
        return {"state_touch": "node", "max_states_per_path": None}

    def make_cache(self, page_size: int = 1, **kwargs: Any) -> RadixStateCache:
        """``RadixStateCache(page_size, **cache_options(), **kwargs)`` (``kwargs``: the
        caller's hooks, ``block_keys`` ...)."""
        opts = self.cache_options()
        opts.update(kwargs)
        return RadixStateCache(page_size, **opts)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

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
