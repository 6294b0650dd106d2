"""What a served request is: the caller's ``Request``.

``Request(prompt, max_new_tokens, arrival=0)`` is the contract (``kda_core.engine.Request``):
text or token ids, greedy tokens to generate in [1, 4096], and the scheduler step at which it
arrives (>= 0; step 0 is the first step of ``Engine.serve``).

Inside ``serve`` a request is a ``_state.RequestState``; its phase in a scheduler step is one
of "waiting", "prefill", "decode", "finished", "rejected" (``retracted`` is marked in the rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Request:
    """One request to ``Engine.serve``: prompt (text or ids), tokens to generate, arrival step."""

    prompt: Any
    max_new_tokens: int = 8
    arrival: int = 0
