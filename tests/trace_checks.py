"""Test oracles for workload traces: ``validate`` (every invariant docs/workloads.md lists, one
id at a time; ``check_chain`` is the naive twin of the loaders' bulk chain check) and
``trace_stats`` (summary numbers the tests compare against the simulator and the generators).
A plain module, shared by the test modules."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kda_core.workloads import Trace, ideal_prefix_tokens
from kda_core.workloads._caps import MAX_SKIP_REASONS
from kda_core.workloads._messages import chain_conflict


def validate(trace: Trace) -> None:
    """Check every invariant of a Trace (docs/workloads.md); ``ValueError`` naming the first
    failure."""
    n = len(trace)
    if trace.block_size < 1:
        raise ValueError(f"trace.block_size must be >= 1, got {trace.block_size}")
    for field in ("arrival_s", "output_len", "session", "kind"):
        if getattr(trace, field).shape != (n,):
            raise ValueError(f"trace.{field} must have shape [{n}]")
    if trace.offsets.shape != (n + 1,) or trace.offsets[0] != 0:
        raise ValueError(f"trace.offsets must have shape [{n + 1}] and start at 0")
    if trace.offsets[-1] != trace.blocks.shape[0]:
        raise ValueError("trace.offsets[-1] must equal len(trace.blocks)")
    a = trace.arrival_s
    if n and (not np.all(np.isfinite(a)) or a[0] < 0 or np.any(np.diff(a) < 0)):
        raise ValueError("trace.arrival_s must be finite, >= 0 and non-decreasing")
    if n and (trace.input_len.min() < 1 or trace.output_len.min() < 0):
        raise ValueError("trace.input_len must be >= 1 and trace.output_len >= 0")
    want = -(-trace.input_len // trace.block_size)
    if not np.array_equal(np.diff(trace.offsets), want):
        raise ValueError("trace block counts must equal ceil(input_len / block_size)")
    if n and (trace.kind.min() < 0 or trace.kind.max() >= len(trace.kind_names)):
        raise ValueError("trace.kind must index trace.kind_names")
    if trace.skipped_rows < 0 or len(trace.skip_reasons) > min(
        trace.skipped_rows, MAX_SKIP_REASONS
    ):
        raise ValueError("trace.skipped_rows must be >= 0 and cover skip_reasons (at most 5)")
    has_out = trace.out_offsets is not None and trace.out_blocks is not None
    if has_out:
        oo = trace.out_offsets
        if oo.shape != (n + 1,) or oo[0] != 0 or oo[-1] != len(trace.out_blocks):
            raise ValueError(f"trace.out_offsets must have shape [{n + 1}] and cover out_blocks")
        b = trace.block_size
        room = (trace.input_len + trace.output_len) // b - trace.input_len // b
        if np.any(np.diff(oo) > room) or np.any(np.diff(oo) < 0):
            raise ValueError("trace output block counts must be <= floor((in+out)/b) - floor(in/b)")
    parent: dict[int, int] = {}
    blocks = trace.blocks.tolist()
    offs = trace.offsets.tolist()
    outs = trace.out_blocks.tolist() if has_out else []
    ooffs = trace.out_offsets.tolist() if has_out else []
    for i in range(n):
        ids = blocks[offs[i] : offs[i + 1]]
        check_chain(parent, ids, -1, f"request {i}: block ids")
        if has_out:
            n_full = int(trace.input_len[i]) // trace.block_size
            prev = ids[n_full - 1] if n_full else -1
            check_chain(
                parent, outs[ooffs[i] : ooffs[i + 1]], prev, f"request {i}: output block ids"
            )


def check_chain(parent: dict[int, int], ids: list[int], prev: int, what: str) -> None:
    """Record each id's parent (``prev`` for the first); ValueError when an id seen before had
    another parent. ``what`` starts the message (e.g. "request 3: block id")."""
    for h in ids:
        p = parent.setdefault(h, prev)
        if p != prev:
            raise ValueError(chain_conflict(h, prev, p, what))
        prev = h


class TraceStats(NamedTuple):
    n_requests: int
    duration_s: float
    total_input_tokens: int
    mean_input: float
    median_input: float
    p99_input: float
    max_input: int
    mean_output: float
    distinct_blocks: int
    ideal_token_hit_rate: float


def trace_stats(trace: Trace) -> TraceStats:
    """Summary numbers of a trace (lengths in tokens). Without prefix information the ideal
    token hit rate is NaN (it cannot be computed) and every block is distinct."""
    if len(trace) == 0:
        raise ValueError("trace must have at least one request")
    lens = trace.input_len
    ideal = ideal_prefix_tokens(trace) if trace.has_prefix_info else np.full(1, np.nan)
    return TraceStats(
        n_requests=len(trace),
        duration_s=float(trace.arrival_s[-1] - trace.arrival_s[0]),
        total_input_tokens=int(lens.sum()),
        mean_input=float(lens.mean()),
        median_input=float(np.median(lens)),
        p99_input=float(np.percentile(lens, 99)),
        max_input=int(lens.max()),
        mean_output=float(trace.output_len.mean()),
        distinct_blocks=int(np.unique(trace.blocks).shape[0]),
        ideal_token_hit_rate=float(ideal.sum() / lens.sum()),
    )
