"""The validated arguments of one placement call (``Policy.checkpoint_positions`` / ``plan``)
and the helpers every policy's ``_positions`` uses on them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
