"""Retention policies side by side on one trace (every policy x budget), the hit timeline of
one policy, and the workloads the density app offers (``load_workload``, memoised)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sim
from kda_core import workloads as _wl
from kda_core.studies.density._sweep import (
    DEFAULT_BUDGETS_GIB,
    DEFAULT_POLICIES,
    MAX_RUNS,
    Progress,
    budget_label,
    check_budget_bytes,
    run_metrics,
)
from kda_core.workloads import Trace, bundled_trace, ideal_prefix_tokens, require_prefix_info

_LOAD_KINDS: tuple[str, ...] = ("head", "bundled", "generated")


@functools.lru_cache(maxsize=8)
def load_workload(kind: str, name: str, n_head: int = 1000) -> Trace:
    """A workload for the app. ``kind``: "head" (the first ``n_head`` requests of bundled trace
    ``name``, parsing only those lines), "bundled" (the whole bundled trace) or "generated"
    (``workloads.workload(name)``). Memoised (traces are read-only)."""
    if kind not in _LOAD_KINDS:
        raise ValueError(f"kind must be one of {list(_LOAD_KINDS)}, got {kind!r:.40}")
    if kind == "head":
        if name not in _wl.BUNDLED_TRACES:
            raise ValueError(f"name must be one of {sorted(_wl.BUNDLED_TRACES)}, got {name!r:.40}")
        if not isinstance(n_head, int) or not 1 <= n_head <= 100_000:
            raise ValueError(f"n_head must be an integer in [1, 100000], got {n_head!r:.40}")
        path = _wl.TRACES_DIR / _wl.BUNDLED_TRACES[name]
        with path.open("r", encoding="utf-8") as f:
            return _wl.parse_mooncake_lines(itertools.islice(f, n_head), name=f"{name}[:{n_head}]")
    if kind == "bundled":
        return bundled_trace(name)
    return _wl.workload(name)


@dataclass(frozen=True, slots=True, eq=False)
class PolicySweep:
    """Policies x budgets on one trace. Arrays are ``[P, B]``; ``labels [P]`` name the
    policies (``specs`` hold their (policy, params)); ``budgets_bytes [B]`` (inf = unlimited)."""

    trace_name: str
    model: str
    labels: tuple[str, ...]
    specs: tuple[tuple[str, dict], ...]
    budgets_bytes: np.ndarray
    budget_labels: tuple[str, ...]
    token_hit_rate: np.ndarray
    state_hit_rate: np.ndarray
    mean_replay_per_hit: np.ndarray
    replayed_tokens: np.ndarray
    checkpoints_stored: np.ndarray
    peak_state_bytes: np.ndarray
    evictions: np.ndarray
    flops_saved: np.ndarray
    ttft_p50_s: np.ndarray
    ttft_p95_s: np.ndarray
    ideal_token_hit_rate: float
    elapsed_s: float


def policy_sweep(
    trace: Trace | None = None,
    policies: Sequence[tuple[str, str, dict]] = DEFAULT_POLICIES,
    budgets_gib: Sequence[float | None] = DEFAULT_BUDGETS_GIB,
    model: str = "kimi-k3",
    *,
    progress: Progress | None = None,
    **sim_kwargs: Any,
) -> PolicySweep:
    """Every policy ``(label, name, params)`` at every state budget (GiB per GPU; None =
    unlimited): the retention figure (hit rate and checkpoints stored vs budget) and, with one
    budget, "all policies at one budget"."""
    tr = bundled_trace("conversation") if trace is None else trace
    require_prefix_info(tr, "policy hit rates")
    pols = list(policies)
    bl = list(budgets_gib)
    if not 1 <= len(pols) <= 32 or not 1 <= len(bl) <= 32:
        raise ValueError("policies and budgets_gib must hold 1..32 entries each")
    if len(pols) * len(bl) > MAX_RUNS:
        raise ValueError(f"policies x budgets must be <= {MAX_RUNS} runs")
    for p in pols:
        if not (isinstance(p, tuple) and len(p) == 3 and isinstance(p[2], dict)):
            raise ValueError("policies entries must be (label, policy name, params dict)")
    bb = [check_budget_bytes(b) for b in bl]
    shape = (len(pols), len(bb))
    metrics = (
        "token_hit_rate",
        "state_hit_rate",
        "mean_replay_per_hit",
        "replayed_tokens",
        "checkpoints_stored",
        "peak_state_bytes",
        "evictions",
        "flops_saved",
        "ttft_p50_s",
        "ttft_p95_s",
        "elapsed_s",
    )
    vals = {m: np.zeros(shape) for m in metrics}
    n_runs = shape[0] * shape[1]
    done = 0
    for i, (label, name, params) in enumerate(pols):
        for j, b in enumerate(bb):
            msg = f"{label}, budget {budget_label(bl[j])}"
            cb = None
            if progress is not None:
                base = done

                def cb(d: int, t: int, base: int = base, msg: str = msg) -> None:
                    progress((base + d / max(t, 1)) / n_runs, msg)

            r = run_metrics(tr, name, params, b, model, cb, **sim_kwargs)
            for m in metrics:
                vals[m][i, j] = r[m]
            done += 1
    if progress is not None:
        progress(1.0, "done")
    ideal = ideal_prefix_tokens(tr)
    return PolicySweep(
        trace_name=tr.name,
        model=model,
        labels=tuple(p[0] for p in pols),
        specs=tuple((p[1], dict(p[2])) for p in pols),
        budgets_bytes=np.array([math.inf if b is None else float(b) for b in bb]),
        budget_labels=tuple(budget_label(b) for b in bl),
        token_hit_rate=vals["token_hit_rate"],
        state_hit_rate=vals["state_hit_rate"],
        mean_replay_per_hit=vals["mean_replay_per_hit"],
        replayed_tokens=vals["replayed_tokens"].astype(np.int64),
        checkpoints_stored=vals["checkpoints_stored"].astype(np.int64),
        peak_state_bytes=vals["peak_state_bytes"].astype(np.int64),
        evictions=vals["evictions"].astype(np.int64),
        flops_saved=vals["flops_saved"],
        ttft_p50_s=vals["ttft_p50_s"],
        ttft_p95_s=vals["ttft_p95_s"],
        ideal_token_hit_rate=float(ideal.sum() / tr.input_len.sum()),
        elapsed_s=float(vals["elapsed_s"].sum()),
    )


def policies_at_budget(
    trace: Trace | None = None,
    budget_gib: float | None = 32.0,
    policies: Sequence[tuple[str, str, dict]] = DEFAULT_POLICIES,
    model: str = "kimi-k3",
    *,
    progress: Progress | None = None,
    **sim_kwargs: Any,
) -> PolicySweep:
    """All policies at one budget (a ``PolicySweep`` with B = 1)."""
    check_budget_bytes(budget_gib, "budget_gib")  # so the message names this argument
    return policy_sweep(trace, policies, (budget_gib,), model, progress=progress, **sim_kwargs)


@dataclass(frozen=True, slots=True, eq=False)
class HitTimeline:
    """Token vs state hit over a trace for one policy: cumulative rates ``[N]`` and the
    per-request token match / restore point (for the "token hit is not a state hit" plot)."""

    arrival_s: np.ndarray
    cum_token_hit_rate: np.ndarray
    cum_state_hit_rate: np.ndarray
    token_match: np.ndarray
    restore_at: np.ndarray
    input_len: np.ndarray
    state_bytes: np.ndarray
    kv_bytes: np.ndarray


def hit_timeline(
    trace: Trace | None = None,
    policy: str = "interval",
    params: dict | None = None,
    budget_gib: float | None = None,
    model: str = "kimi-k3",
    **sim_kwargs: Any,
) -> HitTimeline:
    """Cumulative token and state hit rates after each request of one simulation."""
    tr = bundled_trace("conversation") if trace is None else trace
    require_prefix_info(tr, "policy hit rates")
    params = {"every": 4096} if (params is None and policy == "interval") else (params or {})
    budget = check_budget_bytes(budget_gib, "budget_gib")
    r = sim.simulate(tr, (policy, params), budget, model, **sim_kwargs)
    s = r.series
    cum_in = np.cumsum(s.input_len).astype(np.float64)
    return HitTimeline(
        arrival_s=s.arrival_s,
        cum_token_hit_rate=np.cumsum(s.token_match) / cum_in,
        cum_state_hit_rate=np.cumsum(s.restore_at) / cum_in,
        token_match=s.token_match,
        restore_at=s.restore_at,
        input_len=s.input_len,
        state_bytes=s.state_bytes,
        kv_bytes=s.kv_bytes,
    )
