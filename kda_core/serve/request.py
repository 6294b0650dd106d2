"""The caller's ``Request(prompt, max_new_tokens, arrival=0)`` (the contract, ``kda_core.engine``):
text or token ids, greedy tokens in [1, 4096], and the scheduler step it arrives at (>= 0).
Inside ``serve`` it becomes a ``_state.RequestState``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Request:
    """One request to ``Engine.serve``: prompt (text or ids), tokens to generate, arrival step."""

    prompt: Any
    max_new_tokens: int = 8
    arrival: int = 0
