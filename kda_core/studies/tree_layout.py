"""A drawing layout for a radix tree: each node a point, each edge an elbow, x in tokens.

``layout(node_id, parent, end)`` places node ``i`` at ``x = end[i]`` (the token position where
its span ends, so a branch point sits exactly where the prompts diverge) on an integer lane
``y``. Lanes are assigned in DFS order: a node's first child continues on its parent's lane (a
shared prefix is one straight line), every further child opens the next free lane below all
lanes used so far. Every subtree therefore occupies a contiguous block of lanes, no two edges
cross, and the number of lanes equals the number of leaves (a 50-node tree of 12 leaves needs
12 lanes, whatever its depth).

The edge into a child goes from the parent point straight down to the child's lane and then
right to the child (``edge_x`` / ``edge_y`` are plotly-ready polylines separated by ``None``).
``branch[i]``: node ``i`` has two or more children. The input is in DFS order with the root
first (``RadixStateCache.export()`` order, ``prefix_replay.TreeSnapshot``); ``layout`` checks
it and raises ``ValueError`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, frozen=True)
class TreeLayout:
    x: np.ndarray  # [n] float: token position of the node's end
    lane: np.ndarray  # [n] int: 0 = the root's lane
    children: np.ndarray  # [n] int
    branch: np.ndarray  # [n] bool: two or more children
    edge_x: tuple[float | None, ...]  # polylines parent -> child, None-separated
    edge_y: tuple[float | None, ...]
    n_lanes: int


def layout(node_id: np.ndarray, parent: np.ndarray, end: np.ndarray) -> TreeLayout:
    ids = np.asarray(node_id, dtype=np.int64)
    par = np.asarray(parent, dtype=np.int64)
    x = np.asarray(end, dtype=np.float64)
    n = ids.size
    if not (par.size == n and x.size == n):
        raise ValueError(
            f"node_id, parent, end must have one length, got {n}, {par.size}, {x.size}"
        )
    if n == 0:
        empty: tuple[float | None, ...] = ()
        z = np.zeros(0, dtype=np.int64)
        return TreeLayout(x, z, z, z.astype(bool), empty, empty, 0)
    if par[0] >= 0 or (par[1:] < 0).any():
        raise ValueError("parent: the root (parent < 0) must come first and be the only root")
    index = {int(v): i for i, v in enumerate(ids)}
    if len(index) != n:
        raise ValueError("node_id must be unique")
    lane = np.zeros(n, dtype=np.int64)
    children = np.zeros(n, dtype=np.int64)
    next_lane = 0
    ex: list[float | None] = []
    ey: list[float | None] = []
    for i in range(1, n):
        p = index.get(int(par[i]))
        if p is None or p >= i:
            raise ValueError(f"parent of node {int(ids[i])} must appear before it (DFS order)")
        if x[i] < x[p]:
            raise ValueError(f"node {int(ids[i])} ends before its parent (end must grow)")
        if children[p] == 0:
            lane[i] = lane[p]
        else:
            next_lane += 1
            lane[i] = next_lane
        children[p] += 1
        ex += [float(x[p]), float(x[p]), float(x[i]), None]
        ey += [float(lane[p]), float(lane[i]), float(lane[i]), None]
    return TreeLayout(x, lane, children, children >= 2, tuple(ex), tuple(ey), next_lane + 1)


__all__ = ["TreeLayout", "layout"]
