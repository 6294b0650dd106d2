"""tree_layout.layout: lanes, branch points and edges of a radix-tree drawing."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.studies import prefix_replay as pr
from kda_core.studies.tree_layout import layout


def _edges(lay) -> list[list[tuple[float, float]]]:
    out, cur = [], []
    for a, b in zip(lay.edge_x, lay.edge_y):
        if a is None:
            out.append(cur)
            cur = []
        else:
            cur.append((a, b))
    return out


def test_chain_is_one_lane_and_branches_open_new_lanes():
    # root(0) -> a(32) -> {b(64) -> d(96), c(80)}; e(40) under root
    ids = np.array([0, 1, 2, 4, 3, 5])
    parent = np.array([-1, 0, 1, 2, 1, 0])
    end = np.array([0, 32, 64, 96, 80, 40])
    lay = layout(ids, parent, end)
    assert lay.lane.tolist() == [0, 0, 0, 0, 1, 2]
    assert lay.n_lanes == 3  # = leaves d, c, e
    assert lay.branch.tolist() == [True, True, False, False, False, False]
    assert lay.x.tolist() == [0, 32, 64, 96, 80, 40]
    edges = _edges(lay)
    assert len(edges) == 5
    # the edge into c leaves the branch point a at x=32, drops to lane 1, runs right to 80
    assert edges[3] == [(32.0, 0.0), (32.0, 1.0), (80.0, 1.0)]


def test_lanes_equal_leaves_and_subtrees_are_contiguous_on_a_real_tree():
    """Independent checks on a session's real tree: lanes = leaves; each subtree's lanes form
    one contiguous block (so edges of different subtrees never cross); x grows along edges."""
    res = pr.serve("system_tools_branches").result()
    snap = res.requests[-1].tree_after
    lay = layout(snap.node_id, snap.parent, snap.end)
    leaves = int(snap.is_leaf.sum())
    assert lay.n_lanes == leaves
    index = {int(v): i for i, v in enumerate(snap.node_id)}
    kids: dict[int, list[int]] = {}
    for i in range(1, snap.node_id.size):
        kids.setdefault(index[int(snap.parent[i])], []).append(i)

    def lanes(i: int) -> set[int]:
        s = {int(lay.lane[i])}
        for k in kids.get(i, []):
            s |= lanes(k)
        return s

    for i in range(snap.node_id.size):
        s = lanes(i)
        assert s == set(range(min(s), max(s) + 1)), f"subtree of node {i} lanes {sorted(s)}"
        for k in kids.get(i, []):
            assert lay.x[k] >= lay.x[i]
    assert lay.branch.sum() == sum(len(v) >= 2 for v in kids.values()) >= 1


def test_fifty_node_tree_stays_compact():
    # a comb: a spine of 25 nodes, each with one leaf hanging off -> 26 leaves, 26 lanes
    ids, parent, end = [0], [-1], [0]
    for k in range(1, 26):
        ids.append(2 * k - 1)
        parent.append(0 if k == 1 else 2 * k - 3)
        end.append(10 * k)
        ids.append(2 * k)
        parent.append(2 * k - 1)
        end.append(10 * k + 5)
    # DFS order: spine node, its leaf child first? Put the spine child first, the leaf after.
    lay = layout(np.array(ids), np.array(parent), np.array(end))
    assert len(ids) == 51
    assert lay.n_lanes == int((lay.children == 0).sum())


@pytest.mark.parametrize(
    ("ids", "parent", "end", "msg"),
    [
        ([0, 1], [-1, -1], [0, 1], "only root"),
        ([0, 1, 2], [-1, 2, 0], [0, 5, 3], "appear before"),
        ([0, 1], [-1, 0], [5, 3], "ends before"),
        ([0, 0], [-1, 0], [0, 3], "unique"),
        ([0, 1], [-1], [0, 3], "one length"),
    ],
)
def test_rejects_bad_input(ids, parent, end, msg):
    with pytest.raises(ValueError, match=msg):
        layout(np.array(ids), np.array(parent), np.array(end))
