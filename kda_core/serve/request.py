"""What a served request is: the caller's ``Request`` and the scheduler's ``RequestState``.

``Request(prompt, max_new_tokens, arrival=0)`` is the contract (``kda_core.engine.Request``):
text or token ids, greedy tokens to generate in [1, 4096], and the scheduler step at which it
arrives (>= 0; step 0 is the first step of ``Engine.serve``).

``RequestState`` is one request inside ``serve`` (nano-vllm's ``Sequence``): its tokens, phase,
active-pool slots, the radix node it locks, the boundary of its last tracked state, and the
per-request counters its ``GenerateReport`` is built from. A retracted request is reset to
``waiting`` (SGLang ``retract_decode`` releases it without inserting and re-queues it) and redone
from its prompt later; its outputs so far are dropped, so what it finally returns is a run from
scratch (greedy decoding makes that run identical).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kda_core.cache.pool import RequestSlots
from kda_core.model import ModelState

PHASES: tuple[str, ...] = ("waiting", "prefill", "decode", "finished", "rejected")
"""A request's phase in a scheduler step (``retracted`` is marked per step in the rows)."""


@dataclass(slots=True, frozen=True)
class Request:
    """One request to ``Engine.serve``: prompt (text or ids), tokens to generate, arrival step."""

    prompt: Any
    max_new_tokens: int = 8
    arrival: int = 0


@dataclass(slots=True, eq=False)
class RequestState:
    """One request inside the scheduler (see the module docstring)."""

    idx: int  # position in the caller's list (reports come back in this order)
    ids: list[int]  # prompt tokens
    n_new: int
    arrival: int
    phase: str = "waiting"
    rid: str = ""  # slot owner name of the current attempt
    state: ModelState | None = None  # running state (KDA arrays bound to the active slot)
    slots: RequestSlots | None = None
    locked: Any = None  # cache handle whose state this request locks (None: nothing locked)
    locked_len: int = 0  # tokens of this request's prefix the tree holds under that lock
    token_match: int = 0
    restore_at: int = 0
    restore_error: tuple[float, float] = (0.0, 0.0)
    planned: tuple[int, ...] = ()
    plan: frozenset[int] = frozenset()
    cuts: tuple[int, ...] = ()  # prefill cut points after restore_at (chunks, checkpoints, P)
    last_tracked: int = 0  # boundary of the most recent tracked / snapshotted state
    last: np.ndarray | None = None  # logits of the last consumed token
    gen: list[int] = field(default_factory=list)
    logit_rows: list[np.ndarray] = field(default_factory=list)
    pending: list[tuple[int, int]] = field(default_factory=list)  # (pos, ckpt slot) not in tree
    parked: list[int] = field(default_factory=list)  # every checkpoint position parked
    step_log: list[tuple[int, int, int, str]] = field(default_factory=list)  # pos, n, token, phase
    counts: dict[str, int] = field(default_factory=dict)
    retractions: int = 0
    admitted_at: int = -1
    finished_at: int = -1
    t0: float = 0.0
    seconds: float = 0.0
    error: str | None = None

    @property
    def P(self) -> int:
        return len(self.ids)

    @property
    def total(self) -> int:
        """Tokens consumed by the end: the prompt and every output but the last."""
        return self.P + self.n_new - 1

    @property
    def pos(self) -> int:
        """Tokens consumed so far (the boundary of the running state)."""
        return 0 if self.state is None else self.state.boundary

    @property
    def n_out(self) -> int:
        return len(self.gen)

    def bump(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def reset(self) -> None:
        """Back to waiting with nothing held (the caller released slots and locks)."""
        self.phase = "waiting"
        self.state = None
        self.slots = None
        self.locked = None
        self.locked_len = 0
        self.last = None
        self.gen.clear()
        self.logit_rows.clear()
        self.pending.clear()
        self.parked.clear()
        self.step_log.clear()
        self.counts.clear()
        self.last_tracked = 0
