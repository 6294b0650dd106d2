"""``RequestState``: one request inside ``serve`` (nano-vllm's ``Sequence``). A retracted
request is reset to ``waiting`` (SGLang ``retract_decode`` releases it without inserting and
re-queues it) and redone from its prompt: greedy decoding makes that run identical.

``Trace``: what ``Engine.generate`` observes of its request (``generate`` is ``serve([request])``
with a ``Trace``): the replay cuts (``step_replay``), the state after every step, the distances
to the replayed and the uncached state at the token match, the recorded states, the reference
run, the teaching restore mode and the observe callbacks. docs/serving.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kda_core._checks import rel_error
from kda_core.model import VOCAB, ModelState, TinyHybrid
from kda_core.serve._pools import RequestSlots
from kda_core.serve.report import GenerateReport, PoolStats, StepRecord
from kda_core.serve.spec import SpecRequest


@dataclass(slots=True, eq=False)
class Trace:
    """The observer of one ``generate`` request (module docstring)."""

    mode: str = "exact"
    step_replay: bool = False
    record_states: bool = False
    reference: bool = False
    observe: Callable[[str], None] | None = None
    norms: list[float] = field(default_factory=list)  # one per step record
    replay: list[np.ndarray] = field(default_factory=list)  # S after restore / each replay step

    def step(self, S: np.ndarray, kind: str) -> None:
        """The state after a step of ``kind`` ("restore", "replay", "prefill", "decode"); the
        runner never writes into a bound state, so keeping a reference is safe."""
        self.norms.append(float(np.sqrt(np.sum(S * S))))
        if kind in ("restore", "replay"):
            self.replay.append(S)

    def finish(self, rep: GenerateReport, model: TinyHybrid, inconsistent: bool) -> GenerateReport:
        """The report with what this trace saw (see the module docstring)."""
        steps = [s._replace(state_norm=n) for s, n in zip(rep.step_log, self.norms)]
        if self.replay and not inconsistent:
            target = self.replay[-1]  # the replayed state at the token match
            unc = None
            if self.step_replay:  # one extra prefill from zero
                ref = model.new_state()
                model.prefill(list(rep.prompt[: rep.token_match]), ref)
                unc = np.stack([st.S for st in ref.kda])
            for i, S in enumerate(self.replay):  # steps[i] is the i-th restore / replay step
                dm = rel_error(S, target)
                du = rel_error(S, unc) if unc is not None else float("nan")
                steps[i] = steps[i]._replace(dist_to_match=dm, dist_to_uncached=du)
        ref_logits = ref_diff = None
        if self.reference:
            _, ref_logits = model.generate(list(rep.prompt), len(rep.tokens))
            ref_diff = float(np.max(np.abs(ref_logits - rep.logits)))
        states = np.stack(self.replay) if self.record_states and self.replay else None
        return replace(
            rep,
            step_log=tuple(steps),
            replay_states=states,
            ref_logits=ref_logits,
            ref_max_abs_diff=ref_diff,
        )


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
    counts: dict[str, int] = field(default_factory=dict)  # ``GenerateReport``'s counters
    retractions: int = 0
    t0: float = 0.0
    seconds: float = 0.0
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
            restore_error=self.restore_error,
            step_log=tuple([mk(rec + untraced) for rec in self.step_log]),
            pools=pools,
            seconds=self.seconds,
            verify_steps=() if self.spec is None else tuple(self.spec.verifies),
            **self.counts,
        )
