"""What ``simulate_fleet`` returns: per-request arrays and the summary (docs/fleet.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GAP_REASONS = ("as_expected", "kv_without_state", "not_held", "unexpected_hit")
"""Why a request's cached tokens differ from what the router counted: ``as_expected``
(equal); ``kv_without_state`` (the router counted more, and the replica holds that KV but no
state deep enough: the over-promise of a KV-only index on a hybrid); ``not_held`` (the router
counted blocks the replica does not hold: a stale or poisoned index); ``unexpected_hit`` (the
replica gave more than the router counted)."""


def gap_reasons(expected: np.ndarray, cached: np.ndarray, token_match: np.ndarray) -> np.ndarray:
    """The reason per request (``GAP_REASONS`` indices, int8)."""
    out = np.zeros(len(expected), dtype=np.int8)
    over = expected > cached
    out[over & (token_match >= expected)] = 1
    out[over & (token_match < expected)] = 2
    out[expected < cached] = 3
    return out


@dataclass(frozen=True, slots=True, eq=False)
class FleetResult:
    """One fleet run. Per request (arrival order, int64 tokens unless noted): ``replica``,
    ``expected`` (tokens the router counted as cached on it), ``cached`` (the restore point the
    replica gave: the prefill it skipped), ``token_match`` (its KV prefix match), ``best``
    (the most any replica could have given at that moment; None without the oracle),
    ``reason`` (``GAP_REASONS``), ``arrival_s`` / ``ttft_s`` / ``queue_s`` / ``finish_s``
    (float64, the cost model's FCFS prefill per replica). Rates are over input tokens."""

    router: str
    engine: str
    model: str
    replicas: int
    weight: float
    seed: int
    block_tokens: int
    page_tokens: int
    input_len: np.ndarray
    replica: np.ndarray
    expected: np.ndarray
    cached: np.ndarray
    token_match: np.ndarray
    best: np.ndarray | None
    reason: np.ndarray
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    queue_s: np.ndarray
    finish_s: np.ndarray
    events: int
    event_bytes: int
    elapsed_s: float
    stats: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Scalars: hit rates, the expected-vs-given gap, skew, regret, TTFT and queueing."""
        n = len(self.input_len)
        tot = max(int(self.input_len.sum()), 1)
        per = np.bincount(self.replica, minlength=self.replicas) if n else np.zeros(1)
        over = np.maximum(self.expected - self.cached, 0)
        out = {
            "router": self.router,
            "engine": self.engine,
            "replicas": self.replicas,
            "weight": self.weight,
            "n_requests": n,
            "token_hit_rate": float(self.token_match.sum() / tot),
            "state_hit_rate": float(self.cached.sum() / tot),
            "expected_hit_rate": float(self.expected.sum() / tot),
            "over_promised_tokens": int(over.sum()),
            "over_promised_requests": int((over > 0).sum()),
            "requests_per_replica": [int(x) for x in per],
            "load_skew": float(per.max() / per.mean()) if n else 0.0,
            "ttft_p50_s": _pct(self.ttft_s, 50),
            "ttft_p99_s": _pct(self.ttft_s, 99),
            "queue_p50_s": _pct(self.queue_s, 50),
            "queue_p99_s": _pct(self.queue_s, 99),
            "events": self.events,
            "event_bytes": self.event_bytes,
        }
        if self.best is not None:
            out["regret_tokens"] = int((self.best - self.cached).sum())
            out["best_hit_rate"] = float(self.best.sum() / tot)
        return out


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else 0.0
