"""Data for the context_parallel app and figure: KDA's affine prefix scan across ranks.

* ``demo``: one sequence (optionally packed documents) split over P ranks, run in this process
  with `kda_core.cp` (the plan, schedule and messages the gloo ranks run): each rank's segment,
  the scan's messages step by step (src -> dst, map or state, bytes), the state each rank
  receives (head 0) next to the true state at its boundary, and the exactness of every rank's
  outputs and the final state against single-rank `kda.chunked`. Bytes each rank sends for the
  scan (this demo's small layer); the same messages for one K3 layer next to what an MLA KV
  all-gather of the same context sends for one K3 layer (like with like: both at K3 scale).
* ``cost_model``: wall time and bytes per rank over P, extrapolated from *measured per-step
  costs passed in* (``StepCosts``; bench/bench_cp.py measures them; nothing here times
  anything). ``MEASURED`` is one such measurement on this machine kind, for the app and figure.

The comparison is per layer: one KDA layer of H heads (here H = 8 = Kimi K3's 96 heads at
TP 12) against one MLA layer of K3 (kv_lora_rank + rope = 576 latents per token, bf16, not split
by TP: `sizing.mla_kv_bytes_per_token` / n_mla_layers). A ring all-gather of the KV makes each
rank send its T/P tokens to P-1 ranks: (P-1) T/P tokens per rank, growing with T; the scan
sends at most ceil(log2 P) maps + one state per rank (log-depth) or P-1 maps (all-gather),
whatever T. Left out: overlap of communication and compute, the MLA layers' own ring attention
(the hybrid needs it too), network topology (one latency and one bandwidth for every link).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import kda, sizing
from kda_core._checks import check_int, rel_error
from kda_core.kda import cp
from kda_core.studies._kda_inputs import random_inputs

MAX_T = 4096
MAX_P = 16
MAX_DOCS = 8
_MAX_MODEL_P = 1024
_MAX_MODEL_T = 1 << 24


def mla_layer_bytes_per_token(model: str = "kimi-k3", dtype: str = "bfloat16") -> int:
    """One MLA layer's KV bytes per token (the latent cache; the same on every TP rank)."""
    spec = sizing.preset(model)
    return sizing.mla_kv_bytes_per_token(spec, dtype) // spec.n_mla_layers


def kv_allgather_bytes(T: int, P: int, per_token: int) -> int:
    """Bytes one rank sends in a ring all-gather of T tokens' KV over P ranks (P-1 blocks of
    T/P tokens; the largest rank's share when P does not divide T)."""
    T = check_int("T", T, 1, _MAX_MODEL_T)
    P = check_int("P", P, 1, _MAX_MODEL_P)
    return _kv_allgather_bytes(T, P, check_int("per_token", per_token, 0, 1 << 40))


def _kv_allgather_bytes(T: int, P: int, per_token: int) -> int:
    return (P - 1) * math.ceil(T / P) * per_token


# --------------------------------------------------------------------------------------------
# the in-process demo


@dataclass(slots=True)
class Demo:
    T: int
    P: int
    H: int
    K: int
    V: int
    scan: str
    bounds: np.ndarray  # [P + 1]
    cu_seqlens: np.ndarray  # [N_docs + 1]
    constant: np.ndarray  # [P] bool: the rank's element is a constant map (document start)
    msg_step: np.ndarray  # [n] per message
    msg_src: np.ndarray
    msg_dst: np.ndarray
    msg_kind: np.ndarray  # "map" / "state"
    msg_bytes: np.ndarray
    S_in: np.ndarray  # [P, K, V] head 0's incoming state (rank 0: its initial state)
    S_true: np.ndarray  # [P, K, V] the true state at each rank's start (sequential chunked)
    o_rel: np.ndarray  # [P] rel error of each rank's outputs vs single-rank chunked
    S_final_rel: float  # the final state(s) vs chunked
    S_in_rel: np.ndarray  # [P] incoming state vs the true one
    bytes_sent: np.ndarray  # [P] per rank, this scan
    bytes_other: np.ndarray  # [P] per rank, the other scan
    k3_scan_bytes: dict[str, int]  # scan -> max per rank, the same messages for one K3 layer
    kv_bytes: int  # per rank, MLA KV ring all-gather of the same T (one K3 MLA layer, bf16)
    source: str


