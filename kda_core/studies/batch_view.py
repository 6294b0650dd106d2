"""Data for the batch view: several requests served at once on one shared state pool.

``batch_view`` runs ``Engine.serve`` on a few prompts and returns, per scheduler step, what each
request did (``PHASES``: not arrived yet, waiting, a prefill chunk, a decode token, retracted,
finished, rejected), the tokens of the step, and the state pool by kind (slots held by running
requests, cached checkpoints, free) next to the planner's cap (``sizing.max_running_requests``)
and SGLang's capping message. With ``reference=True`` each request is also run alone and
uncached, and the largest logit difference is reported (0 up to rounding: the batch does not
change any answer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core.model import TinyHybrid
from kda_core.serve.engine import Engine, Request

PHASES: tuple[str, ...] = (
    "not_arrived",
    "waiting",
    "prefill",
    "decode",
    "retracted",
    "finished",
    "rejected",
)
MAX_REQUESTS = 64


@dataclass(frozen=True, slots=True)
class BatchView:
    """``phase [n_requests, n_steps]`` holds indices into ``PHASES``; per-step series are
    ``[n_steps]``; per-request values ``[n_requests]`` (-1 where a request never got there)."""

    prompts: tuple[str, ...]
    phase: np.ndarray
    running: np.ndarray
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray
    slots_running: np.ndarray
    slots_cached: np.ndarray
    slots_free: np.ndarray
    state_slots: int
    strategy: str
    max_running: int  # what the scheduler allowed (the planner's cap, or the requested one)
    planner_max_running: int  # sizing.max_running_requests(state_slots, strategy)
    capping_message: str | None
    restore_at: np.ndarray
    token_match: np.ndarray
    admitted_step: np.ndarray  # first admission
    finished_step: np.ndarray
    retractions: np.ndarray
    rejected: dict[int, str]
    texts: tuple[str, ...]
    max_abs_logit_diff: float | None  # vs each request alone, uncached (reference=True)


def _phase_matrix(rep, arrivals: Sequence[int], n: int) -> np.ndarray:
    code = {p: i for i, p in enumerate(PHASES)}
    out = np.zeros((n, len(rep.steps)), np.int8)
    for s, row in enumerate(rep.steps):
        dec = set(row.running[: row.decode_tokens])
        pre = set(row.running[row.decode_tokens :])
        for i in range(n):
            if row.phases[i] == "rejected":
                p = "rejected"
            elif s < arrivals[i]:
                p = "not_arrived"
            elif i in row.retracted:
                p = "retracted"
            elif i in dec:
                p = "decode"
            elif i in pre:
                p = "prefill"
            elif row.phases[i] == "finished":
                p = "finished"
            else:
                p = "waiting"
            out[i, s] = code[p]
    return out


def batch_view(
    prompts: Sequence[str],
    max_new_tokens: int | Sequence[int] = 8,
    arrivals: Sequence[int] | None = None,
    *,
    strategy: str = "extra_buffer",
    state_slots: int = 20,
    max_batch_tokens: int = 64,
    max_running_requests: int | None = None,
    kv_tokens: int | None = None,
    chunk_size: int = 16,
    model: TinyHybrid | None = None,
    reference: bool = False,
) -> BatchView:
    """Serve ``prompts`` (at most 64) together and package the per-step view (see module doc).

    ``max_new_tokens`` is one value or one per prompt; ``arrivals`` the scheduler step of each
    (default all 0). The other arguments are ``Engine`` / ``Engine.serve``'s."""
    if isinstance(prompts, str) or not 1 <= len(prompts) <= MAX_REQUESTS:
        raise ValueError(f"prompts must be a list of 1 to {MAX_REQUESTS} strings")
    n = len(prompts)
    news = [max_new_tokens] * n if isinstance(max_new_tokens, int) else list(max_new_tokens)
    arr = [0] * n if arrivals is None else list(arrivals)
    if len(news) != n or len(arr) != n:
        raise ValueError(f"max_new_tokens and arrivals must give one value per prompt ({n})")
    e = Engine(model=model, strategy=strategy, state_slots=state_slots, chunk_size=chunk_size)
    reqs = [Request(p, m, a) for p, m, a in zip(prompts, news, arr)]
    rep = e.serve(
        reqs,
        max_batch_tokens=max_batch_tokens,
        max_running_requests=max_running_requests,
        kv_tokens=kv_tokens,
    )
    rows = rep.steps

    def series(name: str) -> np.ndarray:
        return np.array([getattr(r, name) for r in rows], np.int64)

    def per_request(fn) -> np.ndarray:
        return np.array([-1 if r is None else fn(r) for r in rep.reports], np.int64)

    admitted = np.full(n, -1, np.int64)
    finished = np.full(n, -1, np.int64)
    retractions = np.zeros(n, np.int64)
    for row in rows:
        for i in row.admitted:
            admitted[i] = row.step if admitted[i] < 0 else admitted[i]
        for i in row.finished:
            finished[i] = row.step
        for i in row.retracted:
            retractions[i] += 1
    diff = None
    if reference:
        diff = 0.0
        for r, rq in zip(rep.reports, reqs):
            if r is not None:
                _, ref = e.model.generate(list(r.prompt), rq.max_new_tokens)
                diff = max(diff, float(np.max(np.abs(ref - r.logits))))
    return BatchView(
        prompts=tuple(prompts),
        phase=_phase_matrix(rep, arr, n),
        running=np.array([len(r.running) for r in rows], np.int64),
        prefill_tokens=series("prefill_tokens"),
        decode_tokens=series("decode_tokens"),
        slots_running=series("slots_running"),
        slots_cached=series("slots_cached"),
        slots_free=series("slots_free"),
        state_slots=state_slots,
        strategy=strategy,
        max_running=rep.max_running,
        planner_max_running=sizing.max_running_requests(state_slots, strategy),
        capping_message=rep.capping_message,
        restore_at=per_request(lambda r: r.restore_at),
        token_match=per_request(lambda r: r.token_match),
        admitted_step=admitted,
        finished_step=finished,
        retractions=retractions,
        rejected=dict(rep.rejected),
        texts=tuple("" if r is None else r.text for r in rep.reports),
        max_abs_logit_diff=diff,
    )
