"""What a simulation returns: per-request series and the summary (definitions in
docs/simulator.md), built from a run's per-request arrays and the cost model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.sim import costmodel
from kda_core.workloads import Trace


@dataclass(frozen=True, slots=True, eq=False)
class SimSeries:
    """Per-request arrays ``[N]`` in arrival order (int64 unless noted)."""

    arrival_s: np.ndarray  # float64
    input_len: np.ndarray
    token_match: np.ndarray
    restore_at: np.ndarray
    replayed: np.ndarray
    flops: np.ndarray  # float64, FLOPs spent on this request's prefill (replay included)
    flops_saved: np.ndarray  # float64
    ttft_s: np.ndarray  # float64
    ttft_nocache_s: np.ndarray  # float64, same request with no cache (same queue model)
    state_bytes: np.ndarray  # after the request (and its evictions)
    kv_bytes: np.ndarray  # after the request (and its evictions)
    n_states: np.ndarray
    checkpoints_new: np.ndarray
    evicted_states: np.ndarray  # cumulative
    kv_peak_bytes: np.ndarray  # KV held right after the request's insert (before clean-up)


@dataclass(frozen=True, slots=True, eq=False)
class SimResult:
    """Summary of one simulation (see docs/simulator.md for definitions)."""

    policy: str
    policy_params: dict
    model: str
    schedule: str
    state_budget_bytes: int | None
    kv_budget_bytes: int | None
    unified_budget_bytes: int | None
    n_requests: int
    input_tokens: int
    state_bytes_per_checkpoint: int
    kv_bytes_per_token: int
    token_hit_rate: float
    state_hit_rate: float
    request_token_hit_rate: float  # share of requests with token_match > 0
    request_state_hit_rate: float  # share of requests with restore_at > 0
    replayed_tokens: int
    mean_replay_per_hit: float  # replayed tokens / requests with token_match > 0
    prefill_tokens_saved: int
    prefill_tokens: int  # tokens computed (replay + fresh prefill)
    flops_total: float  # FLOPs with no cache
    flops_spent: float
    flops_saved: float
    flops_replayed: float  # FLOPs spent on replayed tokens
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_mean_s: float
    ttft_nocache_p50_s: float
    ttft_nocache_p95_s: float
    checkpoints_stored: int
    checkpoints_dropped: int  # positions skipped because nothing more could be evicted
    peak_state_bytes: int
    peak_kv_bytes: int
    final_state_bytes: int
    final_kv_bytes: int
    evictions: int  # states evicted (tombstoned or deleted)
    evicted_state_bytes: int
    evicted_kv_tokens: int
    tombstoned: int
    tree_steps: int  # key elements walked by match + insert
    elapsed_s: float
    series: SimSeries
    prefix_info: bool = True  # False: a lengths-only trace, the hit-rate fields are NaN

    def summary(self) -> dict:
        """Scalar fields only (no series), for tables and JSON."""
        return {
            k: getattr(self, k)
            for k in self.__slots__  # type: ignore[attr-defined]
            if k != "series"
        }


_HIT_RATES = (
    "token_hit_rate",
    "state_hit_rate",
    "request_token_hit_rate",
    "request_state_hit_rate",
    "mean_replay_per_hit",
)


def _percentile(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else 0.0


def _ttft(
    trace: Trace,
    service: np.ndarray,
    service0: np.ndarray,
    servers: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT with and without the cache (through a FCFS queue of ``servers`` if set)."""
    if servers is None:
        return service, service0
    _, fin = costmodel.fcfs_queue(trace.arrival_s, service, servers)
    _, fin0 = costmodel.fcfs_queue(trace.arrival_s, service0, servers)
    return fin - trace.arrival_s, fin0 - trace.arrival_s


