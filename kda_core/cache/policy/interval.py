"""``interval``: a checkpoint every ``every`` tokens (plus the request end), LRU eviction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy._base import MAX_LEN, PlanContext, Policy

__all__ = ["IntervalPolicy"]


@dataclass(slots=True)
class IntervalPolicy(Policy):
    """A checkpoint every ``every`` tokens (plus the request end if ``request_end``)."""

    every: int = 256
    request_end: bool = False
    name = "interval"

    def __post_init__(self) -> None:
        self.every = check_int("every", self.every, 1, MAX_LEN)
        self.request_end = check_bool("request_end", self.request_end)

    def check_page(self, page: int) -> None:
        if self.every % page:
            raise ValueError(f"every must be a multiple of page_size={page}, got {self.every}")

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        assert self.every % ctx.page == 0, "check_page ran"
        out = list(ctx.multiples(self.every, ctx.restore_at, ctx.total_len, "every"))
        if self.request_end:
            out.append(ctx.total_len // ctx.page * ctx.page)
        return out
