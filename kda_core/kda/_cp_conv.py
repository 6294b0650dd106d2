"""The short-conv window across context-parallel ranks: each rank needs the W-1 raw rows before
its segment (a halo from its predecessor), except where a document starts: there the window
resets to zeros, so no row of one packed document reaches another's conv. In process here;
`cp_gloo.GlooGroup.run_conv` runs the same `conv_pieces` on real ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core._checks import check_int
from kda_core.kda import conv
from kda_core.kda._cp_plan import MAX_RANKS, make_plan


def halo_windows(x: np.ndarray, bounds: Sequence[int], window: np.ndarray) -> list[np.ndarray]:
    """Each rank's incoming conv window: the last W-1 raw rows before its segment (rank 0: the
    given window). A segment shorter than W-1 passes on part of the window it received."""
    out = [window]
    for r in range(1, len(bounds) - 1):
        full = np.concatenate([out[-1], x[bounds[r - 1] : bounds[r]]], axis=0)
        out.append(full[full.shape[0] - window.shape[0] :])
    return out


def short_conv_cp(
    x, w, *, ranks, window=None, activation="silu", chunk_size=64, first_weight=1.0, group=None
):
    """`conv.short_conv` with x [T, D] split over ``ranks`` at `split_points` (pass the
    ``first_weight`` the KDA layer's split used): each rank convolves its rows after receiving
    the previous W-1 rows (``group``: on real gloo ranks). Returns (y [T, D], new_window)."""
    y, windows = short_conv_cp_varlen(
        x,
        w,
        ranks=ranks,
        window=window,
        activation=activation,
        chunk_size=chunk_size,
        first_weight=first_weight,
        group=group,
    )
    return y, windows[0]


def short_conv_cp_varlen(
    x,
    w,
    *,
    ranks,
    cu_seqlens=None,
    window=None,
    activation="silu",
    chunk_size=64,
    first_weight=1.0,
    group=None,
):
    """`short_conv_cp` over packed documents (``cu_seqlens``, as `context_parallel_varlen`):
    the window resets at every document start, so no row of one document reaches another's
    conv. ``window`` [W-1, D] is the first document's incoming window; every other document
    starts from zeros. A rank receives its predecessor's window only when its segment starts
    inside a document (that window began at the document's start, zero padded). Returns
    (y [T, D], each document's final window [N_docs, W-1, D])."""
    x, w, window = conv._check(x, w, window, activation)
    T = x.shape[0]
    ranks = check_int("ranks", ranks, 1, MAX_RANKS)
    if not 1 <= ranks <= T:
        raise ValueError(f"ranks must be in [1, T={T}], got {ranks}")
    plan = make_plan(T, ranks, cu_seqlens, chunk_size, first_weight)
    if group is not None:
        if group.ranks != ranks:
            raise ValueError(f"group has {group.ranks} ranks, but ranks={ranks}")
        res = group.run_conv(x, w, window, activation, plan)
        ys, finals = [r["y"] for r in res], {d: f for r in res for d, f in r["finals"].items()}
    else:
        ys, finals, halo = [], {}, window
        for pieces in plan.pieces:
            rows = x[pieces[0].start : pieces[-1].stop]
            y, halo, f = conv_pieces(rows, w, pieces, halo, window, activation)
            ys.append(y)
            finals.update(f)
    return np.concatenate(ys, axis=0), np.stack([finals[d] for d in range(len(finals))])


def conv_pieces(x, w, pieces, halo, first_window, activation):
    """One rank's conv over its rows x (from pieces[0].start): a piece that starts a document
    starts from zeros (document 0 from ``first_window``), the open first piece from ``halo``
    (the predecessor's outgoing window). -> (y, outgoing window, {doc: final window})."""
    s0 = pieces[0].start
    ys, finals, win = [], {}, halo
    for p in pieces:
        if p.starts_doc:
            win = first_window if p.start == 0 else np.zeros_like(first_window)
        y, win = conv.short_conv(x[p.start - s0 : p.stop - s0], w, win, activation)
        ys.append(y)
        if p.ends_doc:
            finals[p.doc] = win
    return np.concatenate(ys, axis=0), win, finals
