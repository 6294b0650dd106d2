"""``RequestState``: one request inside ``serve`` (nano-vllm's ``Sequence``). A retracted
request is reset to ``waiting`` (SGLang ``retract_decode`` releases it without inserting and
re-queues it) and redone from its prompt: greedy decoding makes that run identical."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kda_core.model import VOCAB, ModelState
from kda_core.serve._pools import RequestSlots
from kda_core.serve._trace import Trace
from kda_core.serve.report import GenerateReport, PoolStats, StepRecord
from kda_core.serve.spec import SpecRequest


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
    gen: list[int] = field(default_factory=list)
    logit_rows: list[np.ndarray] = field(default_factory=list)
    pending: list[tuple[int, int]] = field(default_factory=list)  # (pos, ckpt slot) not in tree
    parked: list[int] = field(default_factory=list)  # every checkpoint position parked
    step_log: list[tuple[int, int, int, str]] = field(default_factory=list)  # pos, n, token, phase
    inserted: list[tuple[int, int]] = field(default_factory=list)  # (slot, frees) at insert
    counts: dict[str, int] = field(default_factory=dict)
    retractions: int = 0
    t0: float = 0.0
    seconds: float = 0.0
    error: str | None = None
    trace: Trace | None = None  # generate's observer (None in serve)
    stepwise: bool = False  # the loop reads the state after every step (a trace, a block table)
    spec: SpecRequest | None = None  # speculative decoding: rings, draft, verify records

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

    @property
    def inconsistent(self) -> bool:
        """The teaching restore: MLA at the token match, KDA at the checkpoint, no replay."""
        return self.trace is not None and self.trace.mode == "inconsistent" and self.restore_at > 0

    def observe(self, stage: str) -> None:
        """Tell ``generate``'s observer (if any) where the request is: "restored", "finished"."""
        if self.trace is not None and self.trace.observe is not None:
            self.trace.observe(stage)

    def bump(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def reset(self) -> None:
        """Back to waiting with nothing held (the caller released slots and locks): a new
        request with the same prompt, arrival, retraction count and trace."""
        tr, n = self.trace, self.retractions
        self.__init__(self.idx, self.ids, self.n_new, self.arrival)  # type: ignore[misc]
        self.retractions, self.trace, self.stepwise = n, tr, tr is not None
        if tr is not None:
            tr.norms.clear()
            tr.replay.clear()

    def report(self, created: int, pools: PoolStats) -> GenerateReport:
        """The finished request's report (``created``: its checkpoints still in the tree);
        a ``Trace`` adds what it observed (``Trace.finish``)."""
        c = self.counts.get
        nan = float("nan")
        mk = StepRecord._make  # one record per consumed chunk or token: the tuple fast path
        untraced = (nan, nan, nan)  # state_norm, dist_to_match, dist_to_uncached
        return GenerateReport(
            prompt=tuple(self.ids),
            tokens=list(self.gen),
            # tokenizer.decode without re-checking ids the model itself produced (argmax over
            # VOCAB = 256 byte tokens); tests/test_serve_bookkeeping.py compares the two
            text=bytes(self.gen).decode("utf-8", errors="replace"),
            logits=np.array(self.logit_rows).reshape(len(self.gen), VOCAB),
            token_match=self.token_match,
            restore_at=self.restore_at,
            replayed=0 if self.inconsistent else self.token_match - self.restore_at,
            prefilled=self.P - self.token_match,
            decoded=self.n_new - 1,
            restore="exact" if self.trace is None else self.trace.mode,
            planned_checkpoints=tuple(self.planned),
            checkpoints=tuple(self.parked),
            checkpoints_created=created,
            checkpoints_existed=c("existed", 0),
            checkpoints_skipped=c("skipped", 0),
            copies=c("copies", 0),
            donations=c("donations", 0),
            track_writes=c("track_writes", 0),
            evicted_states=c("evicted_states", 0),
            evicted_kv_tokens=c("evicted_kv", 0),
            restore_error=self.restore_error,
            step_log=tuple([mk(rec + untraced) for rec in self.step_log]),
            replay_states=None,
            ref_logits=None,
            ref_max_abs_diff=None,
            pools=pools,
            seconds=self.seconds,
            verify_steps=() if self.spec is None else tuple(self.spec.verifies),
        )