def demo(
    T: int = 512,
    P: int = 4,
    scan: str = "logdepth",
    *,
    H: int = 2,
    K: int = 16,
    V: int = 16,
    docs: Sequence[int] | None = None,
    seed: int = 0,
) -> Demo:
    """Run ``P`` in-process ranks on seeded inputs (float64). ``docs``: document lengths summing
    to T (packed varlen, each document with its own random initial state); None = one."""
    T = check_int("T", T, 1, MAX_T)
    P = check_int("P", P, 1, min(MAX_P, T))
    if scan not in cp.SCANS:
        raise ValueError(f"scan must be one of {cp.SCANS}, got {scan!r}")
    x = random_inputs(T, H=H, K=K, V=V, seed=seed)
    if docs is None:
        cu = np.array([0, T])
    else:
        lens = [check_int("document length", d, 1, T) for d in docs]
        if not 1 <= len(lens) <= MAX_DOCS or sum(lens) != T:
            raise ValueError(f"docs must be 1..{MAX_DOCS} lengths summing to T={T}, got {lens}")
        cu = np.concatenate([[0], np.cumsum(lens)])
    n = len(cu) - 1
    S0 = np.stack([x.S0] + [random_inputs(1, H, K, V, seed + d).S0 for d in range(1, n)])
    # context_parallel's default split: rank 0 (plain pass) gets more tokens for one sequence
    weight = cp.balance_weight(T, H, K, V) if docs is None else 1.0
    plan = cp.make_plan(T, P, cu, 64, weight)
    inputs = (x.q, x.k, x.v, x.g, x.beta)
    scale = K**-0.5
    o, finals, (_, scan_log) = cp.run_in_process(plan, inputs, S0, scan, scale, 64)
    o_ref, S_ref, S_true = _reference(inputs, cu, S0, plan.bounds)
    other = "allgather" if scan == "logdepth" else "logdepth"
    _, _, (_, scan_log_other) = cp.run_in_process(plan, inputs, S0, other, scale, 64)
    other_log = scan_log_other.schedule
    msgs = [m for step in scan_log.schedule for m in step]
    S_in = np.stack([S_true[0] if s is None else s[0] for s in scan_log.S_in])
    b = plan.bounds
    return Demo(
        T=T,
        P=P,
        H=H,
        K=K,
        V=V,
        scan=scan,
        bounds=np.array(b),
        cu_seqlens=cu,
        constant=np.array(plan.constant),
        msg_step=np.array([m.step for m in msgs], int),
        msg_src=np.array([m.src for m in msgs], int),
        msg_dst=np.array([m.dst for m in msgs], int),
        msg_kind=np.array([m.kind for m in msgs], dtype=object),
        msg_bytes=np.array([cp.message_bytes(m.kind, H, K, V, 8) for m in msgs], int),
        S_in=S_in,
        S_true=S_true,
        o_rel=np.array([rel_error(o[b[r] : b[r + 1]], o_ref[b[r] : b[r + 1]]) for r in range(P)]),
        S_final_rel=rel_error(np.stack([finals[d] for d in range(n)]), S_ref),
        S_in_rel=np.array([rel_error(S_in[r], S_true[r]) for r in range(P)]),
        bytes_sent=scan_log.bytes_sent,
        bytes_other=scan_log_other.bytes_sent,
        k3_scan_bytes={scan: _k3_bytes(scan_log.schedule, P), other: _k3_bytes(other_log, P)},
        kv_bytes=kv_allgather_bytes(T, P, mla_layer_bytes_per_token()),
        source=f"{x.source}, {n} document{'s' if n > 1 else ''}",
    )


def _k3_bytes(schedule: list[list[cp.Message]], P: int) -> int:
    """Most bytes one rank sends under ``schedule`` for one K3 KDA layer per TP rank (the cost
    model's 8 heads × 128 × 128, fp32: the scale ``kv_bytes`` is at)."""
    c = MEASURED
    return int(cp.bytes_sent(schedule, P, c.H, c.K, c.V, c.itemsize).max())


def _reference(inputs, cu, S0, bounds):
    """Single-rank chunked per document; the true head-0 state at every rank start."""
    o_parts, finals = [], []
    states = {}  # token position -> state (head 0) at that position, within its document
    for d in range(len(cu) - 1):
        a, e = int(cu[d]), int(cu[d + 1])
        inside = [t for t in bounds[:-1] if a <= t < e]
        S = S0[d]
        prev = a
        for t in inside:  # chunked up to each rank start, then on
            if t > prev:
                _, S = kda.chunked(*(x[prev:t] for x in inputs), initial_state=S)
            states[t] = S[0]
            prev = t
        o_d, S_d = kda.chunked(*(x[a:e] for x in inputs), initial_state=S0[d])
        o_parts.append(o_d)
        finals.append(S_d)
    S_true = np.stack([states[t] for t in bounds[:-1]])
    return np.concatenate(o_parts), np.stack(finals), S_true


# --------------------------------------------------------------------------------------------
# the cost model


