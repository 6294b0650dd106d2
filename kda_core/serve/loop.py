"""``Engine.serve``: validate, reject what can never fit, then step scheduler and runner.

One row per scheduler step (``StepRow``) records who ran, how many prefill and decode tokens,
admissions, retractions, finishes, every request's phase, and the state pool by kind:
``running`` (slots held by running requests: active + track slots and their checkpoints not
yet in the tree), ``cached`` (checkpoints owned by the tree) and ``free``. With one shared pool
(INT8 off, ``state_slots`` given) the three add up to ``state_slots``; with INT8 checkpoints
``free`` is the active pool's and ``checkpoint_free`` the INT8 pool's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.model import MAX_TOKENS
from kda_core.serve.lifecycle import Lifecycle
from kda_core.serve.pools import slots_held
from kda_core.serve.request import Request, RequestState
from kda_core.serve.runner import Runner
from kda_core.serve.scheduler import Batch, Scheduler

if TYPE_CHECKING:
    from kda_core.serve.engine import Engine
    from kda_core.serve.report import GenerateReport

__all__ = ["MAX_REQUESTS", "MAX_STEPS", "ServeReport", "StepRow", "serve"]

MAX_REQUESTS = 4096
MAX_STEPS = 1 << 20  # arrivals beyond this are refused (the loop would idle that long)


@dataclass(slots=True, frozen=True)
class StepRow:
    """One scheduler step. Ids are the requests' positions in the input list."""

    step: int
    running: tuple[int, ...]  # ran in this step (decodes, then prefill chunks)
    prefill_tokens: int
    decode_tokens: int
    admitted: tuple[int, ...]
    retracted: tuple[int, ...]
    finished: tuple[int, ...]
    phases: tuple[str, ...]  # per request after the step: waiting/prefill/decode/finished/...
    slots_running: int
    slots_cached: int
    slots_free: int
    checkpoint_free: int | None  # the INT8 checkpoint pool's free slots (None: shared pool)


@dataclass(slots=True)
class ServeReport:
    """What ``Engine.serve`` did: one report per request (input order; None if rejected)."""

    reports: list[GenerateReport | None]
    steps: list[StepRow]
    rejected: dict[int, str]  # request id -> SGLang-style message
    max_running: int
    capping_message: str | None
    peak_running: int
    retractions: int
    # CPU seconds of this process (time.process_time: on a shared machine the wall clock also
    # counts time descheduled, which lands on whichever part happened to run)
    seconds: float  # the whole serve
    scheduler_seconds: float  # Scheduler.schedule
    runner_seconds: float  # the model passes (Runner.run)


def _check_requests(engine: Engine, requests: Any) -> list[RequestState]:
    if isinstance(requests, (str, bytes, Request)) or not hasattr(requests, "__len__"):
        raise ValueError("requests must be a sequence of kda_core.engine.Request")
    if not 1 <= len(requests) <= MAX_REQUESTS:
        raise ValueError(f"requests must hold between 1 and {MAX_REQUESTS}, got {len(requests)}")
    out = []
    for i, rq in enumerate(requests):
        if not isinstance(rq, Request):
            raise ValueError(f"requests[{i}] must be a Request, got {type(rq).__name__}")
        ids = engine._tokens(rq.prompt)
        n_new = check_int(f"requests[{i}].max_new_tokens", rq.max_new_tokens, 1, 4096)
        if isinstance(rq.arrival, bool) or not isinstance(rq.arrival, int):
            raise ValueError(f"requests[{i}].arrival must be an integer step >= 0")
        if rq.arrival < 0:
            raise ValueError(
                f"requests[{i}].arrival must be in [0, {MAX_STEPS}] (scheduler steps from the "
                f"start of serve; {rq.arrival} is in the past)"
            )
        check_int(f"requests[{i}].arrival", rq.arrival, 0, MAX_STEPS)
        if len(ids) + n_new - 1 > MAX_TOKENS:
            raise ValueError(f"requests[{i}]: prompt + max_new_tokens exceeds {MAX_TOKENS}")
        out.append(RequestState(i, ids, n_new, rq.arrival))
    return out


def reject_message(r: RequestState, kv_tokens: int) -> str:
    """SGLang's wording (``tokenizer_manager.py`` ``_validate_one_request``) for a request
    whose KV can never fit: here the limit is the KV token pool, and a request needs its
    prompt plus every output but the last."""
    return (
        f"Requested token count exceeds the KV cache capacity of {kv_tokens} tokens. You "
        f"requested a total of {r.P + r.n_new} tokens: {r.P} tokens from the input messages "
        f"and {r.n_new} tokens for the completion ({r.total} of them are cached). Please "
        f"reduce the number of tokens in the input messages or the completion to fit within "
        f"the limit."
    )


