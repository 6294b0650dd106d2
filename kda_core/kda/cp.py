"""Context parallelism for KDA: one long sequence (or packed documents) split over P ranks,
joined by an affine scan. KDA states of different segments do not add (unlike MLA's KV); what
composes is a segment's map S_end = M S_start + b.

1. Local pass: rank r runs `kda.chunked` once on the augmented state [b | M] (values [v | 0]
   from [0 | I]); its outputs split as o_t = o0_t + S_in^T (scale M_t^T q_t).
2. Scan (`cp_scan`): an exclusive prefix over the ranks' maps gives each its incoming state.
3. Finish: o += qM S_in on the open piece; the last rank's M S_in + b is the final state.

``group=cp_gloo.GlooGroup(P)`` runs the ranks on real processes (torch.distributed, gloo);
without it they run in this process with the same plan, schedule and messages. This module
also re-exports the plan, scan and conv-halo names (the CP API in one place). Left out:
overlapping the scan with the local pass, grouped value heads, bf16 messages. Derivation,
costs and sources: docs/context_parallel.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kda_core.kda import _inputs, chunkwise
from kda_core.kda.cp_conv import conv_pieces, halo_windows, short_conv_cp, short_conv_cp_varlen
from kda_core.kda.cp_plan import (
    MAX_DOCS,
    MAX_RANKS,
    Piece,
    Plan,
    balance_weight,
    make_plan,
    split_points,
)
from kda_core.kda.cp_scan import (
    Element,
    Message,
    ScanLog,
    allgather_schedule,
    bytes_sent,
    combine,
    logdepth_schedule,
    message_bytes,
    scan_in_process,
    sequential_states,
)

__all__ = [
    "MAX_DOCS",
    "MAX_RANKS",
    "SCANS",
    "Element",
    "LocalPass",
    "Message",
    "Piece",
    "Plan",
    "ScanLog",
    "allgather_schedule",
    "balance_weight",
    "bytes_sent",
    "combine",
    "context_parallel",
    "context_parallel_varlen",
    "conv_pieces",
    "finish",
    "halo_windows",
    "local_pass",
    "logdepth_schedule",
    "make_plan",
    "message_bytes",
    "run_in_process",
    "scan_in_process",
    "sequential_states",
    "short_conv_cp",
    "short_conv_cp_varlen",
    "split_points",
]

SCANS = ("allgather", "logdepth")
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


def _check_initial_states(initial_states, n_docs: int, H: int, K: int, V: int, dtype) -> np.ndarray:
    if initial_states is None:
        return np.zeros((n_docs, H, K, V), dtype)
    S = np.asarray(initial_states)
    if S.shape != (n_docs, H, K, V):
        raise ValueError(
            f"initial_states must have shape [N_docs, H, K, V] = {(n_docs, H, K, V)}, got {S.shape}"
        )
    return np.stack([_inputs.check_float("initial_states", s, np.dtype(dtype)) for s in S])


def context_parallel_varlen(
    q,
    k,
    v,
    g,
    beta,
    *,
    ranks,
    cu_seqlens=None,
    initial_states=None,
    scan="logdepth",
    scale=None,
    chunk_size=64,
    group=None,
    balance=True,
):
    """Packed documents split over ``ranks``: -> (o [T, H, V], final states [N_docs, H, K, V]),
    equal to `kda.chunked` per document. ``group`` (a cp_gloo.GlooGroup of ``ranks`` processes)
    runs the ranks for real; without it they run in this process. ``balance``: rank 0 (plain
    pass) gets `balance_weight` times the others' share; False: equal shares."""
    q, k, v, g, beta, _, scale = _inputs.validate(q, k, v, g, beta, None, scale)
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    T, H, K = q.shape
    V = v.shape[2]
    C = _inputs.check_chunk_size(chunk_size)
    weight = balance_weight(T, H, K, V, C) if balance and cu_seqlens is None else 1.0
    plan = make_plan(T, ranks, cu_seqlens, C, weight)
    S0 = _check_initial_states(initial_states, len(plan.cu_seqlens) - 1, H, K, V, q.dtype)
    if group is not None:
        if group.ranks != plan.ranks:
            raise ValueError(f"group has {group.ranks} ranks, but ranks={plan.ranks}")
        results = group.run_plan(plan, (q, k, v, g, beta), S0, scan, scale, chunk_size)
        o = np.concatenate([r["o"] for r in results], axis=0)
        finals = {d: s for r in results for d, s in r["finals"].items()}
    else:
        o, finals, _ = run_in_process(plan, (q, k, v, g, beta), S0, scan, scale, chunk_size)
    return o, np.stack([finals[d] for d in range(len(plan.cu_seqlens) - 1)])


def run_in_process(plan: Plan, inputs, S0: np.ndarray, scan: str, scale: float, chunk_size: int):
    """All ranks of ``plan`` in this process -> (o, finals, (local passes, ScanLog))."""
    H, K, V = S0.shape[1:]
    passes = []
    for r in range(plan.ranks):
        t = slice(plan.bounds[r], plan.bounds[r + 1])
        rows = [x[t] for x in inputs]
        passes.append(local_pass(*rows, plan.pieces[r], S0, scale=scale, chunk_size=chunk_size))
    scan_log = scan_in_process([lp.element for lp in passes], scan, H, K, V)
    o_parts, finals = [], {}
    for lp, S_in in zip(passes, scan_log.S_in):
        o_r, f_r = finish(lp, S_in)
        o_parts.append(o_r)
        finals.update(f_r)
    return np.concatenate(o_parts, axis=0), finals, (passes, scan_log)


def context_parallel(
    q,
    k,
    v,
    g,
    beta,
    *,
    ranks,
    scan="allgather",
    initial_state=None,
    scale=None,
    chunk_size=64,
    group=None,
    balance=True,
):
    """One sequence over ``ranks`` ranks -> (o [T, H, V], S [H, K, V]), equal to `kda.chunked`.

    ``ranks=1`` is a plain `kda.chunked` call (no torch). Without ``group`` the ranks run in
    this process (numpy); ``group=cp_gloo.GlooGroup(ranks)`` runs them on real processes."""
    S0 = None if initial_state is None else np.asarray(initial_state)[None]
    o, S = context_parallel_varlen(
        q,
        k,
        v,
        g,
        beta,
        ranks=ranks,
        initial_states=S0,
        scan=scan,
        scale=scale,
        chunk_size=chunk_size,
        group=group,
        balance=balance,
    )
    return o, S[0]
