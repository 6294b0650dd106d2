"""Why a sliding-window layer's checkpoints do not carry over to KDA, side by side.

A sliding-window attention (SWA) layer reads the K/V of the last W tokens only. Those K/V
are per-token records, so its cache can resume at ANY position p whose W preceding tokens'
K/V are still held, and from the layer's inputs alone the last W tokens rebuild it exactly.
A KDA layer's state is the whole history folded together,

    S_n = M_n ... M_1 S_0 + sum_i M_n ... M_{i+1} b_i        (kda.AffineMap, per head)

so a state exists only where one was saved: nothing near n gives S_n without every earlier
transition (starting from zero W tokens back leaves out M_n ... M_{n-W+1} S_{n-W}).

Two functions, each returning plain dataclasses of arrays a figure can draw:

* ``checkpoint_costs``: bytes of one checkpoint, an SWA window of W tokens' K/V (an SWA layer
  shaped like each KDA layer: same heads, K + V per head) vs the KDA state + conv window
  (``kda_core.sizing``), and the window at which they cost the same;
* ``resume_on_workload``: the same requests (a synthetic workload or the bundled trace),
  checkpoints every k tokens in both caches, no budget: the token match, where each cache
  resumes, the replayed tokens and the bytes held.

The maths on real arrays (SWA from the last W tokens is exact, KDA from zero state W tokens
back is off by exactly the carried term, KDA from a saved state is exact) is worked through in
tests/test_studies_swa_vs_kda.py (``recent_tokens``; docs/swa_vs_kda.md has its figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.workloads import Trace, workload

__all__ = [
    "CheckpointCosts",
    "WorkloadResume",
    "checkpoint_costs",
    "resume_on_workload",
]

_MAX_WINDOW = 1 << 20
_MAX_GRID = 12  # values per axis


def _check_ints(name: str, values: object, lo: int, hi: int) -> tuple[int, ...]:
    """A sequence of 1..MAX_GRID distinct ints in [lo, hi], sorted."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} must be a sequence of 1..{_MAX_GRID} integers in [{lo}, {hi}]")
    if not 1 <= len(values) <= _MAX_GRID:
        raise ValueError(f"{name} must hold 1..{_MAX_GRID} values, got {len(values)}")
    return tuple(sorted({check_int(name, v, lo, hi) for v in values}))


@dataclass(frozen=True)
class CheckpointCosts:
    """Bytes of one checkpoint over all linear layers (per GPU at ``tp``).

    windows [n]: W; swa_window_bytes [n]: the K/V of W tokens in every SWA layer;
    kda_checkpoint_bytes: state + conv window (the same for every W); crossover_window: the
    W at which an SWA window costs as much as a KDA checkpoint (float).
    """

    model: str
    layers: int
    windows: np.ndarray
    swa_window_bytes: np.ndarray
    swa_bytes_per_token: int
    kda_state_bytes: int
    kda_conv_bytes: int
    kda_checkpoint_bytes: int
    crossover_window: float


