"""The CSV rows behind the prefix_replay app's figures (columns of equal length).

Each function takes the study's views and returns ``{column: values}``; the app writes them
with ``common.write_csv`` next to the figure. Left out: any formatting (the app's job).
"""

from __future__ import annotations

import numpy as np

from kda_core.studies import tree_layout
from kda_core.studies.prefix_replay._views import (
    DriftStudy,
    ReplaySteps,
    ScenarioResult,
    TreeSnapshot,
    heatmap,
)

Table = dict[str, list | np.ndarray]


def timeline_table(res: ScenarioResult) -> Table:
    """One row per timeline segment (request 1-based, phase, [start, end)), then one per
    checkpoint parked (phase "checkpoint", start = end = its position)."""
    out: Table = {"request": [], "phase": [], "start": [], "end": []}
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
            out[k].append(v)  # type: ignore[union-attr]
    return out


def tree_table(snap: TreeSnapshot) -> Table:
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


def replay_table(replay_steps: ReplaySteps, step: int, layer: int, head: int, delta: bool) -> Table:
    """The heatmap of one (step, layer, head) cell by cell, then the distance per position."""
    n = replay_steps.positions.size
    if n == 0:
        return {"position": [], "distance": []}
    S = heatmap(replay_steps, step, layer, head, delta=delta)
    kk, vv = np.meshgrid(np.arange(S.shape[0]), np.arange(S.shape[1]), indexing="ij")
    return {
        "kind": ["state"] * S.size + ["distance"] * n,
        "key_channel_or_position": np.concatenate([kk.ravel(), replay_steps.positions]),
        "value_channel": np.concatenate([vv.ravel(), np.full(n, -1)]),
        "value": np.concatenate([S.ravel(), replay_steps.dist]),
        "step": [step] * (S.size + n),
    }


POOL_COUNTERS: tuple[tuple[str, str], ...] = (
    ("checkpoint slots used", "checkpoint_used"),
    ("COW copies (restores)", "copies"),
    ("donations (track slot -> pool)", "donations"),
    ("evicted states", "evicted_states"),
)


def pools_table(res: ScenarioResult) -> Table:
    """The cumulative pool counters after each request (``POOL_COUNTERS`` + bytes, KV)."""
    out: Table = {"request": list(range(1, len(res.requests) + 1))}
    for label, field in POOL_COUNTERS:
        out[label] = [getattr(r.pools, field) for r in res.requests]
    out["checkpoint bytes"] = [r.pools.checkpoint_bytes for r in res.requests]
    out["evicted KV tokens"] = [r.pools.evicted_kv_tokens for r in res.requests]
    return out


def drift_table(d: DriftStudy) -> Table:
    """Per generated token: each arm's max |logit - uncached logit| and the greedy tokens."""
    return {
        "token": np.arange(1, d.exact.size + 1),
        "exact": d.exact,
        "int8": d.int8,
        "inconsistent": d.inconsistent,
        "uncached_token": list(d.uncached_tokens),
        "inconsistent_token": list(d.inconsistent_tokens),
    }
