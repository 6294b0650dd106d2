"""The policy interface, ``Policy``: where a request saves states (``checkpoint_positions``)
and the options of the cache it runs on (``cache_options``); ``PlanContext``: the validated
arguments of one placement call and the helpers every policy's ``_positions`` uses on them.
docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from kda_core._checks import check_int

MAX_LEN = 1 << 24  # the longest prompt / total length (tokens) a policy plans for
MAX_POSITIONS = 1 << 18  # the most positions (or steps) one call may plan: caps memory


def check_steps(steps: int, chunk: int) -> None:
    """``ValueError`` if one call would take more than ``MAX_POSITIONS`` chunk steps."""
    if steps > MAX_POSITIONS:
        raise ValueError(f"chunk_size={chunk} gives more than {MAX_POSITIONS} steps")


@dataclass(slots=True)
class PlanContext:
    """Validated arguments of one ``checkpoint_positions`` call."""

    prompt_len: int
    token_match: int
    restore_at: int
    total_len: int
    page: int
    chunk: int | None

    def __post_init__(self) -> None:
        # a block-key match may cover the prompt's partial last block: clip to the prompt
        self.token_match = min(self.token_match, self.prompt_len)
        self.restore_at = min(self.restore_at, self.token_match)

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
        P = check_int("prompt_len", prompt_len, 1, MAX_LEN)
        T = P if total_len is None else check_int("total_len", total_len, P, MAX_LEN)
        page = check_int("page_size", page_size, 1, 1 << 16)
        chunk = None if chunk_size is None else check_int("chunk_size", chunk_size, 1, MAX_LEN)
        tm = ra = 0
        if match is not None:
            try:
                tm, ra = match.token_match, match.restore_at
            except AttributeError:
                raise ValueError("match must have token_match and restore_at, or be None") from None
            tm = check_int("match.token_match", tm, 0, MAX_LEN)
            ra = check_int("match.restore_at", ra, 0, tm)
        self.check_page(page)
        ctx = PlanContext(P, tm, ra, T, page, chunk)
        return ctx.finish(self._positions(ctx))

    def plan(
        self, prompt_len: int, token_match: int, restore_at: int, total_len: int | None, page: int
    ) -> tuple[int, ...]:
        """``checkpoint_positions`` for a caller whose values are validated (the simulator:
        lengths from a trace checked when read, a match from the cache, ``check_page`` run
        once per run). Only the bound on this call's work stays per call (``_positions``)."""
        T = prompt_len if total_len is None else total_len
        assert 1 <= prompt_len <= T <= MAX_LEN and 0 <= restore_at <= token_match, "validated"
        ctx = PlanContext(prompt_len, token_match, restore_at, T, page, None)
        return ctx.finish(self._positions(ctx))

    def check_page(self, page: int) -> None:
        """Raise ``ValueError`` if this policy's parameters do not suit ``page_size``."""

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        """The policy's positions for a checked context (any order; ``finish`` filters);
        ``ValueError`` before any work if they would take more than ``MAX_POSITIONS`` steps."""
        return ()