def _kv_heads(spec: sizing.ModelSpec, kv_heads: int | None, tp: int) -> int:
    heads = spec.kda_heads if kv_heads is None else check_int("kv_heads", kv_heads, 1, 1 << 16)
    return -(-heads // tp)  # KV heads are replicated when tp exceeds them


def checkpoint_costs(
    model: str | sizing.ModelSpec = "kimi-k3",
    windows: Sequence[int] = (64, 128, 512, 1024, 4096),
    *,
    kv_heads: int | None = None,
    tp: int = 1,
    state_dtype: str = "float32",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> CheckpointCosts:
    """One SWA window checkpoint vs one KDA checkpoint, for SWA layers standing in for the
    model's KDA layers (``kv_heads`` K/V heads, default the KDA heads; head dims K and V)."""
    sizing.check_knobs(model, state_dtype=state_dtype, conv_dtype=conv_dtype, kv_dtype=kv_dtype)
    spec = sizing.as_spec(model)
    tp = check_int("tp", tp, 1, 1 << 10)
    ws = np.array(_check_ints("windows", windows, 1, _MAX_WINDOW), dtype=np.int64)
    state = sizing.kda_state_bytes(spec, tp, state_dtype)
    conv = sizing.conv_state_bytes(spec, tp, conv_dtype)
    per_token = (
        spec.n_kda_layers
        * _kv_heads(spec, kv_heads, tp)
        * (spec.head_k_dim + spec.head_v_dim)
        * sizing.dtype_bytes(kv_dtype)
    )
    return CheckpointCosts(
        model=spec.name,
        layers=spec.n_kda_layers,
        windows=ws,
        swa_window_bytes=ws * per_token,
        swa_bytes_per_token=per_token,
        kda_state_bytes=state,
        kda_conv_bytes=conv,
        kda_checkpoint_bytes=state + conv,
        crossover_window=(state + conv) / per_token,
    )


@dataclass(frozen=True)
class WorkloadResume:
    """The same requests through an SWA-window cache and a KDA-state cache (sums over
    requests, one entry per interval k).

    token_match: prefix tokens already seen; {swa,kda}_resume: where each cache resumes;
    {swa,kda}_replay: matched tokens recomputed (match - resume); swa_rebuild_replay: the
    SWA replay when a layer may also rebuild its window from the inputs of the last W matched
    tokens (at most W per request; a KDA layer has no such bound); {swa,kda}_bytes: bytes
    held at the end (distinct SWA K/V blocks x block tokens x bytes per token; distinct KDA
    states x checkpoint bytes); kda_states / swa_blocks: those counts.
    """

    trace: str
    requests: int
    block_size: int
    window: int
    intervals: np.ndarray
    token_match: int
    swa_resume: np.ndarray
    kda_resume: np.ndarray
    swa_replay: np.ndarray
    kda_replay: np.ndarray
    swa_rebuild_replay: np.ndarray
    swa_bytes: np.ndarray
    kda_bytes: np.ndarray
    swa_blocks: np.ndarray
    kda_states: np.ndarray


def _sequences(trace: Trace) -> list[tuple[list[int], list[int]]]:
    """(input full blocks, input full blocks + decoded output blocks) per request."""
    b, out = trace.block_size, []
    for i in range(len(trace)):
        ids = trace.block_ids(i).tolist()[: int(trace.input_len[i]) // b]
        out.append((ids, ids + trace.out_block_ids(i).tolist()))
    return out


def _swa_resume(ids: list[int], m: int, wb: int, kv: set[int]) -> int:
    """Largest p <= m (blocks) whose ``wb`` preceding blocks (all of them when p < wb) are
    held: an SWA layer resumes there with nothing recomputed."""
    best = run = 0
    for i in range(m):
        run = run + 1 if ids[i] in kv else 0
        if run >= min(wb, i + 1):
            best = i + 1
    return best


def _one_interval(seqs: list, kb: int, wb: int) -> tuple[int, ...]:
    """Serve ``seqs`` in order with checkpoints every ``kb`` blocks; returns (match, SWA
    resume, KDA resume, SWA replay when the window may be rebuilt from its last ``wb``
    blocks' inputs, SWA blocks held, KDA states held), all in blocks."""
    seen: set[int] = set()
    states: set[int] = set()
    kv: set[int] = set()
    match = swa = kd = rebuild = 0
    for ids, full in seqs:
        m = 0
        while m < len(ids) and ids[m] in seen:
            m += 1
        c = m // kb * kb
        while c > 0 and ids[c - 1] not in states:  # a state is keyed by its last block
            c -= kb
        p = _swa_resume(ids, m, wb, kv)
        match, kd, swa, rebuild = match + m, kd + c, swa + p, rebuild + min(m - p, wb)
        seen.update(full)
        for end in range(kb, len(full) + 1, kb):
            states.add(full[end - 1])
            kv.update(full[max(end - wb, 0) : end])
    return match, swa, kd, rebuild, len(kv), len(states)


def resume_on_workload(
    trace: Trace | str = "chat",
    intervals: Sequence[int] = (256, 1024, 4096),
    *,
    window: int = 1024,
    costs: CheckpointCosts | None = None,
) -> WorkloadResume:
    """Checkpoints every k tokens (k in ``intervals``, multiples of the trace's block) in both
    caches, no budget, requests in arrival order: an SWA checkpoint keeps the K/V blocks of
    the ``window`` tokens before it, a KDA checkpoint the state at it. ``trace`` is a Trace or
    a workload name (``kda_core.workloads.workload``: "chat" is 30 multi-turn sessions);
    ``costs`` prices them (default ``checkpoint_costs()`` at ``window``)."""
    if isinstance(trace, str):
        trace = workload(trace, n_sessions=30, seed=0) if trace == "chat" else workload(trace)
    if not isinstance(trace, Trace) or len(trace) == 0:
        raise ValueError("trace must be a non-empty Trace or a workload name")
    b = trace.block_size
    ks = _check_ints("intervals", intervals, b, _MAX_WINDOW)
    window = check_int("window", window, b, _MAX_WINDOW)
    for name, v in [("window", window), *(("intervals", k) for k in ks)]:
        if v % b:
            raise ValueError(f"{name} must be multiples of the trace's block size {b}, got {v}")
    costs = checkpoint_costs(windows=(window,)) if costs is None else costs
    seqs = _sequences(trace)
    rows = np.array([_one_interval(seqs, k // b, window // b) for k in ks], dtype=np.int64)
    match = int(rows[0, 0]) * b
    swa, kd = rows[:, 1] * b, rows[:, 2] * b
    return WorkloadResume(
        trace=trace.name,
        requests=len(trace),
        block_size=b,
        window=window,
        intervals=np.array(ks, dtype=np.int64),
        token_match=match,
        swa_resume=swa,
        kda_resume=kd,
        swa_replay=match - swa,
        kda_replay=match - kd,
        swa_rebuild_replay=rows[:, 3] * b,
        swa_bytes=rows[:, 4] * b * costs.swa_bytes_per_token,
        kda_bytes=rows[:, 5] * costs.kda_checkpoint_bytes,
        swa_blocks=rows[:, 4],
        kda_states=rows[:, 5],
    )
