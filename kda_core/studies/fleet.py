"""The fleet-routing concept's data: every router on one trace and fleet, side by side.

``fleet_study(trace, replicas=, router=, ...)`` runs ``kda_core.fleet.simulate_fleet`` once per
router (``ROUTERS``) with the same replicas, budgets and weight, and packages what the app and
the figure draw: per router the hit rates (what the replicas gave, what the router counted,
the KV prefix held), load skew, regret and TTFT; for the chosen router the in-flight requests
per replica over time; and the requests the KV-only router (``kv_events``) promised and the
replica could not give, largest gap first. ``_load_over_time`` is the in-flight count per
replica on a time grid, from a run's arrival and finish times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.fleet import GAP_REASONS, ROUTERS, FleetResult, simulate_fleet
from kda_core.workloads import Trace

__all__ = ["GAP_REASONS", "FleetStudy", "fleet_study"]

_KV_ONLY = "kv_events"
_MAX_BINS = 2000
SUMMARY_KEYS = (
    "state_hit_rate",
    "expected_hit_rate",
    "token_hit_rate",
    "best_hit_rate",
    "load_skew",
    "over_promised_tokens",
    "over_promised_requests",
    "regret_tokens",
    "ttft_p50_s",
    "ttft_p99_s",
    "queue_p99_s",
)


@dataclass(frozen=True, slots=True, eq=False)
class FleetStudy:
    """``routers [R]`` and ``rates [R, len(SUMMARY_KEYS)]`` (the summary per router, in
    ``SUMMARY_KEYS`` order); ``chosen`` the selected router's run; ``load_t [T]`` bin starts
    (s) and ``load [T, replicas]`` its in-flight requests; ``over [K]`` the KV-only router's
    over-promised request indices (largest gap first) with ``kv_only`` its run."""

    trace_name: str
    engine: str
    replicas: int
    weight: float
    routers: tuple[str, ...]
    rates: np.ndarray
    chosen: FleetResult
    load_t: np.ndarray
    load: np.ndarray
    kv_only: FleetResult
    over: np.ndarray

    def rate(self, router: str, key: str) -> float:
        """One summary value (``SUMMARY_KEYS``) of one router."""
        return float(self.rates[self.routers.index(router), SUMMARY_KEYS.index(key)])


def _load_over_time(r: FleetResult, bins: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(bin starts [T] in s, in-flight requests [T, replicas] at each bin start): a request is
    in flight from its arrival to its finish on the replica that served it."""
    b = check_int("bins", bins, 1, _MAX_BINS)
    if not len(r.arrival_s):
        return np.zeros(0), np.zeros((0, r.replicas), dtype=np.int64)
    t = np.linspace(float(r.arrival_s[0]), float(r.finish_s.max()), b, endpoint=False)
    out = np.zeros((b, r.replicas), dtype=np.int64)
    for k in range(r.replicas):
        on = r.replica == k
        started = np.searchsorted(np.sort(r.arrival_s[on]), t, side="right")
        ended = np.searchsorted(np.sort(r.finish_s[on]), t, side="right")
        out[:, k] = started - ended
    return t, out


def fleet_study(
    trace: Trace | None = None,
    *,
    replicas: int = 4,
    router: str = "state_aware",
    weight: float = 1.0,
    engine: str = "vllm",
    state_budget_bytes: float | None = None,
    kv_budget_bytes: float | None = None,
    model: str = "kimi-k3",
    tp: int = 8,
    bins: int = 200,
) -> FleetStudy:
    """Every router on ``trace`` (arguments as ``simulate_fleet``'s); ``router`` is the one
    whose load over time is drawn (``ValueError`` naming any bad argument)."""
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
    check_int("bins", bins, 1, _MAX_BINS)
    runs = {}
    for name in ROUTERS:
        runs[name] = simulate_fleet(
            trace,
            replicas=replicas,
            router=name,
            weight=weight,
            engine=engine,
            model=model,
            tp=tp,
            state_budget_bytes=state_budget_bytes,
            kv_budget_bytes=kv_budget_bytes,
        )
    rates = np.array([[runs[n].summary().get(k, 0.0) for k in SUMMARY_KEYS] for n in ROUTERS])
    t, load = _load_over_time(runs[router], bins)
    kv = runs[_KV_ONLY]
    gap = kv.expected - kv.cached
    idx = np.flatnonzero(gap > 0)
    over = idx[np.lexsort((idx, -gap[idx]))]
    name = trace.name if trace is not None else "conversation"
    return FleetStudy(
        name, engine, replicas, float(weight), ROUTERS, rates, runs[router], t, load, kv, over
    )