def concurrency(engine: Engine, requested: int | None) -> tuple[int, str | None]:
    """Max running requests and SGLang's capping message (shared / INT8 active pool); the
    legacy per-request pool (no ``state_slots``) runs ``active_slots // slots held``."""
    if engine.state_slots is None:
        cap = max(engine.active.capacity // slots_held(engine.strategy, engine.overlap), 1)
        return (cap if requested is None else min(cap, requested)), None
    cap = sizing.max_running_requests(engine.state_slots, engine.strategy, engine.overlap)
    msg = sizing.capping_message(
        engine.state_slots, engine.strategy, engine.overlap, requested=requested
    )
    return (cap if requested is None else min(cap, requested)), msg


def _slots(engine: Engine) -> tuple[int, int, int, int | None]:
    tree_states = engine.cache.n_states
    held = engine.active.n_used + engine.checkpoints.n_used - tree_states
    if engine.state_slots is not None and not engine.int8:
        return held, tree_states, engine.active.n_free, None
    return held, tree_states, engine.active.n_free, engine.checkpoints.n_free


def serve(
    engine: Engine,
    requests: Any,
    *,
    max_batch_tokens: int,
    max_running_requests: int | None,
    kv_tokens: int | None,
) -> ServeReport:
    t0 = time.process_time()
    states = _check_requests(engine, requests)
    cap, msg = concurrency(engine, max_running_requests)
    rejected: dict[int, str] = {}
    live = []
    for r in states:
        if kv_tokens is not None and r.total > kv_tokens:
            r.phase, r.error = "rejected", reject_message(r, kv_tokens)
            rejected[r.idx] = r.error
        else:
            live.append(r)
    engine._serves += 1
    life = Lifecycle(engine, engine._serves)
    sched = Scheduler(
        live, life, max_running=cap, max_batch_tokens=max_batch_tokens, kv_tokens=kv_tokens
    )
    runner = Runner(engine.model, engine.active)
    reports: list[GenerateReport | None] = [None] * len(states)
    rows: list[StepRow] = []
    step = 0
    try:
        while sched.running or sched.waiting or life.deferred:
            b = sched.schedule(step)
            if b.empty and not sched.running and not sched.waiting:
                life.end_step()  # the last step's deferred post-processing
                continue
            if b.empty:  # nothing runs: jump to the next arrival (no rows for idle steps)
                if not sched.idle(step):
                    raise RuntimeError("serve: no request can run and none is coming (a bug)")
                step = sched.waiting[0].arrival
                continue
            finished = []
            for r, n, logits in runner.run(b):
                if life.advanced(r, n, logits):
                    reports[r.idx] = life.finish(r, step)
                    engine._count(reports[r.idx])
                    sched.done(r)
                    finished.append(r.idx)
            life.end_step()  # overlap: the previous step's post-processing, after this forward
            rows.append(_row(engine, step, b, finished, states))
            step += 1
    except BaseException:
        life.drop_deferred()
        for r in list(sched.running):
            life.release(r)
        raise
    return ServeReport(
        reports=reports,
        steps=rows,
        rejected=rejected,
        max_running=cap,
        capping_message=msg,
        peak_running=sched.peak_running,
        retractions=sum(r.retractions for r in states),
        seconds=time.process_time() - t0,
        scheduler_seconds=sched.seconds,
        runner_seconds=runner.seconds,
    )


def _row(engine: Engine, step: int, b: Batch, finished: list[int], states) -> StepRow:
    held, cached, free, ck_free = _slots(engine)
    ran = tuple(r.idx for r in b.decode) + tuple(r.idx for r, _ in b.prefill)
    if b.retracted:
        retracted = {r.idx for r in b.retracted}
        phases = tuple(["retracted" if r.idx in retracted else r.phase for r in states])
    else:  # the common step: every request's phase as it is
        retracted = set()
        phases = tuple([r.phase for r in states])
    return StepRow(
        step=step,
        running=ran,
        prefill_tokens=sum(n for _, n in b.prefill),
        decode_tokens=len(b.decode),
        admitted=tuple(r.idx for r in b.admitted),
        retracted=tuple(sorted(retracted)),
        finished=tuple(finished),
        phases=phases,
        slots_running=held,
        slots_cached=cached,
        slots_free=free,
        checkpoint_free=ck_free,
    )
