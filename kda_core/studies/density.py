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
token-matches exactly at a checkpoint and replays only at branch points. On the bundled
conversation trace the simulated replay per hit therefore stays roughly flat (~400-580 tokens
from K=1024 to 16384) while the analytic one grows with K. ``DensitySweep.replay_slope`` (the
log-log slope of simulated replay per hit vs K: 1 means replay ~K, 0 flat) measures which
regime a trace is in, and ``replay_note`` / ``headline`` turn it into the text both the app
and the figure print, so neither claims "replay ~K" where the data does not show it. The ONE
analytic replay curve both draw is ``DensityAnalytic.replay_curve`` (= ``mean_replay_per_hit``:
the trace's ideal match points floored to K, i.e. replay if KV were kept for every token);
``uniform_replay`` ((K - block) / 2) is kept for tests of uniform match points only.

Workloads for the app: ``load_workload(kind, name, n_head)`` (memoised; ``kind`` "head" parses
only the first ``n_head`` lines of a bundled trace, equal to ``bundled_trace(name).head(n)``).

Pareto frontier: among (memory, state hit rate) points, those no other point beats on both
(less or equal memory and higher or equal hit, one strictly). Optimum per budget: the interval
with the lowest mean TTFT (ties: higher state hit).

Left out: the optimal placement DP of Sparse Prefix Caching, decode-time checkpoints, queueing
(pass ``servers`` through ``sim_kwargs`` to add it).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sim
from kda_core import workloads as _wl
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
        replay_slope=loglog_slope(
            ka[ka > trace.block_size], np.asarray(rep)[ka > trace.block_size]
        ),
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

    @property
    def replay_follows_k(self) -> bool:
        """True when every budget's simulated replay per hit grows at least like K**0.5."""
        sl = self.replay_slope
        return bool(sl.size and np.all(np.isfinite(sl)) and np.all(sl >= REPLAY_SLOPE_K))


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


def headline(s: DensitySweep, lang: str = "en") -> str:
    """The figure title's claim, true to the data: "replay ~K" only if ``replay_follows_k``."""
    zh = lang == "zh"
    if s.replay_follows_k:
        return (
            "每 K 个 token 一个检查点：显存 ~1/K，重放 ~K"
            if zh
            else ("A checkpoint every K tokens: memory ~1/K, replay ~K")
        )
    return (
        "每 K 个 token 一个检查点：显存 ~1/K，重放几乎不变"
        if zh
        else "A checkpoint every K tokens: memory ~1/K, replay ~flat"
    )


def replay_note(s: DensitySweep, lang: str = "en", width: int | None = None) -> str:
    """Why the simulated replay per hit does (not) follow the analytic curve, with the numbers.

    ``width``: wrap lines at about this many characters with "\n" (None: one paragraph)."""
    big = s.intervals > s.block_size  # K = block replays only the partial last block
    if not big.any():
        big = np.ones_like(big)
    sim_r = s.mean_replay_per_hit[big]
    pos = sim_r[sim_r > 0]
    lo, hi = (float(pos.min()), float(pos.max())) if pos.size else (0.0, 0.0)
    k0, k1 = int(s.intervals[big][0]), int(s.intervals[big][-1])
    sl = float(np.nanmax(s.replay_slope)) if np.isfinite(s.replay_slope).any() else math.nan
    an = s.analytic.replay_curve[big]
    if lang == "zh":
        parts = (
            [
                f"模拟：每次命中重放 {lo:,.0f}–{hi:,.0f} token"
                + (
                    f"（K={k0:,}–{k1:,}，对数斜率 {sl:.2f}，1 即 ~K）。"
                    if math.isfinite(sl)
                    else f"（只有 K={k0:,} 一个间隔：算不出斜率，至少需要两个 K）。"
                )
            ]
            + (
                []
                if s.replay_follows_k
                else [
                    "几乎不变：缓存只保留到请求最深检查点为止的 KV，"
                    "后续轮次通常恰好在检查点处匹配，只在分叉点才重放。"
                ]
            )
            + [
                f"虚线（解析）：若每个 token 的 KV 都保留，重放 = 理想匹配点 − 向下取整到 K，"
                f"{an.min():,.0f}–{an.max():,.0f} token。"
            ]
        )
    else:
        parts = (
            [
                f"Simulated replay per hit: {lo:,.0f}-{hi:,.0f} tokens "
                + (
                    f"over K={k0:,}-{k1:,} (log-log slope {sl:.2f}; 1 would be ~K)."
                    if math.isfinite(sl)
                    else f"at the one interval K={k0:,} (a slope needs two or more K)."
                )
            ]
            + (
                []
                if s.replay_follows_k
                else [
                    "It stays flat because the cache keeps KV only up to a request's deepest "
                    "checkpoint: a follow-up turn usually matches exactly at a checkpoint and "
                    "replays only at branch points."
                ]
            )
            + [
                "Dashed (analytic): replay if KV were kept for every token = ideal match "
                f"- floor to K, {an.min():,.0f}-{an.max():,.0f} tokens."
            ]
        )
    text = ("" if lang == "zh" else " ").join(parts)
    if width is None:
        return text
    import textwrap

    if lang == "zh":
        return "\n".join(text[i : i + width] for i in range(0, len(text), width))
    return "\n".join(textwrap.wrap(text, width))


LOAD_KINDS: tuple[str, ...] = ("head", "bundled", "generated")


@functools.lru_cache(maxsize=8)
def load_workload(kind: str, name: str, n_head: int = 1000) -> Trace:
    """A workload for the app. ``kind``: "head" (the first ``n_head`` requests of bundled trace
    ``name``, parsing only those lines), "bundled" (the whole bundled trace) or "generated"
    (``workloads.workload(name)``). Memoised (traces are read-only)."""
    if kind not in LOAD_KINDS:
        raise ValueError(f"kind must be one of {list(LOAD_KINDS)}, got {kind!r:.40}")
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