@dataclass(frozen=True, slots=True)
class StepCosts:
    """Measured per-step costs of one rank (one thread) and one gloo link."""

    chunked_s_per_token: float  # plain kda.chunked
    local_s_per_token: float  # the augmented local pass ([b | M], width V + K)
    finish_s_per_token: float  # o += qM S_in
    compose_s: float  # one combine of two maps (M2 M1, M2 b1 + b2)
    apply_s: float  # M S + b
    latency_s: float  # one message, small
    bandwidth_Bps: float  # bytes per second, large messages
    H: int = 8
    K: int = 128
    V: int = 128
    itemsize: int = 4
    source: str = ""


# bench/bench_cp.py on this machine kind (2 cores shared with other work, load average 9-14
# during the run), float32, H = 8, K = V = 128, T = 32k: per-token costs are CPU
# seconds of one rank (the wall clock there measured the load, not the work: P = 2 took 0.53x
# one rank's wall time but 1.38x less CPU on its critical path); latency and bandwidth from a
# gloo ping-pong on loopback (wall time, so pessimistic under that load). The app and figure
# draw this measurement; pass your own StepCosts to model another machine.
MEASURED = StepCosts(
    chunked_s_per_token=4.32e-5,
    local_s_per_token=8.04e-5,
    finish_s_per_token=5.0e-6,
    compose_s=7.4e-4,
    apply_s=3.4e-4,
    latency_s=4.1e-5,
    bandwidth_Bps=4.75e8,
    source="bench_cp.py, 2-core CPU under load, gloo on loopback",
)


@dataclass(slots=True)
class CostModel:
    T: int
    P: np.ndarray  # [n]
    wall_s: dict[str, np.ndarray]  # scan -> [n] modelled wall time
    speedup: dict[str, np.ndarray]  # scan -> [n] vs one rank's plain chunked
    scan_s: dict[str, np.ndarray]  # scan -> [n] longest time a rank spends in the scan
    phases: dict[str, dict[str, np.ndarray]]  # scan -> local / scan / finish -> [n] seconds
    # of the slowest rank (they add up to wall_s)
    bytes_sent: dict[str, np.ndarray]  # scan -> [n] max bytes one rank sends
    kv_bytes: np.ndarray  # [n] MLA KV ring all-gather, per rank
    one_rank_s: float
    costs: StepCosts


def _schedule(scan: str, P: int) -> list[list[cp.Message]]:
    # one sequence: only rank 0's element is constant
    if scan == "allgather":
        return cp.allgather_schedule(P)
    return cp.logdepth_schedule([True] + [False] * (P - 1))


def _rank_times(scan: str, T: int, P: int, c: StepCosts) -> tuple[np.ndarray, np.ndarray]:
    """Per rank: (its local pass ends, its scan ends, it is done), seconds from the start,
    walking the schedule: a message leaves when its sender holds the value, arrives after
    latency + bytes / bandwidth; the receiver then composes (map) or applies (state)."""
    bounds = cp.split_points(T, P, 64, cp.balance_weight(T, c.H, c.K, c.V))  # as cp splits
    share = np.diff(bounds)
    ready = np.array(
        [(c.chunked_s_per_token if r == 0 else c.local_s_per_token) * share[r] for r in range(P)]
    )
    t = ready.copy()
    if P == 1:
        return ready, t, t
    if scan == "allgather":  # a collective: everyone waits for the slowest, P-1 ring hops
        hop = c.latency_s + cp.message_bytes("map", c.H, c.K, c.V, c.itemsize) / c.bandwidth_Bps
        t = ready.max() + (P - 1) * hop + np.maximum(np.arange(P) - 1, 0) * c.apply_s
    else:
        for step in _schedule(scan, P):
            new = t.copy()
            for m in step:
                nbytes = cp.message_bytes(m.kind, c.H, c.K, c.V, c.itemsize)
                arrive = t[m.src] + c.latency_s + nbytes / c.bandwidth_Bps
                op = 0.0 if m.step == 0 else c.apply_s + (c.compose_s if m.kind == "map" else 0)
                new[m.dst] = max(new[m.dst], arrive) + op
            t = new
    done = t + np.where(np.arange(P) > 0, c.finish_s_per_token * share, 0.0)
    return ready, t, done


