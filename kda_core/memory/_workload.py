"""Request lengths and arrival steps for a pool replay (`kda_core.memory._replay`).

A `Workload` is N requests in arrival order (``arrival_step``, ``input_len``, ``output_len``,
``phase``). `shifting_mix` is the seeded two-phase mix the unified_memory study uses (a chat
phase of short prompts, then a long-context phase); `from_trace` reads the lengths and arrivals
of a Mooncake trace; `from_lengths` validates any other lengths.
Left out: prefix sharing between requests (a replay never reuses KV).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core._checks import check_seed

MAX_REQUESTS = 200_000
MAX_STEPS = 1_000_000
MAX_TOKENS_PER_REQUEST = 4_000_000


@dataclass(frozen=True, slots=True)
class Workload:
    """Requests in arrival order: ``arrival_step [N]`` (non-decreasing), ``input_len [N]`` >= 1,
    ``output_len [N]`` >= 0, ``phase [N]`` indexing ``phase_names``; all int64."""

    arrival_step: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    phase: np.ndarray
    phase_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.input_len.shape[0])


def from_lengths(
    input_len: Sequence[int] | np.ndarray,
    output_len: Sequence[int] | np.ndarray,
    arrival_step: Sequence[int] | np.ndarray | None = None,
    phase: Sequence[int] | np.ndarray | None = None,
    phase_names: tuple[str, ...] = ("all",),
) -> Workload:
    """Validate and package request lengths (all arrive at step 0 when ``arrival_step`` is None)."""
    i = np.asarray(input_len)
    o = np.asarray(output_len)
    if i.ndim != 1 or o.shape != i.shape or not 1 <= i.size <= MAX_REQUESTS:
        raise ValueError(
            f"input_len and output_len must be 1-D of equal length in [1, {MAX_REQUESTS}], "
            f"got shapes {i.shape} and {o.shape}"
        )
    a = np.zeros(i.size, np.int64) if arrival_step is None else np.asarray(arrival_step)
    ph = np.zeros(i.size, np.int64) if phase is None else np.asarray(phase)
    for name, x in (("input_len", i), ("output_len", o), ("arrival_step", a), ("phase", ph)):
        if x.shape != i.shape or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{name} must be an integer array of shape {i.shape}")
    if i.min() < 1 or o.min() < 0 or (i + o).max() > MAX_TOKENS_PER_REQUEST:
        raise ValueError(
            f"input_len must be >= 1, output_len >= 0, input + output <= {MAX_TOKENS_PER_REQUEST}"
        )
    if a.min() < 0 or a.max() > MAX_STEPS or (np.diff(a) < 0).any():
        raise ValueError(f"arrival_step must be non-decreasing in [0, {MAX_STEPS}]")
    if ph.min() < 0 or ph.max() >= len(phase_names):
        raise ValueError(f"phase must index phase_names (size {len(phase_names)})")
    return Workload(
        a.astype(np.int64),
        i.astype(np.int64),
        o.astype(np.int64),
        ph.astype(np.int64),
        tuple(phase_names),
    )


def shifting_mix(
    n_chat: int = 3000,
    n_long: int = 150,
    seed: int = 0,
    chat_rate: float = 15.0,
    long_rate: float = 0.6,
    chat_input_median: int = 1500,
    chat_output_median: int = 300,
    long_input_range: tuple[int, int] = (32_768, 98_304),
    long_output_median: int = 500,
) -> Workload:
    """A chat phase of short prompts, then a long-context phase (seeded, Poisson arrivals).

    Chat: input ~ lognormal(median ``chat_input_median``, sigma 0.5), output ~ lognormal(median
    ``chat_output_median``, sigma 0.5). Long: input ~ uniform ``long_input_range``, output ~
    lognormal(median ``long_output_median``, sigma 0.3). Arrivals per step are Poisson at
    ``chat_rate`` then ``long_rate`` (the long phase starts after the last chat arrival); the
    defaults overload a K3 GPU in both phases so that memory decides concurrency.
    """
    n_chat = _check_int("n_chat", n_chat, 0, MAX_REQUESTS)
    n_long = _check_int("n_long", n_long, 0, MAX_REQUESTS - n_chat)
    if n_chat + n_long == 0:
        raise ValueError("n_chat + n_long must be >= 1")
    for name, r in (("chat_rate", chat_rate), ("long_rate", long_rate)):
        if not 0.001 <= float(r) <= 1e6:
            raise ValueError(f"{name} must be in [0.001, 1e6], got {r}")
    lo, hi = (int(x) for x in long_input_range)
    if not 1 <= lo <= hi <= MAX_TOKENS_PER_REQUEST // 2:
        raise ValueError(f"long_input_range must satisfy 1 <= lo <= hi <= 2e6, got {(lo, hi)}")
    _check_int("chat_input_median", chat_input_median, 1, 1_000_000)
    _check_int("chat_output_median", chat_output_median, 1, 1_000_000)
    _check_int("long_output_median", long_output_median, 1, 1_000_000)
    rng = np.random.default_rng(check_seed("seed", seed))
    ci = np.maximum(1, np.round(chat_input_median * np.exp(0.5 * rng.standard_normal(n_chat))))
    co = np.maximum(1, np.round(chat_output_median * np.exp(0.5 * rng.standard_normal(n_chat))))
    li = rng.integers(lo, hi + 1, size=n_long)
    lout = np.maximum(1, np.round(long_output_median * np.exp(0.3 * rng.standard_normal(n_long))))

    def arrivals(n: int, rate: float, start: int) -> np.ndarray:
        gaps = rng.exponential(1.0 / rate, size=n)
        return start + np.floor(np.cumsum(gaps)).astype(np.int64)

    a_chat = arrivals(n_chat, chat_rate, 0)
    start = int(a_chat[-1]) + 1 if n_chat else 0
    a_long = arrivals(n_long, long_rate, start)
    return from_lengths(
        np.concatenate([ci, li]).astype(np.int64),
        np.concatenate([co, lout]).astype(np.int64),
        np.concatenate([a_chat, a_long]),
        np.concatenate([np.zeros(n_chat, np.int64), np.ones(n_long, np.int64)]),
        ("chat", "long-context"),
    )


def from_trace(
    trace: object, seconds_per_step: float = 1.0, max_requests: int = 20_000
) -> Workload:
    """Mooncake lengths and arrivals (any object with ``arrival_s``, ``input_len``,
    ``output_len``, e.g. ``kda_core.workloads.Trace``).

    Arrival step = floor(seconds since the first arrival / ``seconds_per_step``)."""
    if not 1e-6 <= float(seconds_per_step) <= 1e6:
        raise ValueError(f"seconds_per_step must be in [1e-6, 1e6], got {seconds_per_step}")
    n = _check_int("max_requests", max_requests, 1, MAX_REQUESTS)
    try:
        a = np.asarray(trace.arrival_s, dtype=np.float64)[:n]  # type: ignore[attr-defined]
        i = np.asarray(trace.input_len)[:n]  # type: ignore[attr-defined]
        o = np.asarray(trace.output_len)[:n]  # type: ignore[attr-defined]
    except AttributeError as e:
        raise ValueError("trace must have arrival_s, input_len and output_len arrays") from e
    steps = np.floor((a - a.min()) / float(seconds_per_step)).astype(np.int64)
    return from_lengths(i, o, steps)
