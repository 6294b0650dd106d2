"""The validated arguments of one placement call (``Policy.checkpoint_positions`` / ``plan``)
and the helpers every policy's ``_positions`` uses on them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kda_core._checks import check_int

MAX_LEN = 1 << 24
"""Longest prompt / total length (tokens) a policy plans for."""
MAX_POSITIONS = 1 << 18
"""Most checkpoint positions one call may return (caps memory)."""


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
