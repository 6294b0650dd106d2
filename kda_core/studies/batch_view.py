"""Data for the batch view: several requests served at once on one shared state pool.

``batch_view`` runs ``Engine.serve`` on a few prompts and returns, per scheduler step, what each
request did (``PHASES``: not arrived yet, waiting, a prefill chunk, a decode token, retracted,
finished, rejected), the tokens of the step, and the state pool by kind (slots held by running
requests, cached checkpoints, free) next to the planner's cap (``sizing.max_running_requests``)
and SGLang's capping message. With ``reference=True`` each request is also run alone and
uncached, and the largest logit difference is reported (0 up to rounding: the batch does not
change any answer). The CSV rows of its figures are ``exports.columns("batch_phases" |
"batch_pool" | "batch_index", view)``; ``admission_check`` is the memory planner's live run
(a scaled pool, a few short requests).

Two engine options are drawn per step. ``unified_memory`` (bytes) serves from one byte buffer
(``Engine(unified_memory=...)``): ``BatchView.border`` is each step's (end of the state side,
start of the KV side), and a request whose slots and prompt KV the buffer could not hold is
``waiting_memory`` in ``phase`` (``held_for_memory`` per step; the pool columns carry the
bytes). ``cuda_graph_bs`` runs decode on captured sizes (``Engine(cuda_graph_bs=...)``): per
all-decode step the real batch, the captured size it was padded to and the state index of each
row (a request's slot + 1; 0: SGLang's sink slot for padding rows) (the ``batch_index`` columns).
Left out: sampling (greedy), the KV pool's own series (``kv_tokens`` only retracts / rejects).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache

import numpy as np

from kda_core import sizing
from kda_core._checks import check_bool
from kda_core.model import TinyHybrid, encode
from kda_core.serve.engine import Engine, Request
from kda_core.studies._batch_options import option_fields

PHASES: tuple[str, ...] = (
    "not_arrived",
    "waiting",
    "waiting_memory",  # the head of the queue: its state slots / prompt KV did not fit
    "prefill",
    "decode",
    "retracted",
    "finished",
    "rejected",
)
_MAX_REQUESTS = 64
# the prefix_replay app's default batch (one line each: the app's text box takes one prompt per
# line): three requests at step 0 and three later ones, all on one system prompt, so the later
# ones restore it from the tree that the first ones fill in flight
_SYS = (
    "System: You are Kimi, a concise assistant. Answer in one line. "
    "Tools: weather(city) -> forecast; calc(expr) -> number. User: "
)
DEFAULT_PROMPTS: tuple[str, ...] = tuple(
    _SYS + q + " Assistant:"
    for q in (
        "What's the weather in Paris?",
        "Compute 17*23.",
        "What's the weather in Berlin?",
        "What's the weather in Tokyo?",
        "Compute 3+4.",
        "你好！",
    )
)
DEFAULT_ARRIVALS: tuple[int, ...] = (0, 0, 0, 2, 4, 6)
# the planner's live check: short prompts, more of them than any strategy admits on 16 slots
_ADMISSION_PROMPTS: tuple[str, ...] = tuple(f"Request {i}: count to five." for i in range(8))


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
    held_for_memory: np.ndarray  # [n_steps] the head that could not get its memory (-1: none)
    retracted_steps: int = 0  # steps in which at least one request was retracted
    kv_tokens: int | None = None  # the MLA KV token pool (None: no limit)
    # one byte buffer (unified_memory): its size, a state slot's and a KV token's bytes, and
    # per step [n_steps, 2] (where the state side ends, where the KV side begins)
    buffer_bytes: int | None = None
    slot_bytes: int = 0
    kv_token_bytes: int = 0
    border: np.ndarray | None = None
    # decode on captured sizes (cuda_graph_bs): per step the real batch and the captured size
    # (0: an eager step, prefill in it), and [n_steps, widest] state indices (-1: no row)
    graph_bs: tuple[int, ...] | None = None
    graph_batch: np.ndarray | None = None
    graph_padded: np.ndarray | None = None
    state_index: np.ndarray | None = None
    row_request: np.ndarray | None = None  # [n_steps, widest] request per row (-1: sink/none)
    # the KV token pool a request needs to be admitted at all: its prompt and every new token
    # but the last (the engine rejects it when that exceeds kv_tokens: serve.loop's
    # admission), and the smallest pool that admits one of them
    kv_needed: np.ndarray | None = None
    smallest_kv_pool: int = 0

    @property
    def n_steps(self) -> int:
        return int(self.running.size)

    @property
    def peak_running(self) -> int:
        """Most requests running in one scheduler step (0 if nothing ran)."""
        return int(self.running.max()) if self.running.size else 0

    @property
    def peak_step(self) -> int:
        """The first step at ``peak_running`` (-1 if nothing ran)."""
        return int(np.argmax(self.running)) if self.running.size else -1

    def slots_at(self, step: int) -> dict[str, int]:
        """The state pool by kind after ``step`` (running / cached / free slots)."""
        return {
            "running": int(self.slots_running[step]),
            "cached": int(self.slots_cached[step]),
            "free": int(self.slots_free[step]),
        }

    @property
    def capped(self) -> bool:
        """The state pool capped concurrency AND the workload reached the cap."""
        return self.capping_message is not None and self.peak_running >= self.max_running


@cache
def _shared_model() -> TinyHybrid:
    """The shipped TinyHybrid, loaded once (the default ``model`` of this module's studies)."""
    return TinyHybrid()


def _phase_matrix(rep, arrivals: Sequence[int], n: int) -> np.ndarray:
    code = {p: i for i, p in enumerate(PHASES)}
    out = np.zeros((n, len(rep.steps)), np.int8)
    for s, row in enumerate(rep.steps):
        dec = set(row.running[: row.decode_tokens])
        pre = set(row.running[row.decode_tokens :])
        for i in range(n):
            if row.phases[i] == "rejected":
                p = "rejected"
            elif row.step < arrivals[i]:
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
                p = "waiting_memory" if row.held_for_memory == i else "waiting"
            out[i, s] = code[p]
    return out


def _per_request_steps(rows, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per request: the step of its first admission, of its finish (-1: never), retractions."""
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
    return admitted, finished, retractions


def _engine(
    model: TinyHybrid | None,
    strategy: str,
    state_slots: int | None,
    chunk_size: int,
    cuda_graph_bs: Sequence[int] | None,
    unified_memory: int | None,
) -> Engine:
    return Engine(
        model=model or _shared_model(),
        strategy=strategy,
        state_slots=state_slots,
        chunk_size=chunk_size,
        cuda_graph_bs=cuda_graph_bs,
        unified_memory=unified_memory,
    )


def _or_none(i: int | None) -> int:
    return -1 if i is None else i


def batch_view(
    prompts: Sequence[str],
    max_new_tokens: int | Sequence[int] = 8,
    arrivals: Sequence[int] | None = None,
    *,
    strategy: str = "extra_buffer",
    state_slots: int | None = 20,
    max_batch_tokens: int = 64,
    max_running_requests: int | None = None,
    kv_tokens: int | None = None,
    chunk_size: int = 16,
    cuda_graph_bs: Sequence[int] | None = None,
    unified_memory: int | None = None,
    model: TinyHybrid | None = None,
    reference: bool = False,
) -> BatchView:
    """Serve ``prompts`` (at most 64) together and package the per-step view (see module doc).

    ``max_new_tokens`` is one value or one per prompt; ``arrivals`` the scheduler step of each
    (default all 0). The other arguments are ``Engine`` / ``Engine.serve``'s (with
    ``unified_memory`` the buffer sets the slots and the KV: ``state_slots`` None, no
    ``kv_tokens``)."""
    if isinstance(prompts, str) or not 1 <= len(prompts) <= _MAX_REQUESTS:
        raise ValueError(f"prompts must be a list of 1 to {_MAX_REQUESTS} strings")
    check_bool("reference", reference)
    n = len(prompts)
    news = [max_new_tokens] * n if isinstance(max_new_tokens, int) else list(max_new_tokens)
    arr = [0] * n if arrivals is None else list(arrivals)
    if len(news) != n or len(arr) != n:
        raise ValueError(f"max_new_tokens and arrivals must give one value per prompt ({n})")
    e = _engine(model, strategy, state_slots, chunk_size, cuda_graph_bs, unified_memory)
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

    admitted, finished, retractions = _per_request_steps(rows, n)
    need = _kv_needed(prompts, news)
    return BatchView(
        prompts=tuple(prompts),
        phase=_phase_matrix(rep, arr, n),
        running=np.array([len(r.running) for r in rows], np.int64),
        prefill_tokens=series("prefill_tokens"),
        decode_tokens=series("decode_tokens"),
        slots_running=series("slots_running"),
        slots_cached=series("slots_cached"),
        slots_free=series("slots_free"),
        state_slots=e.state_slots,
        strategy=strategy,
        max_running=rep.max_running,
        planner_max_running=sizing.max_running_requests(e.state_slots, strategy),
        capping_message=rep.capping_message,
        restore_at=per_request(lambda r: r.restore_at),
        token_match=per_request(lambda r: r.token_match),
        admitted_step=admitted,
        finished_step=finished,
        retractions=retractions,
        rejected=dict(rep.rejected),
        texts=tuple("" if r is None else r.text for r in rep.reports),
        max_abs_logit_diff=_reference_diff(e, rep.reports, reqs) if reference else None,
        held_for_memory=np.array(
            [-1 if r.held_for_memory is None else r.held_for_memory for r in rows], np.int64
        ),
        retracted_steps=sum(1 for r in rows if r.retracted),
        kv_tokens=kv_tokens,
        **option_fields(e, rows),
        kv_needed=need,
        smallest_kv_pool=int(need.min()),
    )


def _kv_needed(prompts: Sequence[str | Sequence[int]], max_new_tokens: Sequence[int]) -> np.ndarray:
    """Per request, the KV tokens it needs to be admitted: its prompt (UTF-8 bytes of a text,
    the tokenizer's ids) and every new token but the last, whose KV is never written."""
    lens = [len(encode(p)) if isinstance(p, str) else len(p) for p in prompts]
    return np.array([n + m - 1 for n, m in zip(lens, max_new_tokens)], np.int64)


def _reference_diff(e: Engine, reports: list, reqs: list[Request]) -> float:
    """The largest |logit| difference of the served requests against each alone, uncached."""
    diff = 0.0
    for r, rq in zip(reports, reqs):
        if r is not None:
            _, ref = e.model.generate(list(r.prompt), rq.max_new_tokens)
            diff = max(diff, float(np.max(np.abs(ref - r.logits))))
    return diff


def buffer_floor(strategy: str = "extra_buffer", model: TinyHybrid | None = None) -> int:
    """The smallest ``unified_memory`` the engine takes for ``strategy`` (overlap as the engine
    resolves it): one request's reserved slots (``sizing.request_slots``) and one KV token."""
    m = model or _shared_model()
    kv_token = 8 * len(m.mla_layers) * m.config.mla_latent  # float64 latents, every MLA layer
    reserved = sizing.request_slots(strategy, strategy != "no_buffer").reserved
    slot = sum(st.nbytes for st in m.new_state().kda)  # one native state slot: S and conv
    return reserved * slot + kv_token


@lru_cache(maxsize=8)
def admission_check(
    strategy: str = "extra_buffer",
    *,
    state_slots: int = 16,
    max_new_tokens: int = 6,
    model: TinyHybrid | None = None,
    ssm_dtype: str | None = None,
) -> BatchView:
    """The memory planner's live run: ``ADMISSION_PROMPTS`` (8 short requests, all at step 0)
    served on a ``state_slots`` pool under ``strategy`` (overlap on, as the engine runs). With
    enough requests waiting, ``peak_running`` reaches ``planner_max_running``; the report
    carries SGLang's capping message when the pool caps it, worded for the planner's
    ``ssm_dtype`` (the tiny model's own state is float64: without it the message would advise
    bfloat16 whatever the plan chose). Cached per arguments (read-only)."""
    v = batch_view(
        list(_ADMISSION_PROMPTS),
        max_new_tokens,
        strategy=strategy,
        state_slots=state_slots,
        max_batch_tokens=64,
        model=model,
    )
    if ssm_dtype is None or v.capping_message is None:
        return v
    msg = sizing.capping_message(state_slots, strategy, True, False, ssm_dtype)
    return replace(v, capping_message=msg)
