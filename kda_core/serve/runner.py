"""Executes one scheduler batch on TinyHybrid: one packed forward for every request in it.

Decodes feed their last generated token, prefill chunks the next slice of their prompt; all of
it goes through ``serve.batch.forward_batch`` in one call (varlen packed prefill + batched
decode), each request from its own state. The new states replace the requests' states (the
lifecycle then binds them to their active slots); the logits of each request come back in
batch order.
"""

from __future__ import annotations

import time

import numpy as np

from kda_core.model import TinyHybrid
from kda_core.serve.batch import forward_batch
from kda_core.serve.request import RequestState
from kda_core.serve.scheduler import Batch

__all__ = ["Runner"]


class Runner:
    def __init__(self, model: TinyHybrid) -> None:
        self.model = model
        self.seconds = 0.0

    def run(self, batch: Batch) -> list[tuple[RequestState, int, np.ndarray]]:
        """-> (request, tokens consumed, logits [n, vocab]) for every request in the batch."""
        t0 = time.perf_counter()
        work: list[tuple[RequestState, list[int]]] = [(r, [r.gen[-1]]) for r in batch.decode]
        for r, n in batch.prefill:
            work.append((r, r.ids[r.pos : r.pos + n]))
        states = [r.state for r, _ in work]
        logits, new = forward_batch(self.model, [seq for _, seq in work], states)  # type: ignore[arg-type]
        out = []
        for (r, seq), lg, st in zip(work, logits, new):
            r.state = st
            out.append((r, len(seq), lg))
        self.seconds += time.perf_counter() - t0
        return out