def cost_model(
    costs: StepCosts = MEASURED,
    T: int = 32768,
    P_values: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
) -> CostModel:
    """Wall time of one layer over P from ``costs`` (the slowest rank: local pass on its T/P
    tokens, the scan's critical path through the schedule, the finish) and the bytes one rank
    sends at most."""
    T = check_int("T", T, 1, _MAX_MODEL_T)
    Ps = np.array([check_int("P", p, 1, min(_MAX_MODEL_P, T)) for p in P_values])
    for name in ("chunked_s_per_token", "local_s_per_token", "bandwidth_Bps"):
        if not getattr(costs, name) > 0:
            raise ValueError(f"costs.{name} must be > 0, got {getattr(costs, name)}")
    one = costs.chunked_s_per_token * T
    wall, speed, scan_s, sent, phases = {}, {}, {}, {}, {}
    for scan in cp.SCANS:
        w, sc, b = [], [], []
        ph: dict[str, list[float]] = {"local": [], "scan": [], "finish": []}
        for P in Ps.tolist():
            ready, scan_end, done = _rank_times(scan, T, P, costs)
            i = int(np.argmax(done))
            w.append(float(done[i]))
            sc.append(float((scan_end - ready).max()))
            ph["local"].append(float(ready[i]))
            ph["scan"].append(float(scan_end[i] - ready[i]))
            ph["finish"].append(float(done[i] - scan_end[i]))
            sched = _schedule(scan, P)
            b.append(int(cp.bytes_sent(sched, P, costs.H, costs.K, costs.V, costs.itemsize).max()))
        wall[scan], scan_s[scan], sent[scan] = np.array(w), np.array(sc), np.array(b)
        phases[scan] = {k: np.array(v) for k, v in ph.items()}
        speed[scan] = one / wall[scan]
    per_tok = mla_layer_bytes_per_token()
    kv = np.array([_kv_allgather_bytes(T, P, per_tok) for P in Ps.tolist()])
    return CostModel(T, Ps, wall, speed, scan_s, phases, sent, kv, one, costs)


def phase_shares(m: CostModel, scan: str) -> dict[str, np.ndarray]:
    """The slowest rank's phases as fractions of the wall time, per P."""
    return {k: v / m.wall_s[scan] for k, v in m.phases[scan].items()}


def _crossover_tokens(P: int, costs: StepCosts = MEASURED, scan: str = "logdepth") -> int:
    """The context length from which a KV ring all-gather sends more than the scan per rank."""
    P = check_int("P", P, 2, _MAX_MODEL_P)
    sched = _schedule(scan, P)
    scan_b = int(cp.bytes_sent(sched, P, costs.H, costs.K, costs.V, costs.itemsize).max())
    per = mla_layer_bytes_per_token() * (P - 1) / P
    return math.ceil(scan_b / per)


@dataclass(slots=True)
class BytesVsContext:
    P: int
    T: np.ndarray  # [n] context lengths
    scan_bytes: dict[str, int]  # scan -> max bytes one rank sends (the same for every T)
    kv_bytes: np.ndarray  # [n] MLA KV ring all-gather, per rank
    crossover: dict[str, int]  # scan -> T from which the KV all-gather sends more
    H: int
    K: int
    V: int
    itemsize: int


def _bytes_vs_context(
    P: int = 8, T_values: Sequence[int] | None = None, costs: StepCosts = MEASURED
) -> BytesVsContext:
    """Per-rank bytes over the context length: the scan is flat, the KV all-gather grows."""
    P = check_int("P", P, 2, _MAX_MODEL_P)
    Ts = np.array(
        [check_int("T", t, P, _MAX_MODEL_T) for t in (T_values or [2**i for i in range(10, 21)])]
    )
    per = mla_layer_bytes_per_token()
    scan_b = {
        s: int(cp.bytes_sent(_schedule(s, P), P, costs.H, costs.K, costs.V, costs.itemsize).max())
        for s in cp.SCANS
    }
    return BytesVsContext(
        P=P,
        T=Ts,
        scan_bytes=scan_b,
        kv_bytes=np.array([_kv_allgather_bytes(int(t), P, per) for t in Ts]),
        crossover={s: _crossover_tokens(P, costs, s) for s in cp.SCANS},
        H=costs.H,
        K=costs.K,
        V=costs.V,
        itemsize=costs.itemsize,
    )


@dataclass(slots=True)
class FigureData:
    model: CostModel
    bytes: BytesVsContext
    demo: Demo


def figure_data(quick: bool = False, costs: StepCosts = MEASURED) -> FigureData:
    """What plots/plot_context_parallel.py draws: the cost model at T = 32k over P = 1..64,
    bytes over T at P = 8, and an in-process run's exactness per rank."""
    return FigureData(
        model=cost_model(costs, T=32768, P_values=(1, 2, 4, 8, 16, 32, 64)),
        bytes=_bytes_vs_context(8, costs=costs),
        demo=demo(T=256 if quick else 1024, P=4 if quick else 8, scan="logdepth"),
    )
