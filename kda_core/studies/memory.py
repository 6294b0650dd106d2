"""Unified two-ended pool vs static partitions on one workload (the unified_memory app).

`compare` replays a workload (`kda_core.memory.replay`) through the unified pool and through
static pools over a ratio grid plus each phase's tuned ratio; `buffer_at` gives
what the app draws of the buffers. The replay model (full-reservation FIFO admission, growing
KV pages, compaction counted) is in `kda_core.memory.replay` and docs/memory.md.

Measured (``shifting_mix()`` defaults: 3000 chat + 150 long-context requests, K3 per GPU at
TP8 bf16, 28 GiB, grid of 12 static ratios in [0.03, 5] plus the two phase-tuned ones; see
bench/bench_memory.py): mean concurrency unified 95.8; best static in hindsight (r = 0.78) 62.1
(unified x1.54); static tuned for the chat phase (r = 1.54) 51.9 (x1.84); static tuned for the
long-context phase (r = 0.047) 14.9 (x6.43). Compaction: eager 254,919 page/slot moves vs lazy
1,512 for the same admissions.

The workload and replay names (``shifting_mix``, ``ReplayConfig``, ``replay`` ...) are imported
here because the app, the figure and the study's callers use them with the comparison.
Left out: everything the replay leaves out (prefix caching, retraction, speculative buffers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int as _check_int
from kda_core.memory import (
    ReplayConfig,
    ReplayResult,
    Workload,
    from_lengths,
    from_trace,
    replay,
    shifting_mix,
    tuned_ratio,
)
from kda_core.sizing import GIB


def k3_config(
    model: str | sizing.ModelSpec = "kimi-k3",
    tp: int = 8,
    total_gib: float = 28.0,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    **knobs: object,
) -> ReplayConfig:
    """A ReplayConfig from real model sizes (``kda_core.sizing``); slots per request = held."""
    if not 0.001 <= float(total_gib) <= 16384:
        raise ValueError(f"total_gib must be in [0.001, 16384], got {total_gib}")
    sizing.check_knobs(
        model, overlap, ssm_dtype=ssm_dtype, conv_dtype=conv_dtype, kv_dtype=kv_dtype
    )
    return ReplayConfig(
        total_bytes=int(float(total_gib) * GIB),
        state_slot_bytes=sizing.slot_bytes(model, tp, ssm_dtype, conv_dtype),
        kv_bytes_per_token=sizing.mla_kv_bytes_per_token(model, kv_dtype),
        slots_per_request=sizing.slots_held_per_request(strategy, overlap),
        **knobs,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------------
# Unified vs static
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """Unified pool vs static partitions on one workload.

    ``ratios [R]`` and ``static_mean_concurrency [R]`` / ``static_queue_delay [R]`` /
    ``static_makespan [R]`` over the grid (which includes both phase-tuned ratios);
    ``best_ratio`` = the best static ratio in hindsight; ``phase_ratios`` the ratio tuned for
    each phase alone (``tuned_ratio``).
    """

    unified: ReplayResult
    ratios: np.ndarray
    static_mean_concurrency: np.ndarray
    static_queue_delay: np.ndarray
    static_makespan: np.ndarray
    best_ratio: float
    best_static: ReplayResult
    static: tuple[ReplayResult, ...]  # one per entry of ``ratios``
    phase_names: tuple[str, ...]
    phase_ratios: tuple[float, ...]
    phase_static: tuple[ReplayResult, ...]


def compare(
    workload: Workload,
    config: ReplayConfig | None = None,
    ratios: Sequence[float] | np.ndarray | None = None,
    mode: str = "eager",
) -> Comparison:
    """Replay the unified pool (``mode``) and static pools over a ratio grid plus each phase's
    tuned ratio. Default grid: 9 ratios log-spaced in [0.02, 5]."""
    cfg = ReplayConfig() if config is None else config
    if mode not in ("eager", "lazy"):
        raise ValueError(f"mode must be 'eager' or 'lazy', got {mode!r}")
    grid = np.geomspace(0.02, 5.0, 9) if ratios is None else np.asarray(ratios, np.float64)
    if grid.ndim != 1 or not 1 <= grid.size <= 64 or (grid <= 0).any() or (grid > 1e6).any():
        raise ValueError("ratios must be 1-D with 1..64 values in (0, 1e6]")
    n_phases = len(workload.phase_names)
    phase_r = tuple(
        tuned_ratio(workload, cfg, p) for p in range(n_phases) if (workload.phase == p).any()
    )
    all_r = np.unique(np.concatenate([grid, np.asarray(phase_r)]))
    uni = replay(workload, mode, config=cfg)
    res = {float(r): replay(workload, "static", float(r), cfg) for r in all_r}
    conc = np.array([res[float(r)].mean_concurrency for r in all_r])
    best_i = int(np.argmax(conc))
    return Comparison(
        unified=uni,
        ratios=all_r,
        static_mean_concurrency=conc,
        static_queue_delay=np.array([res[float(r)].mean_queue_delay for r in all_r]),
        static_makespan=np.array([res[float(r)].makespan for r in all_r]),
        best_ratio=float(all_r[best_i]),
        best_static=res[float(all_r[best_i])],
        static=tuple(res[float(r)] for r in all_r),
        phase_names=tuple(
            workload.phase_names[p] for p in range(n_phases) if (workload.phase == p).any()
        ),
        phase_ratios=phase_r,
        phase_static=tuple(res[float(r)] for r in phase_r),
    )


def _k3_ratio_hint(config: ReplayConfig | None = None) -> float:
    """KV tokens one state slot weighs: ``S / kv_bytes_per_token`` (~1050 for K3 TP8 bf16)."""
    cfg = ReplayConfig() if config is None else config
    return cfg.state_slot_bytes / cfg.kv_bytes_per_token


@dataclass(frozen=True, slots=True, eq=False)
class _BufferSnapshot:
    """Every pool's byte buffer at one scheduler step (the unified_memory app's buffer bars).

    Pools ``P`` = the unified pool then every static pool of ``Comparison.static`` (in order).
    Bytes ``[P]`` int64 from offset 0: ``state_live`` | ``state_holes`` (freed slots below the
    state frontier) | ``free`` (between the frontiers) | ``kv_holes`` | ``kv_live`` (at the top
    end); the five sum to the buffer size at every step before a pool finishes (a finished pool
    is all free). ``running`` / ``queued`` / ``blocked`` ``[P]`` at the step; ``state_edge [P]``
    float64: a static pool's border (state region bytes), NaN for the unified pool.
    """

    step: int
    kinds: tuple[str, ...]
    ratios: tuple[float | None, ...]
    state_live: np.ndarray
    state_holes: np.ndarray
    free: np.ndarray
    kv_holes: np.ndarray
    kv_live: np.ndarray
    running: np.ndarray
    queued: np.ndarray
    blocked: np.ndarray
    state_edge: np.ndarray


def busiest_step(c: Comparison) -> int:
    """The first step with the most running requests in the unified pool."""
    return int(np.argmax(c.unified.timeline.running))


def buffer_at(c: Comparison, step: int, state_slot_bytes: int) -> _BufferSnapshot:
    """The buffers of ``c``'s pools at ``step`` (0 <= step < the unified makespan + 10**6)."""
    st = _check_int("step", step, 0, max(int(c.unified.makespan), 0) + 1_000_000)
    slot = _check_int("state_slot_bytes", state_slot_bytes, 1, 1 << 40)
    pools = (c.unified, *c.static)
    n = len(pools)
    cols = {
        k: np.zeros(n, np.int64)
        for k in ("state_live", "state_holes", "free", "kv_holes", "kv_live")
    }
    running, queued, blocked = (np.zeros(n, np.int64) for _ in range(3))
    edge = np.full(n, np.nan)
    for i, res in enumerate(pools):
        tl = res.timeline
        total = int(res.total_bytes)
        if st < tl.running.shape[0]:
            sf, kf = int(tl.state_frontier[st]), int(tl.kv_frontier[st])
            sb, kb = int(tl.state_bytes[st]), int(tl.kv_bytes[st])
            running[i], queued[i] = int(tl.running[st]), int(tl.queued[st])
            blocked[i] = int(tl.blocked[st])
        else:  # this pool has finished: all free
            sf, kf, sb, kb = 0, total, 0, 0
        cols["state_live"][i] = sb
        cols["state_holes"][i] = max(sf - sb, 0)
        cols["free"][i] = max(kf - sf, 0)
        cols["kv_holes"][i] = max(total - kf - kb, 0)
        cols["kv_live"][i] = kb
        if res.state_capacity is not None:
            edge[i] = float(res.state_capacity) * slot
    return _BufferSnapshot(
        step=st,
        kinds=tuple(r.kind for r in pools),
        ratios=tuple(r.ratio for r in pools),
        running=running,
        queued=queued,
        blocked=blocked,
        state_edge=edge,
        **cols,
    )


__all__ = [
    "GIB",
    "Comparison",
    "ReplayConfig",
    "ReplayResult",
    "Workload",
    "buffer_at",
    "busiest_step",
    "compare",
    "from_lengths",
    "from_trace",
    "k3_config",
    "replay",
    "shifting_mix",
    "tuned_ratio",
]
