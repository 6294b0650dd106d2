"""Checkpoint density sweeps: interval K x state budget on one trace through the simulator.

Every number comes from ``kda_core.sim.simulate`` (the shared radix cache and policy code,
byte payloads, Kimi K3 at TP8 by default), memoised per (trace, policy, budget, options);
``density_sweep`` puts the analytic model (``analytic``) beside it and marks, per budget, the
interval with the lowest mean TTFT (ties: higher state hit) and the Pareto frontier of (memory,
state hit). Why simulated replay stays flat on chat traces, and the formulas: docs/simulator.md.
Left out: the optimal placement DP of Sparse Prefix Caching, decode-time checkpoints, queueing
(pass ``servers`` through ``sim_kwargs``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sim
from kda_core.studies.density._analytic import (
    DensityAnalytic,
    analytic_model,
    check_intervals,
    loglog_slope,
)
from kda_core.workloads import Trace, bundled_trace, require_prefix_info

GIB = 1 << 30
DEFAULT_INTERVALS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192, 16384)
DEFAULT_BUDGETS_GIB: tuple[float | None, ...] = (8.0, 32.0, 128.0, None)
DEFAULT_POLICIES: tuple[tuple[str, str, dict], ...] = (
    ("every block", "interval", {"every": 512}),
    ("interval 4096", "interval", {"every": 4096}),
    ("SGLang", "sglang", {}),
    ("Marconi", "marconi", {}),
    ("vLLM align", "vllm", {"mode": "align"}),
)
"""Policies of the retention comparison. vLLM "all" stores the same states as "every block"
(it differs only in refreshing a hit's states tail-first) and is left out of the default."""
MAX_RUNS = 200
Progress = Callable[[float, str], Any]

_METRICS: tuple[str, ...] = (
    "token_hit_rate",
    "state_hit_rate",
    "replayed_tokens",
    "mean_replay_per_hit",
    "checkpoints_stored",
    "peak_state_bytes",
    "peak_kv_bytes",
    "evictions",
    "flops_saved",
    "flops_replayed",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_mean_s",
    "elapsed_s",
)
_memo: OrderedDict[tuple, dict] = OrderedDict()
_MEMO_SIZE = 512


def clear_memo() -> None:
    """Forget every memoised `run_metrics` result (bench/bench_sim.py times cold sweeps)."""
    _memo.clear()


def _trace_key(trace: Trace) -> tuple:
    return (
        trace.name,
        len(trace),
        trace.block_size,
        int(trace.input_len.sum()),
        int(trace.blocks.sum() % (1 << 61)),
    )


def check_budget_bytes(budget_gib: float | None, name: str = "budgets") -> int | None:
    if budget_gib is None:
        return None
    if not isinstance(budget_gib, (int, float)) or not (
        math.isfinite(budget_gib) and 0 <= budget_gib <= 1 << 20
    ):
        raise ValueError(f"{name} must be None or GiB in [0, 2**20], got {budget_gib!r}")
    return int(budget_gib * GIB)


def run_metrics(
    trace: Trace,
    policy: str,
    params: dict | None = None,
    budget_bytes: int | None = None,
    model: str = "kimi-k3",
    progress: Callable[[int, int], Any] | None = None,
    **sim_kwargs: Any,
) -> dict:
    """Scalar metrics of one simulation (memoised: simulations are deterministic)."""
    params = dict(params or {})
    key = (
        _trace_key(trace),
        policy,
        tuple(sorted(params.items())),
        budget_bytes,
        model,
        tuple(sorted(sim_kwargs.items())),
    )
    hit = _memo.get(key)
    if hit is not None:
        _memo.move_to_end(key)
        if progress is not None:
            progress(len(trace), len(trace))
        return hit
    r = sim.simulate(trace, (policy, params), budget_bytes, model, progress=progress, **sim_kwargs)
    out = {m: getattr(r, m) for m in _METRICS}
    out["state_bytes_per_checkpoint"] = r.state_bytes_per_checkpoint
    _memo[key] = out
    if len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return out


def pareto_mask(cost: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Points not dominated: no other point has cost <= and value >= with one strict. [N]."""
    c = np.asarray(cost, dtype=np.float64).ravel()
    v = np.asarray(value, dtype=np.float64).ravel()
    if c.shape != v.shape:
        raise ValueError("cost and value must have the same number of points")
    n = c.size
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        dom = (c <= c[i]) & (v >= v[i]) & ((c < c[i]) | (v > v[i]))
        keep[i] = not dom.any()
    return keep


@dataclass(frozen=True, slots=True, eq=False)
class DensitySweep:
    """Interval K x budget on one trace. Arrays are ``[I, B]`` unless noted.

    ``budgets_bytes [B]`` float64 with ``inf`` for unlimited; ``budget_labels`` for legends.
    ``optimum [B]``: index of the interval with the lowest mean TTFT per budget. ``pareto
    [I, B]``: on the (peak state bytes, state hit rate) frontier over all points.
    ``replay_slope [B]``: log-log slope of simulated ``mean_replay_per_hit`` vs K per budget
    (1 = replay ~K, 0 = flat; nan with < 2 positive points). Fitted over K > block only: at
    K = block every block boundary is a checkpoint and replay is just the partial last block.
    """

    trace_name: str
    model: str
    block_size: int
    state_bytes_per_checkpoint: int
    intervals: np.ndarray  # [I]
    budgets_bytes: np.ndarray  # [B]
    budget_labels: tuple[str, ...]
    token_hit_rate: np.ndarray
    state_hit_rate: np.ndarray
    replayed_tokens: np.ndarray
    mean_replay_per_hit: np.ndarray
    checkpoints_stored: np.ndarray
    peak_state_bytes: np.ndarray
    evictions: np.ndarray
    flops_saved: np.ndarray
    ttft_p50_s: np.ndarray
    ttft_p95_s: np.ndarray
    ttft_mean_s: np.ndarray
    optimum: np.ndarray  # [B] int64
    pareto: np.ndarray  # [I, B] bool
    analytic: DensityAnalytic
    elapsed_s: float
    replay_slope: np.ndarray  # [B]


def budget_label(b: float | None) -> str:
    if b is None:
        return "unlimited"
    return f"{b:g} GiB"


def density_sweep(
    trace: Trace | None = None,
    intervals: Sequence[int] = DEFAULT_INTERVALS,
    budgets_gib: Sequence[float | None] = DEFAULT_BUDGETS_GIB,
    model: str = "kimi-k3",
    *,
    progress: Progress | None = None,
    **sim_kwargs: Any,
) -> DensitySweep:
    """Simulate ``make("interval", every=K)`` for every K and state budget (GiB per GPU,
    None = unlimited). ``progress(fraction, message)`` is called as runs advance (gr.Progress
    compatible)."""
    tr = bundled_trace("conversation") if trace is None else trace
    require_prefix_info(tr, "the checkpoint density sweep")
    ks = check_intervals(tr, intervals)
    bl = list(budgets_gib)
    if not 1 <= len(bl) <= 32:
        raise ValueError(f"budgets_gib must hold 1..32 values, got {len(bl)}")
    if len(ks) * len(bl) > MAX_RUNS:
        raise ValueError(f"intervals x budgets must be <= {MAX_RUNS} runs")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    bb = [check_budget_bytes(b) for b in bl]
    shape = (len(ks), len(bb))
    vals = {m: np.zeros(shape) for m in _METRICS}
    n_runs = shape[0] * shape[1]
    done = 0
    ckpt = 0
    for i, k in enumerate(ks):
        for j, b in enumerate(bb):
            msg = f"K={k}, budget {budget_label(bl[j])}"
            cb = None
            if progress is not None:
                base = done

                def cb(d: int, t: int, base: int = base, msg: str = msg) -> None:
                    progress((base + d / max(t, 1)) / n_runs, msg)

            r = run_metrics(tr, "interval", {"every": k}, b, model, cb, **sim_kwargs)
            for m in _METRICS:
                vals[m][i, j] = r[m]
            ckpt = r["state_bytes_per_checkpoint"]
            done += 1
    if progress is not None:
        progress(1.0, "done")
    ttft = vals["ttft_mean_s"]
    ka = np.asarray(ks, dtype=np.float64)
    big = ka > tr.block_size  # K = block replays only the partial last block: not fitted
    opt = np.zeros(len(bb), dtype=np.int64)
    for j in range(len(bb)):
        order = np.lexsort((-vals["state_hit_rate"][:, j], ttft[:, j]))
        opt[j] = order[0]
    pareto = pareto_mask(vals["peak_state_bytes"], vals["state_hit_rate"]).reshape(shape)
    return DensitySweep(
        trace_name=tr.name,
        model=model,
        block_size=tr.block_size,
        state_bytes_per_checkpoint=int(ckpt),
        intervals=np.asarray(ks, dtype=np.int64),
        budgets_bytes=np.array([math.inf if b is None else float(b) for b in bb]),
        budget_labels=tuple(budget_label(b) for b in bl),
        token_hit_rate=vals["token_hit_rate"],
        state_hit_rate=vals["state_hit_rate"],
        replayed_tokens=vals["replayed_tokens"].astype(np.int64),
        mean_replay_per_hit=vals["mean_replay_per_hit"],
        checkpoints_stored=vals["checkpoints_stored"].astype(np.int64),
        peak_state_bytes=vals["peak_state_bytes"].astype(np.int64),
        evictions=vals["evictions"].astype(np.int64),
        flops_saved=vals["flops_saved"],
        ttft_p50_s=vals["ttft_p50_s"],
        ttft_p95_s=vals["ttft_p95_s"],
        ttft_mean_s=ttft,
        optimum=opt,
        pareto=pareto,
        analytic=analytic_model(tr, ks, int(ckpt)),
        elapsed_s=float(vals["elapsed_s"].sum()),
        replay_slope=np.array(
            [loglog_slope(ka[big], vals["mean_replay_per_hit"][big, j]) for j in range(len(bb))]
        ),
    )
