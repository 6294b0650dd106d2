"""Context parallelism for KDA: one long sequence (or packed documents) split over P ranks,
joined by an affine scan. KDA states of different segments do not add (unlike MLA's KV); what
composes is a segment's map S_end = M S_start + b.

1. Local pass: rank r runs `kda.chunked` once on the augmented state [b | M] (values [v | 0]
   from [0 | I]); its outputs split as o_t = o0_t + S_in^T (scale M_t^T q_t).
2. Scan (`_cp_scan`): an exclusive prefix over the ranks' maps gives each its incoming state.
3. Finish: o += qM S_in on the open piece; the last rank's M S_in + b is the final state.
Phases 1 and 3 are `_cp_rank`; where the ranks cut, `_cp_plan`; the conv halo, `_cp_conv`.

``group=cp_gloo.GlooGroup(P)`` runs the ranks on real processes (torch.distributed, gloo);
without it they run in this process with the same plan, schedule and messages. This module
exports the plan, scan and conv-halo names callers use (the CP API in one place). Left out:
overlapping the scan with the local pass, grouped value heads, bf16 messages. Derivation,
costs and sources: docs/context_parallel.md.
"""

from __future__ import annotations

import numpy as np

from kda_core.kda import _inputs
from kda_core.kda._cp_conv import short_conv_cp, short_conv_cp_varlen
from kda_core.kda._cp_plan import Plan, balance_weight, make_plan, split_points
from kda_core.kda._cp_rank import finish, local_pass
from kda_core.kda._cp_scan import (
    Element,
    Message,
    allgather_schedule,
    bytes_sent,
    combine,
    logdepth_schedule,
    message_bytes,
    scan_in_process,
)

__all__ = [
    "SCANS",
    "Element",
    "Message",
    "allgather_schedule",
    "balance_weight",
    "bytes_sent",
    "combine",
    "context_parallel",
    "context_parallel_varlen",
    "logdepth_schedule",
    "make_plan",
    "message_bytes",
    "run_in_process",
    "short_conv_cp",
    "short_conv_cp_varlen",
    "split_points",
]

SCANS = ("logdepth", "allgather")  # the apps and figures show them in this order


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
