"""The Pareto front of a sweep and the point it recommends for an objective.

Objectives (``OBJECTIVES``): ``cached_tokens``, ``state_hit_rate``, ``token_hit_rate`` and
``max_running`` are maximised; ``ttft_p50_s`` and ``ttft_p99_s`` minimised. The front is over
(the objective, ``max_running``): a point is on it when no other point is at least as good on
both and better on one. The recommendation is the best objective among the points that reach
``min_running`` running requests (all points when None); ties go to more running requests,
then the lower TTFT p99, then the earlier grid point. Failed points take no part.
"""

from __future__ import annotations

import math
from typing import Any

OBJECTIVES = (
    "cached_tokens",
    "state_hit_rate",
    "token_hit_rate",
    "max_running",
    "ttft_p50_s",
    "ttft_p99_s",
)
_MINIMISED = ("ttft_p50_s", "ttft_p99_s")


def score(point: dict[str, Any], objective: str) -> float:
    """The objective oriented so that larger is better (NaN: -inf, never chosen first)."""
    v = float(point[objective])
    if math.isnan(v):
        return -math.inf
    return -v if objective in _MINIMISED else v


def _ok(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in points if p.get("status") == "ok"]


def pareto(points: list[dict[str, Any]], objective: str) -> tuple[int, ...]:
    """Indices (``point``) of the front over (objective, max_running), in grid order."""
    ok = _ok(points)
    keys = [(score(p, objective), p["max_running"]) for p in ok]
    front = []
    for p, (a, b) in zip(ok, keys):
        beaten = any(x >= a and y >= b and (x > a or y > b) for x, y in keys)
        if not beaten:
            front.append(p["point"])
    return tuple(front)


def recommend(
    points: list[dict[str, Any]], objective: str, min_running: int | None
) -> tuple[dict[str, Any] | None, str]:
    """(the recommended point or None, a sentence saying how it was chosen or why none)."""
    ok = _ok(points)
    if not ok:
        return None, "no point could be sized and replayed (every point failed)"
    eligible = [p for p in ok if min_running is None or p["max_running"] >= min_running]
    if not eligible:
        top = max(ok, key=lambda p: p["max_running"])
        return None, (
            f"no point reaches {min_running} running requests: the most is "
            f"{top['max_running']} (point {top['point']})"
        )

    def key(p: dict[str, Any]) -> tuple:
        t99 = p.get("ttft_p99_s", math.nan)
        return (
            -score(p, objective),
            -p["max_running"],
            math.inf if t99 != t99 else t99,
            p["point"],
        )

    best = min(eligible, key=key)
    floor = "" if min_running is None else f" among points with >= {min_running} running"
    return best, f"the best {objective}{floor} (point {best['point']} of {len(points)})"
