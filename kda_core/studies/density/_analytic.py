"""The analytic density model: replay ~ K/2 and memory ~ 1/K from a trace's ideal match points.

``workloads.ideal_prefix_tokens`` gives the longest prefix an infinite KV cache would match;
with a checkpoint every K tokens the state hit is ``sum(floor(ideal_i / K) * K) / sum(input)``,
replay per hit ``mean(ideal_i - floor(ideal_i / K) * K)`` and memory one checkpoint per K
tokens of distinct prefix. Derivations: docs/simulator.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core.workloads import Trace, ideal_prefix_tokens


def check_intervals(trace: Trace, intervals: Sequence[int]) -> list[int]:
    ks = [int(k) for k in intervals]
    if not 1 <= len(ks) <= 64:
        raise ValueError(f"intervals must hold 1..64 values, got {len(ks)}")
    for k in ks:
        if k < trace.block_size or k % trace.block_size or k > 1 << 24:
            raise ValueError(
                f"intervals must be multiples of the block size {trace.block_size} in "
                f"[{trace.block_size}, 2**24], got {k}"
            )
    return ks


@dataclass(frozen=True, slots=True, eq=False)
class DensityAnalytic:
    """The analytic model for intervals ``[I]`` (see the module docstring)."""

    intervals: np.ndarray  # [I] tokens
    state_hit_rate: np.ndarray  # [I]
    mean_replay_per_hit: np.ndarray  # [I] tokens, from the trace's ideal match points
    uniform_replay: np.ndarray  # [I] (K - block) / 2
    states: np.ndarray  # [I] distinct_blocks * block / K
    state_bytes: np.ndarray  # [I] states * bytes per checkpoint
    states_exact: np.ndarray  # [I] distinct K-aligned full-block prefixes (unlimited count)
    ideal_token_hit_rate: float
    replay_slope: float  # log-log slope of mean_replay_per_hit vs K (nan if < 2 positive points)

    @property
    def replay_curve(self) -> np.ndarray:
        """The one analytic replay-per-hit curve the app and the figure draw [I] (tokens)."""
        return self.mean_replay_per_hit


REPLAY_SLOPE_K = 0.5
"""``replay ~K`` is claimed only where the log-log slope of replay per hit vs K is >= this."""


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log(y) vs log(x) over the points with x, y > 0 (nan if < 2)."""
    xa = np.asarray(x, dtype=np.float64).ravel()
    ya = np.asarray(y, dtype=np.float64).ravel()
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same length, got {xa.size} and {ya.size}")
    m = (xa > 0) & (ya > 0) & np.isfinite(ya)
    if np.unique(xa[m]).size < 2:
        return math.nan
    lx, ly = np.log(xa[m]), np.log(ya[m])
    lx0 = lx - lx.mean()
    return float((lx0 * (ly - ly.mean())).sum() / (lx0 * lx0).sum())


def analytic_model(
    trace: Trace, intervals: Sequence[int], state_bytes_per_checkpoint: int
) -> DensityAnalytic:
    """Replay ~ K/2 and memory ~ 1/K, evaluated on ``trace``'s ideal match points."""
    ks = check_intervals(trace, intervals)
    ideal = ideal_prefix_tokens(trace).astype(np.float64)
    total = float(trace.input_len.sum())
    hits = ideal > 0
    distinct_tokens = float(np.unique(trace.blocks).size * trace.block_size)
    sh, rep = [], []
    for k in ks:
        restore = np.floor(ideal / k) * k
        sh.append(restore.sum() / total)
        rep.append(float((ideal - restore)[hits].mean()) if hits.any() else 0.0)
    ka = np.asarray(ks, dtype=np.float64)
    states = distinct_tokens / ka
    # exact count: distinct block ids at a full-block depth j with j * block % K == 0
    counts = np.diff(trace.offsets)
    depth = np.arange(trace.blocks.size) - np.repeat(trace.offsets[:-1], counts) + 1
    full = depth <= np.repeat(trace.input_len // trace.block_size, counts)
    exact = [np.unique(trace.blocks[full & (depth * trace.block_size % k == 0)]).size for k in ks]
    return DensityAnalytic(
        intervals=np.asarray(ks, dtype=np.int64),
        state_hit_rate=np.asarray(sh),
        mean_replay_per_hit=np.asarray(rep),
        uniform_replay=(ka - trace.block_size) / 2.0,
        states=states,
        state_bytes=states * state_bytes_per_checkpoint,
        states_exact=np.asarray(exact, dtype=np.int64),
        ideal_token_hit_rate=float(ideal.sum() / total),
        replay_slope=loglog_slope(
            ka[ka > trace.block_size], np.asarray(rep)[ka > trace.block_size]
        ),
    )
