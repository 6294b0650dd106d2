"""Checkpoint density: interval K vs state memory (~1/K) vs replay (~K) vs TTFT, and retention
policies side by side (data for the checkpoint_density app and the density / retention figures).

Every number comes from ``kda_core.sim.simulate`` (the shared radix cache and policy code, byte
payloads, Kimi K3 at TP8 by default) except the analytic model, computed beside it from the
trace's ideal match points (``workloads.ideal_prefix_tokens``: the longest prefix an infinite
KV cache would match):

* state hit with a checkpoint every K tokens: ``sum(floor(ideal_i / K) * K) / sum(input)``;
* replay per hit: ``mean(ideal_i - floor(ideal_i / K) * K)``; for match points uniform over
  block boundaries this is ``(K - block) / 2 ~ K / 2`` (the seed's "replay ~ K");
* memory: one checkpoint per K tokens of distinct prefix, ``distinct_blocks * block / K``
  states (the seed's "storage ~ 1/K"); ``states_exact`` counts the distinct K-aligned
  full-block prefixes instead (what an unlimited cache stores: fewer at large K, where short
  prompts never reach a multiple of K).

The simulated replay is smaller than the analytic one on chat traces: the tree keeps KV only up
to a request's deepest checkpoint (SGLang frees the tail too), so a follow-up turn usually
token-matches exactly at a checkpoint and replays only at branch points.

Pareto frontier: among (memory, state hit rate) points, those no other point beats on both
(less or equal memory and higher or equal hit, one strictly). Optimum per budget: the interval
with the lowest mean TTFT (ties: higher state hit).

Left out: the optimal placement DP of Sparse Prefix Caching, decode-time checkpoints, queueing
(pass ``servers`` through ``sim_kwargs`` to add it).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sim
from kda_core.workloads import Trace, bundled_trace, ideal_prefix_tokens

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


def _trace_key(trace: Trace) -> tuple:
    return (
        trace.name,
        len(trace),
        trace.block_size,
        int(trace.input_len.sum()),
        int(trace.blocks.sum() % (1 << 61)),
    )


def _budget_bytes(budget_gib: float | None) -> int | None:
    if budget_gib is None:
        return None
    if not isinstance(budget_gib, (int, float)) or not (
        math.isfinite(budget_gib) and 0 <= budget_gib <= 1 << 20
    ):
        raise ValueError(f"budgets must be None or GiB in [0, 2**20], got {budget_gib!r}")
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


def analytic_model(
    trace: Trace, intervals: Sequence[int], state_bytes_per_checkpoint: int
) -> DensityAnalytic:
    """Replay ~ K/2 and memory ~ 1/K, evaluated on ``trace``'s ideal match points."""
    ks = _intervals(trace, intervals)
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
    )


def _intervals(trace: Trace, intervals: Sequence[int]) -> list[int]:
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
class DensitySweep:
    """Interval K x budget on one trace. Arrays are ``[I, B]`` unless noted.

    ``budgets_bytes [B]`` float64 with ``inf`` for unlimited; ``budget_labels`` for legends.
    ``optimum [B]``: index of the interval with the lowest mean TTFT per budget. ``pareto
    [I, B]``: on the (peak state bytes, state hit rate) frontier over all points.
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
    ks = _intervals(tr, intervals)
    bl = list(budgets_gib)
    if not 1 <= len(bl) <= 32:
        raise ValueError(f"budgets_gib must hold 1..32 values, got {len(bl)}")
    if len(ks) * len(bl) > MAX_RUNS:
        raise ValueError(f"intervals x budgets must be <= {MAX_RUNS} runs")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    bb = [_budget_bytes(b) for b in bl]
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
    )


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
    pols = list(policies)
    bl = list(budgets_gib)
    if not 1 <= len(pols) <= 32 or not 1 <= len(bl) <= 32:
        raise ValueError("policies and budgets_gib must hold 1..32 entries each")
    if len(pols) * len(bl) > MAX_RUNS:
        raise ValueError(f"policies x budgets must be <= {MAX_RUNS} runs")
    for p in pols:
        if not (isinstance(p, tuple) and len(p) == 3 and isinstance(p[2], dict)):
            raise ValueError("policies entries must be (label, policy name, params dict)")
    bb = [_budget_bytes(b) for b in bl]
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
    params = {"every": 4096} if (params is None and policy == "interval") else (params or {})
    r = sim.simulate(tr, (policy, params), _budget_bytes(budget_gib), model, **sim_kwargs)
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
