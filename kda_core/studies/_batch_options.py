"""The batch view's engine options, per scheduler step (``batch_view`` packages them).

``option_fields``: one byte buffer's size and border per step (``StepRow.border``), and the
fixed-shape decode's index table (``StepRow.graph``: real batch, captured size, the state index
and request of each row). ``buffer_columns``: the buffer's bytes per step for the pool table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kda_core.serve.engine import Engine
from kda_core.serve.report import StepRow

__all__ = ["buffer_columns", "graph_arrays", "option_fields"]


def graph_arrays(rows: Sequence[StepRow]) -> dict[str, np.ndarray]:
    """Per step: real batch, captured size (0: eager), the state index and request per row."""
    width = max([r.graph.padded_size for r in rows if r.graph is not None], default=0)
    batch = np.zeros(len(rows), np.int64)
    padded = np.zeros(len(rows), np.int64)
    index = np.full((len(rows), width), -1, np.int64)
    request = np.full((len(rows), width), -1, np.int64)
    for s, row in enumerate(rows):
        g = row.graph
        if g is None:
            continue
        batch[s], padded[s] = g.batch_size, g.padded_size
        index[s, : g.padded_size] = g.state_index
        request[s, : g.batch_size] = row.running[: g.batch_size]  # decodes first, in row order
    return {
        "graph_batch": batch,
        "graph_padded": padded,
        "state_index": index,
        "row_request": request,
    }


def option_fields(e: Engine, rows: Sequence[StepRow]) -> dict[str, Any]:
    """The BatchView fields of the two engine options (none when they are off)."""
    out: dict[str, Any] = {}
    u = e.pools.unified
    if u is not None:
        out["buffer_bytes"], out["slot_bytes"] = u.total, u.slot_bytes
        out["kv_token_bytes"] = u.kv_token_bytes
        out["border"] = np.array([r.border for r in rows], np.int64).reshape(-1, 2)
    if e.graph_bs is not None:
        out.update(graph_bs=e.graph_bs, **graph_arrays(rows))
    return out


def buffer_columns(border: np.ndarray | None, total: int | None) -> dict[str, np.ndarray]:
    """One byte buffer's bytes per step: states from 0 up, the free gap, KV from the top."""
    if border is None or total is None:
        return {}
    state_end, kv_start = border[:, 0], border[:, 1]
    return {
        "state_bytes": state_end,
        "free_bytes": kv_start - state_end,
        "kv_bytes": total - kv_start,
        "buffer_bytes": np.full(len(border), total),
    }
