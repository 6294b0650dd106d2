"""Plan from a trace: the data the memory planner's trace panel and plots/plot_plan.py draw.

``trace_plan`` runs ``kda_core.plan.sweep`` over ``--mamba-full-memory-ratio`` x
``--chunked-prefill-size`` for SGLang on a trace (an upload or the bundled Mooncake
conversation trace) and returns the points as arrays (cached tokens, max running requests,
TTFT p99, on the Pareto front or not), the recommended point with its launch command and
start-up lines, and the sweep's CSV. docs/plan.md has the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core._checks import check_int
from kda_core.plan import Sweep, sweep
from kda_core.workloads import Trace, bundled_trace

__all__ = ["DEFAULT_RATIOS", "TracePlan", "trace_plan"]

DEFAULT_RATIOS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.9, 1.5)
_DEFAULT_CHUNKS = (4096, 8192)
_MAX_RATIOS = 12
_GIB = 1 << 30


@dataclass(frozen=True, slots=True, eq=False)
class TracePlan:
    """One sweep as arrays in point order (failed points NaN / -1), its choice and its CSV."""

    sweep: Sweep
    ratio: np.ndarray
    chunk: np.ndarray
    max_running: np.ndarray  # -1: failed
    cached_tokens: np.ndarray  # float, NaN: failed
    state_hit_rate: np.ndarray
    ttft_p99_s: np.ndarray
    on_front: np.ndarray  # bool
    best: int  # -1: none
    csv: str


def _column(points: list, key: str, fill: float) -> np.ndarray:
    return np.array([p[key] if p["status"] == "ok" else fill for p in points], dtype=np.float64)


def trace_plan(
    trace: Trace | None = None,
    *,
    n_requests: int = 3000,
    model: str = "kimi-k3",
    tp: int = 8,
    gpu_gib: float = 28.8,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    chunks: Sequence[int] = _DEFAULT_CHUNKS,
    objective: str = "cached_tokens",
    min_running: int | None = 16,
    progress: Callable[[int, int], Any] | None = None,
) -> TracePlan:
    """The sweep of ``ratios`` x ``chunks`` on ``trace`` (None: the bundled conversation
    trace's first ``n_requests``) for ``model`` at ``tp`` with ``gpu_gib`` GiB per GPU."""
    if trace is None:
        n = check_int("n_requests", n_requests, 1, 12_031)
        trace = bundled_trace("conversation").head(n)
    if not isinstance(gpu_gib, (int, float)) or not 0 < float(gpu_gib) <= 4096:
        raise ValueError(f"gpu_gib must be a number of GiB in (0, 4096], got {gpu_gib!r}")
    ratios = list(ratios)
    if not 1 <= len(ratios) <= _MAX_RATIOS:
        raise ValueError(f"ratios must be 1 to {_MAX_RATIOS} values, got {len(ratios)}")
    grid = {"mamba_full_memory_ratio": ratios, "chunked_prefill_size": list(chunks)}
    s = sweep(
        model,
        trace,
        tp=tp,
        rest_bytes=int(float(gpu_gib) * _GIB),
        grid=grid,
        objective=objective,
        min_running=min_running,
        progress=progress,
    )
    pts = s.points
    front = np.zeros(len(pts), dtype=bool)
    front[list(s.pareto)] = True
    return TracePlan(
        s,
        np.array([p["mamba_full_memory_ratio"] for p in pts], dtype=np.float64),
        np.array([p["chunked_prefill_size"] for p in pts], dtype=np.int64),
        _column(pts, "max_running", -1).astype(np.int64),
        _column(pts, "cached_tokens", np.nan),
        _column(pts, "state_hit_rate", np.nan),
        _column(pts, "ttft_p99_s", np.nan),
        front,
        -1 if s.best is None else int(s.best["point"]),
        s.to_csv(),
    )
