"""Phases 1 and 3 of context parallelism on one rank (`cp` runs them in this process,
`cp_gloo` on real ranks): the local pass over the rank's pieces, with the open piece run on the
augmented state [b | M], and the finish once the scan has delivered the incoming state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kda_core.kda import chunkwise
from kda_core.kda._cp_scan import Element

# the open piece's augmented run goes in segments of this many tokens (see _open_piece)
_OPEN_SEGMENT = 1024
_FLUSH_BELOW = {np.dtype(np.float32): 2.0**-100, np.dtype(np.float64): 2.0**-900}


@dataclass(slots=True)
class LocalPass:
    """Phase 1 of one rank: outputs (final outside the open piece), the open piece's split."""

    o: np.ndarray  # [T_r, H, V]
    element: Element
    finals: dict[int, np.ndarray] = field(default_factory=dict)  # doc -> final state
    open_len: int = 0  # tokens of the open first piece (0: the segment starts a document)
    qM: np.ndarray | None = None  # [open_len, H, K] = scale M_t^T q_t
    open_map: Element | None = None  # the open piece's (M, b)
    open_doc: int = -1
    open_ends_doc: bool = False


def local_pass(q, k, v, g, beta, pieces, initial_states, *, scale, chunk_size) -> LocalPass:
    """Phase 1 on one rank's rows (arrays start at pieces[0].start). ``initial_states`` maps a
    document to its initial state for the pieces that start one."""
    s0 = pieces[0].start
    H, K, V = q.shape[1], q.shape[2], v.shape[2]
    o = np.empty(v.shape, np.result_type(q, v))
    lp = LocalPass(o=o, element=Element(None, np.zeros((H, K, V), o.dtype)))
    for p in pieces:
        t = slice(p.start - s0, p.stop - s0)
        args = (q[t], k[t], v[t], g[t], beta[t])
        if p.starts_doc:
            o[t], S = chunkwise._chunked(*args, initial_states[p.doc], scale, chunk_size)
            lp.element = Element(None, S)
            if p.ends_doc:
                lp.finals[p.doc] = S
            continue
        lp.open_len, lp.open_doc, lp.open_ends_doc = p.stop - p.start, p.doc, p.ends_doc
        lp.qM, lp.open_map = _open_piece(args, o[t], scale, chunk_size)
        lp.element = lp.open_map
    return lp


def _flush(x: np.ndarray) -> np.ndarray:
    """Zero entries below FLUSH_BELOW (in place): subnormal floats make every later multiply
    ~10x slower, and entries this small change nothing (|x| * |S_in| is ~1e-30 below the
    outputs' scale in float32, ~1e-290 in float64)."""
    x[np.abs(x) < _FLUSH_BELOW[x.dtype]] = 0
    return x


def _open_piece(args, o: np.ndarray, scale: float, chunk_size: int):
    """The augmented run [b | M] from [0 | I] on an open piece (values [v | 0]), writing its
    zero-state outputs into ``o``; -> (qM [n, H, K], its map).

    Run in segments of OPEN_SEGMENT tokens with M and qM flushed between them (long decays
    drive them through the subnormal range). Once M is all zero the state has forgotten the
    incoming one: the rest is a plain run from b, and its qM rows are zero."""
    q, k, v, g, beta = args
    n, H, K = q.shape
    V = v.shape[2]
    X = np.zeros((H, K, V + K), o.dtype)
    X[:, :, V:] = np.eye(K)
    qM = np.zeros((n, H, K), o.dtype)
    step = max(chunk_size, _OPEN_SEGMENT // chunk_size * chunk_size)
    for a in range(0, n, step):
        t = slice(a, min(n, a + step))
        if not X[:, :, V:].any():  # forgotten: M = 0 from here on
            rows = (q[t], k[t], v[t], g[t], beta[t])
            o[t], X[:, :, :V] = chunkwise._chunked(*rows, X[:, :, :V], scale, chunk_size)
            continue
        v_aug = np.concatenate([v[t], np.zeros((t.stop - a, H, K), v.dtype)], axis=2)
        o_aug, X = chunkwise._chunked(q[t], k[t], v_aug, g[t], beta[t], X, scale, chunk_size)
        o[t] = o_aug[:, :, :V]
        qM[t] = _flush(o_aug[:, :, V:])
        _flush(X[:, :, V:])
    return qM, Element(np.ascontiguousarray(X[:, :, V:]), np.ascontiguousarray(X[:, :, :V]))


def finish(lp: LocalPass, S_in: np.ndarray | None) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Phase 3: the open piece's outputs += qM S_in; its end state if it ends a document."""
    finals = dict(lp.finals)
    if lp.open_len:
        if S_in is None:
            raise ValueError("S_in is needed: this rank's segment starts inside a document")
        qM = np.swapaxes(lp.qM, 0, 1)  # [H, n, K]
        lp.o[: lp.open_len] += np.swapaxes(np.matmul(qM, S_in), 0, 1)
        if lp.open_ends_doc:
            finals[lp.open_doc] = lp.open_map.apply(S_in)
    return lp.o, finals
