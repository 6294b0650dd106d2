"""The CSV columns behind the apps' figures, built from the studies' results.

``columns(kind, *data)`` takes a study result and returns ordered columns ``{name: list}`` of
equal length for ``apps.ui.write_csv``, in long format (one row per point of a grid). Only
reshaping, nothing recomputed; the row builders live here, not in the apps, because building
rows is computation and the apps only draw.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kda_core.kda import cp
from kda_core.studies import batch_view as bv
from kda_core.studies import chunk_scan as cs
from kda_core.studies import context_parallel as cps
from kda_core.studies import density as ds
from kda_core.studies import int8 as i8
from kda_core.studies import planner as pl
from kda_core.studies import prefix_replay as pr
from kda_core.studies import speculative as sp
from kda_core.studies import transfer as tr
from kda_core.studies import tree_layout
from kda_core.studies._batch_options import buffer_columns

_SWEEP_METRICS = (
    "peak_state_bytes",
    "mean_replay_per_hit",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "state_hit_rate",
    "token_hit_rate",
    "checkpoints_stored",
    "evictions",
)


def _density_sweep(s: ds.DensitySweep) -> dict[str, list]:
    """One row per (interval, budget): every metric of the sweep, the optimum and Pareto flags."""
    rows = [
        (
            int(s.intervals[i]),
            lab,
            *(getattr(s, m)[i, j].item() for m in _SWEEP_METRICS),
            bool(s.optimum[j] == i),
            bool(s.pareto[i, j]),
        )
        for i in range(s.intervals.size)
        for j, lab in enumerate(s.budget_labels)
    ]
    cols = ["interval", "budget", *_SWEEP_METRICS, "optimum", "pareto"]
    return {c: [r[n] for r in rows] for n, c in enumerate(cols)}


def _density_pareto(s: ds.DensitySweep) -> dict[str, list]:
    """One row per (interval, budget): peak state memory against state hit, on the frontier?"""
    return {
        "interval": np.repeat(s.intervals, len(s.budget_labels)).tolist(),
        "budget": list(s.budget_labels) * s.intervals.size,
        "peak_state_bytes": s.peak_state_bytes.ravel().tolist(),
        "state_hit_rate": s.state_hit_rate.ravel().tolist(),
        "pareto": s.pareto.ravel().tolist(),
    }


def _grid(T: np.ndarray, C: np.ndarray, **cells: np.ndarray) -> dict[str, list]:
    """Long format over (T, chunk size): a [T] array repeats per chunk size, [T, C] by row."""
    nT, nC = np.size(T), np.size(C)
    cols = {"T": np.repeat(T, nC).tolist(), "chunk_size": np.tile(C, nT).tolist()}
    for k, x in cells.items():
        x = np.asarray(x)
        cols[k] = (np.repeat(x, nC) if x.ndim == 1 else x.reshape(nT * nC)).tolist()
    return cols


def _chunk_agreement(a: cs.Agreement) -> dict[str, list]:
    """One row per (T, chunk size): chunked vs recurrent differences of outputs and state."""
    keys = ("o_max_abs", "o_rel", "S_max_abs", "S_rel")
    cells = {k: np.asarray(getattr(a, k), dtype=float) for k in keys}
    return _grid(a.T_values, a.chunk_sizes, **cells)


def _chunk_cost(c: cs.Cost) -> dict[str, list]:
    """One row per (T, chunk size): sequential steps and matmul FLOPs of both forms."""
    ints = ("recurrent_steps", "chunked_steps", "recurrent_flops", "chunked_flops")
    cells = {k: np.asarray(getattr(c, k), dtype=np.int64) for k in ints}
    ratio = np.asarray(c.flops_ratio, dtype=float)
    return _grid(c.T_values, c.chunk_sizes, **cells, flops_ratio=ratio)


def _chunk_maps(m: cs.Composition) -> dict[str, list]:
    """One row per entry (row, col) of the composed transition matrix, true and swapped order."""
    K = m.M_true.shape[0]
    r, c = np.divmod(np.arange(K * K), K)
    return {
        "row": r.tolist(),
        "col": c.tolist(),
        "M_true": m.M_true.ravel().tolist(),
        "M_swapped": m.M_swapped.ravel().tolist(),
    }


def _cp_state(d: cps.Demo, rank: int) -> dict[str, list]:
    """One row per (key, value) entry: the state ``rank`` received next to the true one."""
    S = d.S_in[rank]
    K, V = S.shape
    return {
        "key": np.repeat(np.arange(K), V).tolist(),
        "value": np.tile(np.arange(V), K).tolist(),
        "S_in": S.ravel().tolist(),
        "S_true": d.S_true[rank].ravel().tolist(),
    }


def _cp_bytes(d: cps.Demo, groups: Sequence[str]) -> dict[str, list]:
    """Bytes per rank of both scans in ``groups`` (this demo's layer, one K3 layer at the
    demo's T and P, as the figure labels them), and of an MLA KV all-gather for the K3 layer
    only (the demo's layer has no MLA counterpart)."""
    other = "allgather" if d.scan == "logdepth" else "logdepth"
    demo_b = {d.scan: int(d.bytes_sent.max()), other: int(d.bytes_other.max())}
    rows: dict[str, list] = {"group": [], "series": [], "bytes": []}
    for s in cp.SCANS:
        for g, v in zip(groups, (demo_b[s], int(d.k3_scan_bytes[s]))):
            rows["group"].append(g)
            rows["series"].append(s)
            rows["bytes"].append(v)
    rows["group"].append(groups[1])
    rows["series"].append("mla_kv_allgather")
    rows["bytes"].append(int(d.kv_bytes))
    return rows


def _cp_speedup(models: Mapping[int, cps.CostModel]) -> dict[str, list]:
    """The modelled speed-up over P, one column per (scan, context T)."""
    P = next(iter(models.values())).P
    cols: dict[str, list] = {"P": np.asarray(P).tolist()}
    for T, m in models.items():
        for scan in cp.SCANS:
            cols[f"speedup_{scan}_T{T}"] = np.asarray(m.speedup[scan]).tolist()
    return cols


def _int8_error_map(e: i8.ErrorMap) -> dict[str, list]:
    """One row per (key channel, value channel) of the parked state: value, restored, error."""
    kk, vv = np.meshgrid(np.arange(e.state.shape[0]), np.arange(e.state.shape[1]), indexing="ij")
    return {
        "key_channel": kk.ravel().tolist(),
        "value_channel": vv.ravel().tolist(),
        "state": e.state.ravel().tolist(),
        "restored": e.restored.ravel().tolist(),
        "error": e.error.ravel().tolist(),
        "bound": e.bound.ravel().tolist(),
    }


def _int8_capacity(*capacities: i8.Capacity) -> dict[str, list]:
    """One row per (model, format): bytes per checkpoint and how many fit the budget."""
    metrics = ("state_bytes", "conv_bytes", "total_bytes", "capacity", "gain")
    rows: dict[str, list] = {"model": [], "variant": [], **{k: [] for k in metrics}}
    for c in capacities:
        rows["model"] += [c.model] * len(c.labels)
        rows["variant"] += list(c.labels)
        for k in metrics:
            rows[k] += np.asarray(getattr(c, k)).tolist()
    return rows


def _spec_ring(v: sp.VerifyStudy, stages: Sequence[str]) -> dict[str, list]:
    """One row per (stage, ring slot): the position each slot holds after verify / commit and
    its kind (``sp.SLOT_KINDS``); ``stages`` names the two stages as the figure does."""
    L = v.ring_len
    data: dict[str, list] = {"stage": [], "slot": [], "position": [], "kind": []}
    for r, pos, kind in zip(
        stages, (v.pos_after_verify, v.pos_after_commit), (v.kind_after_verify, v.kind_after_commit)
    ):
        data["stage"] += [r] * L
        data["slot"] += list(range(L))
        data["position"] += pos.tolist()
        data["kind"] += [sp.SLOT_KINDS[int(k)] for k in kind]
    return data


def _spec_memory(mem: sp.MemoryOverD) -> dict[str, list]:
    """One row per (model, D): ring bytes against a full state per draft token."""
    nD = mem.d_values.size
    data: dict[str, list] = {
        "model": [m for m in mem.models for _ in range(nD)],
        "D": np.tile(mem.d_values, len(mem.models)).tolist(),
        "ring_len": np.tile(mem.ring_len, len(mem.models)).tolist(),
    }
    for k in ("ring_bytes", "per_draft_state_bytes", "conv_window_bytes", "ratio"):
        data[k] = np.asarray(getattr(mem, k)).reshape(-1).tolist()
    return data


def _transfer_timeline(r: tr.PDRun) -> dict[str, list]:
    """One row per event of the prefill -> decode run (time from the first event, in ms)."""
    t0 = r.events[0].t if r.events else 0.0
    return {
        "t_ms": [1e3 * (e.t - t0) for e in r.events],
        "instance": [e.instance for e in r.events],
        "kind": [e.kind for e in r.events],
        "boundary": [e.boundary for e in r.events],
        "bytes": [e.nbytes for e in r.events],
    }


def _replay_timeline(res: pr.ScenarioResult) -> dict[str, list]:
    """One row per timeline segment (request 1-based, phase, [start, end)), then one per
    checkpoint parked (phase "checkpoint", start = end = its position)."""
    out: dict[str, list] = {"request": [], "phase": [], "start": [], "end": []}
    rows = [
        (i + 1, ph, a, b) for i, r in enumerate(res.requests) for a, b, ph in r.timeline.segments
    ]
    rows += [
        (i + 1, "checkpoint", p, p)
        for i, r in enumerate(res.requests)
        for p in r.timeline.checkpoints
    ]
    for row in rows:
        for k, v in zip(out, row):
            out[k].append(v)
    return out


def _replay_tree(snap: pr.TreeSnapshot) -> dict[str, list | np.ndarray]:
    """One row per radix node, with its drawing lane and child count (``tree_layout``)."""
    lay = tree_layout.layout(snap.node_id, snap.parent, snap.end)
    return {
        "node_id": snap.node_id,
        "parent": snap.parent,
        "depth": snap.depth,
        "start": snap.start,
        "end": snap.end,
        "has_state": snap.has_state,
        "kv_lock": snap.kv_lock,
        "state_lock": snap.state_lock,
        "kv_lru_age": snap.kv_age,
        "state_lru_age": snap.state_age,
        "lane": lay.lane,
        "children": lay.children,
        "label": list(snap.label),
    }


def _replay_steps(
    r: pr.ReplaySteps, step: int, layer: int, head: int, delta: bool
) -> dict[str, list | np.ndarray]:
    """The heatmap of one (step, layer, head) cell by cell, then the distance per position."""
    n = r.positions.size
    if n == 0:
        return {"position": [], "distance": []}
    S = pr.heatmap(r, step, layer, head, delta=delta)
    kk, vv = np.meshgrid(np.arange(S.shape[0]), np.arange(S.shape[1]), indexing="ij")
    return {
        "kind": ["state"] * S.size + ["distance"] * n,
        "key_channel_or_position": np.concatenate([kk.ravel(), r.positions]),
        "value_channel": np.concatenate([vv.ravel(), np.full(n, -1)]),
        "value": np.concatenate([S.ravel(), r.dist]),
        "step": [step] * (S.size + n),
    }


def _replay_pools(res: pr.ScenarioResult) -> dict[str, list]:
    """The cumulative pool counters after each request (``pr.POOL_COUNTERS`` + bytes, KV)."""
    out: dict[str, list] = {"request": list(range(1, len(res.requests) + 1))}
    for label, field in pr.POOL_COUNTERS:
        out[label] = [getattr(r.pools, field) for r in res.requests]
    out["checkpoint bytes"] = [r.pools.checkpoint_bytes for r in res.requests]
    out["evicted KV tokens"] = [r.pools.evicted_kv_tokens for r in res.requests]
    return out


def _replay_drift(d: pr.DriftStudy) -> dict[str, list | np.ndarray]:
    """Per generated token: each arm's max |logit - uncached logit| and the greedy tokens."""
    return {
        "token": np.arange(1, d.exact.size + 1),
        "exact": d.exact,
        "int8": d.int8,
        "inconsistent": d.inconsistent,
        "uncached_token": list(d.uncached_tokens),
        "inconsistent_token": list(d.inconsistent_tokens),
    }


def _batch_phases(v: bv.BatchView) -> dict[str, list]:
    """One row per (request, step): the request's phase in that step (``bv.PHASES`` names)."""
    n, steps = v.phase.shape
    return {
        "request": [i + 1 for i in range(n) for _ in range(steps)],
        "step": [s for _ in range(n) for s in range(steps)],
        "phase": [bv.PHASES[int(c)] for c in v.phase.ravel()],
    }


def _batch_pool(v: bv.BatchView) -> dict[str, np.ndarray]:
    """One row per step: running requests, tokens, the state pool's slots by kind."""
    return {
        "step": np.arange(v.n_steps),
        "running_requests": v.running,
        "prefill_tokens": v.prefill_tokens,
        "decode_tokens": v.decode_tokens,
        "slots_running": v.slots_running,
        "slots_cached": v.slots_cached,
        "slots_free": v.slots_free,
        "max_running": np.full(v.n_steps, v.max_running),
        "held_for_memory": v.held_for_memory + 1,  # the request's number (0: none)
        **buffer_columns(v.border, v.buffer_bytes),
    }


def _batch_index(v: bv.BatchView) -> dict[str, list]:
    """One row per (all-decode step, row of the captured shape): the real batch, the captured
    size, the request on the row (0: a padding row) and its state index (0: the sink)."""
    keys = ("step", "batch_size", "padded_size", "row", "request", "state_index")
    out: dict[str, list] = {k: [] for k in keys}
    if v.graph_padded is None or v.state_index is None or v.row_request is None:
        return out
    for s in np.flatnonzero(v.graph_padded):
        for row in range(int(v.graph_padded[s])):
            out["step"].append(int(s))
            out["batch_size"].append(int(v.graph_batch[s]))  # type: ignore[index]
            out["padded_size"].append(int(v.graph_padded[s]))
            out["row"].append(row)
            out["request"].append(int(v.row_request[s, row]) + 1)
            out["state_index"].append(int(v.state_index[s, row]))
    return out


def _plan_memory(p: pl.Plan) -> dict[str, np.ndarray]:
    """Memory vs context: one request's attention KV bytes against one state slot."""
    return {
        "context_tokens": p.context_lens,
        "kv_bytes": p.kv_bytes,
        "state_slot_bytes": p.state_bytes,
    }


def _plan_ratio(p: pl.Plan) -> dict[str, np.ndarray]:
    """Running requests vs ``--mamba-full-memory-ratio``: by state, by KV, the smaller."""
    return {
        "ratio": p.ratios,
        "running_by_state": p.running_by_state,
        "running_by_kv": p.running_by_kv,
        "max_running": p.max_running_by_ratio,
    }


def _plan_strategies(p: pl.Plan) -> dict[str, list | np.ndarray]:
    """The strategy table (-1 where a strategy is invalid)."""
    return {
        "strategy": list(p.strategy_names),
        "slots_reserved": p.strategy_reserved,
        "slots_held": p.strategy_held,
        "max_running_by_state": p.strategy_max_running,
    }


_BUILDERS: dict[str, Callable[..., dict]] = {
    "density_sweep": _density_sweep,
    "density_pareto": _density_pareto,
    "chunk_agreement": _chunk_agreement,
    "chunk_cost": _chunk_cost,
    "chunk_maps": _chunk_maps,
    "cp_state": _cp_state,
    "cp_bytes": _cp_bytes,
    "cp_speedup": _cp_speedup,
    "int8_error_map": _int8_error_map,
    "int8_capacity": _int8_capacity,
    "spec_ring": _spec_ring,
    "spec_memory": _spec_memory,
    "transfer_timeline": _transfer_timeline,
    "replay_timeline": _replay_timeline,
    "replay_tree": _replay_tree,
    "replay_steps": _replay_steps,
    "replay_pools": _replay_pools,
    "replay_drift": _replay_drift,
    "batch_phases": _batch_phases,
    "batch_pool": _batch_pool,
    "batch_index": _batch_index,
    "plan_memory": _plan_memory,
    "plan_ratio": _plan_ratio,
    "plan_strategies": _plan_strategies,
}


def columns(kind: str, *data: object) -> dict[str, list | np.ndarray]:
    """The CSV columns of one figure: ``kind`` names the builder (``_BUILDERS``), ``data`` is
    what it takes (``columns("cp_state", demo, rank)``); ValueError for a bad kind or data."""
    if kind not in _BUILDERS:
        raise ValueError(f"kind must be one of {tuple(_BUILDERS)}, got {kind!r}")
    try:  # name what is missing or extra, not a bare TypeError
        inspect.signature(_BUILDERS[kind]).bind(*data)
    except TypeError as e:
        raise ValueError(f"data: columns({kind!r}, ...): {e}") from None
    return _BUILDERS[kind](*data)
