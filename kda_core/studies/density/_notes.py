"""What the density figures say about replay, as codes and numbers (the front ends word them,
in English and 中文: ``words.phrases``).

``replay_trends(s)`` classifies each budget's simulated replay per hit against K by its own
log-log slope (fitted over K > block, as ``DensitySweep.replay_slope``): it grows like K
(slope >= ``REPLAY_SLOPE_K``), grows slower than K, stays about flat (|slope| <
``FLAT_SLOPE``), falls as K grows, or has one K only (no slope). ``replay_notes(s)`` adds what
the figures explain under the curves: the first budget whose replay falls while its evictions
drop (dense checkpoints evict each other), whether the unlimited curve fails to follow K, and
the range of the analytic replay curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kda_core.studies.density._analytic import REPLAY_SLOPE_K, loglog_slope
from kda_core.studies.density._sweep import DensitySweep

FLAT_SLOPE = 0.15  # |slope| below this: "stays about flat"
TRENDS: tuple[str, ...] = ("like_k", "slower", "flat", "falls", "one_k")  # the figures' order


@dataclass(frozen=True, slots=True)
class ReplayTrend:
    """One budget's simulated replay per hit over the fitted K range (K > block)."""

    budget: str  # the sweep's label ("8 GiB", "unlimited")
    trend: str  # one of TRENDS
    k0: int
    k1: int
    replay0: float  # replay per hit at k0 / k1 (tokens)
    replay1: float
    slope: float  # log-log slope (nan with one K)
    evictions0: int
    evictions1: int


@dataclass(frozen=True, slots=True)
class ReplayNotes:
    """Everything the figures' title and notes state, per curve, from the data."""

    trends: tuple[ReplayTrend, ...]  # one per budget, in the sweep's order
    falling: ReplayTrend | None  # the first curve that falls while its evictions drop
    unlimited_below_k: bool  # the unlimited curve grows slower than K or stays flat
    analytic: tuple[float, float]  # the analytic replay per hit over K > block: (min, max)


def _trend(slope: float) -> str:
    if not math.isfinite(slope):
        return "one_k"
    if slope >= REPLAY_SLOPE_K:
        return "like_k"
    if slope >= FLAT_SLOPE:
        return "slower"
    return "flat" if slope > -FLAT_SLOPE else "falls"


def _fitted(s: DensitySweep) -> np.ndarray:
    """The intervals the slopes are fitted over: K > block (K = block replays only the partial
    last block), or every K when none is larger."""
    big = s.intervals > s.block_size
    return big if big.any() else np.ones_like(big)


def replay_trends(s: DensitySweep) -> tuple[ReplayTrend, ...]:
    """Each budget's curve (columns of ``s``), from its own points with replay > 0."""
    big = _fitted(s)
    ks = s.intervals[big]
    out = []
    for j, label in enumerate(s.budget_labels):
        y = s.mean_replay_per_hit[big, j]
        pos = np.flatnonzero(y > 0)
        i0, i1 = (int(pos[0]), int(pos[-1])) if pos.size else (0, ks.size - 1)
        ev = s.evictions[big, j]
        slope = loglog_slope(ks, y)
        out.append(
            ReplayTrend(
                budget=label,
                trend=_trend(slope),
                k0=int(ks[i0]),
                k1=int(ks[i1]),
                replay0=float(y[i0]),
                replay1=float(y[i1]),
                slope=slope,
                evictions0=int(ev[i0]),
                evictions1=int(ev[i1]),
            )
        )
    return tuple(out)


def replay_notes(s: DensitySweep) -> ReplayNotes:
    """The trends, the curve whose fall evictions explain, and the analytic curve's range."""
    trends = replay_trends(s)
    falling = [t for t in trends if t.trend == "falls" and t.evictions0 > t.evictions1]
    below = any(t.budget == "unlimited" and t.trend in ("slower", "flat") for t in trends)
    an = s.analytic.replay_curve[_fitted(s)]
    return ReplayNotes(
        trends, falling[0] if falling else None, below, (float(an.min()), float(an.max()))
    )