def series_from(
    trace: Trace,
    core: dict,
    cspec: costmodel.CostSpec,
    tm: costmodel.TimeModel,
    servers: int | None,
    kvb: int,
) -> SimSeries:
    """Per-request series from a run's arrays: FLOPs and TTFT from the cost model."""
    tm_arr, ra_arr = core["token_match"], core["restore_at"]
    L = trace.input_len
    flops_full = np.asarray(costmodel.prefill_flops(cspec, np.zeros_like(L), L), dtype=np.float64)
    flops = np.asarray(costmodel.prefill_flops(cspec, ra_arr, L), dtype=np.float64)
    service = np.asarray(tm.seconds(flops), dtype=np.float64)
    service0 = np.asarray(tm.seconds(flops_full), dtype=np.float64)
    ttft, ttft0 = _ttft(trace, service, service0, servers)
    return SimSeries(
        arrival_s=trace.arrival_s,
        input_len=trace.input_len,
        token_match=tm_arr,
        restore_at=ra_arr,
        replayed=tm_arr - ra_arr,
        flops=flops,
        flops_saved=flops_full - flops,
        ttft_s=ttft,
        ttft_nocache_s=ttft0,
        state_bytes=core["state_bytes"],
        kv_bytes=core["kv_tokens"] * kvb,
        n_states=core["n_states"],
        checkpoints_new=core["new"],
        evicted_states=core["evicted_cum"],
        kv_peak_bytes=core["kv_peak"] * kvb,
    )


def summarise(s: SimSeries, core: dict, cspec: costmodel.CostSpec, **head: object) -> SimResult:
    """The summary of a run; ``head``: the identifying fields (policy, model, budgets ...)."""
    tm_arr, ra_arr, L = s.token_match, s.restore_at, s.input_len
    n = len(L)
    tot_in = int(L.sum())
    hits = int((tm_arr > 0).sum())
    replayed = s.replayed
    flops_replay = np.asarray(costmodel.prefill_flops(cspec, ra_arr, tm_arr), dtype=np.float64)
    st = core["stats"]
    nan = float("nan")
    if not head.get("prefix_info", True):  # no two requests can share: no hit rate, not 0
        hit_rates = dict.fromkeys(_HIT_RATES, nan)
    else:
        hit_rates = {
            "token_hit_rate": float(tm_arr.sum() / tot_in) if tot_in else 0.0,
            "state_hit_rate": float(ra_arr.sum() / tot_in) if tot_in else 0.0,
            "request_token_hit_rate": hits / n if n else 0.0,
            "request_state_hit_rate": float((ra_arr > 0).sum() / n) if n else 0.0,
            "mean_replay_per_hit": float(replayed.sum() / hits) if hits else 0.0,
        }
    return SimResult(
        **head,  # type: ignore[arg-type]
        n_requests=n,
        input_tokens=tot_in,
        **hit_rates,
        replayed_tokens=int(replayed.sum()),
        prefill_tokens_saved=int(ra_arr.sum()),
        prefill_tokens=int((L - ra_arr).sum()),
        flops_total=float(np.sum(costmodel.prefill_flops(cspec, np.zeros_like(L), L))),
        flops_spent=float(s.flops.sum()),
        flops_saved=float(s.flops_saved.sum()),
        flops_replayed=float(flops_replay.sum()),
        ttft_p50_s=_percentile(s.ttft_s, 50),
        ttft_p95_s=_percentile(s.ttft_s, 95),
        ttft_mean_s=float(s.ttft_s.mean()) if n else 0.0,
        ttft_nocache_p50_s=_percentile(s.ttft_nocache_s, 50),
        ttft_nocache_p95_s=_percentile(s.ttft_nocache_s, 95),
        checkpoints_stored=int(s.checkpoints_new.sum()),
        checkpoints_dropped=core["dropped"],
        peak_state_bytes=int(s.state_bytes.max()) if n else 0,
        peak_kv_bytes=int(s.kv_peak_bytes.max()) if n else 0,
        final_state_bytes=int(s.state_bytes[-1]) if n else 0,
        final_kv_bytes=int(s.kv_bytes[-1]) if n else 0,
        evictions=st.evicted_states,
        evicted_state_bytes=st.evicted_state_bytes,
        evicted_kv_tokens=st.evicted_kv_tokens,
        tombstoned=st.tombstoned,
        tree_steps=core["steps"],
        series=s,
    )
