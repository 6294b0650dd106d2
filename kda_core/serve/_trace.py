"""What ``Engine.generate`` observes of its request (``generate`` is ``serve([request])`` with a
``Trace``): the replay cuts (``step_replay``), the state after every step, the distances to the
replayed and the uncached state at the token match, the recorded states, the reference run,
the teaching restore mode and the observe callbacks. docs/serving.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from kda_core._checks import rel_error
from kda_core.model import TinyHybrid
from kda_core.serve.report import GenerateReport


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

    def replay_cuts(self, start: int, token_match: int, prompt_len: int) -> range:
        """Extra prefill cuts: every token of the replay when stepping it."""
        if not self.step_replay:
            return range(0)
        return range(start + 1, min(token_match, prompt_len))

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
