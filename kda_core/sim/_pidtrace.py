"""A trace's block ids as prefix ids: the static trie the fast pass walks.

A valid trace obeys the chain rule (``workloads.traces``: an id always follows the same parent
id, so two requests share id ``h`` at position ``j`` iff their inputs agree up to block ``j``).
Then an id names its whole prefix: the radix tree the naive pass builds over id sequences is a
compressed subtree of one static trie whose nodes are the ids. ``prepare`` numbers the ids
densely (``pid``), lays out every request's lookup row (its input blocks) and, for a synthetic
trace with output blocks, its insert row (full input blocks + output blocks) in one flat int32
array, and records per pid its first position there (``loc``: the row holding it holds its whole
prefix just before it) and its depth in blocks (``dep``). Everything is numpy (one pass, no
Python loop over blocks) and picklable, so a sweep prepares a trace once and ships it to its
workers once. A trace that breaks the chain rule (or has negative ids) is marked ``chained =
False``: the fast pass refuses it and ``simulate`` runs the naive twin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.workloads import Trace

_DENSE_SLACK = 1 << 20  # ids are used as pids while max id < 4 x blocks + this


@dataclass(frozen=True, slots=True, eq=False)
class PreparedTrace:
    """A trace's rows as prefix ids (module docstring). ``look_start[i]:look_end[i]`` and
    ``ins_start[i]:ins_end[i]`` index ``flat`` (the lookup row and the insert row of request
    ``i``; equal without output blocks); ``total_len[i]`` is the length the policy plans to
    (-1: the input length); ``n_pids`` the number of prefix ids."""

    trace: Trace
    outputs: bool
    chained: bool
    n_pids: int
    flat: np.ndarray  # int32 pids, all rows
    look_start: np.ndarray  # int64 [N]
    look_end: np.ndarray
    ins_start: np.ndarray
    ins_end: np.ndarray
    total_len: np.ndarray  # int64 [N], -1 = input length
    loc: np.ndarray  # int32 [n_pids]: first index of the pid in flat
    dep: np.ndarray  # int32 [n_pids]: depth in blocks (1 = a first block)


def _insert_rows(trace: Trace, outputs: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Output rows (full input blocks + output blocks) of the requests that have output blocks:
    (flat ids, row lengths [N] with 0 where a request has none, total length [N] or -1)."""
    n = len(trace)
    oo, ob = trace.out_offsets, trace.out_blocks
    if not outputs or oo is None or ob is None:
        return np.zeros(0, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    n_out = np.diff(oo)
    has = n_out > 0
    nfull = trace.input_len // trace.block_size
    lens = np.where(has, nfull + n_out, 0)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])) if n else np.zeros(0, np.int64)
    out = np.empty(int(lens.sum()), dtype=np.int64)
    for i in np.flatnonzero(has).tolist():  # only synthetic traces have outputs: small
        a, f = int(starts[i]), int(nfull[i])
        o0 = int(trace.offsets[i])
        out[a : a + f] = trace.blocks[o0 : o0 + f]
        out[a + f : a + int(lens[i])] = ob[int(oo[i]) : int(oo[i + 1])]
    total = np.where(has, lens * trace.block_size, -1)
    return out, lens, total


def _pids(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense int32 pids of ``ids`` (the ids themselves while dense) and their count."""
    if not ids.size:
        return np.zeros(0, np.int32), 0
    top = int(ids.max())
    if top < 4 * ids.size + _DENSE_SLACK:
        return ids.astype(np.int32), top + 1
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.astype(np.int32), int(uniq.size)


def _first_mask(pid: np.ndarray) -> np.ndarray:
    """True at the first occurrence of each pid in ``pid``."""
    if pid.size:  # ids numbered as first seen (0, 1, 2, ...): a new id is a new maximum
        top = np.maximum.accumulate(pid)
        mask = np.empty(pid.size, dtype=bool)
        mask[0] = True
        np.greater(pid[1:], top[:-1], out=mask[1:])
        if np.array_equal(pid[mask], np.arange(int(mask.sum()), dtype=pid.dtype)):
            return mask
    first = np.full(int(pid.max()) + 1 if pid.size else 0, pid.size, dtype=np.int32)
    idx = np.arange(pid.size - 1, -1, -1, dtype=np.int32)
    first[pid[::-1]] = idx  # the last write is the first occurrence (checked below)
    if not np.all(first[pid] <= idx[::-1]):
        first[:] = pid.size
        np.minimum.at(first, pid, idx[::-1])
    mask = np.zeros(pid.size, dtype=bool)
    mask[first[first < pid.size]] = True
    return mask


def _first_seen_order(pid: np.ndarray, n_pids: int) -> tuple[np.ndarray, int, np.ndarray]:
    """Renumber pids in the order they first appear: along every row pids then strictly
    increase (an ancestor is first seen before its descendants), so a run of ``n`` new blocks
    is a run of ``n`` consecutive pids and the tree marks it with one slice. -> (pids, count,
    the first index of each)."""
    mask = _first_mask(pid)
    loc = np.flatnonzero(mask).astype(np.int32)
    if np.array_equal(pid[loc], np.arange(loc.size, dtype=pid.dtype)):
        return pid, int(loc.size), loc  # numbered as first seen already
    new = np.zeros(n_pids, dtype=np.int32)
    used = pid[mask]
    new[used] = np.arange(used.size, dtype=np.int32)
    return new[pid], int(used.size), loc


def prepare(trace: Trace, outputs: bool = True) -> PreparedTrace:
    """The prefix-id layout of ``trace`` (module docstring); ``outputs`` as ``simulate``'s."""
    n = len(trace)
    ins_flat, ins_lens, total = _insert_rows(trace, outputs)
    blocks = trace.blocks.astype(np.int64, copy=False)
    ids = np.concatenate((blocks, ins_flat)) if ins_flat.size else blocks
    look_start = trace.offsets[:-1].astype(np.int64)
    look_end = trace.offsets[1:].astype(np.int64)
    base = int(trace.offsets[-1]) if n else 0
    ins_off = base + np.concatenate(([0], np.cumsum(ins_lens)[:-1])) if n else look_start
    has = ins_lens > 0
    ins_start = np.where(has, ins_off, look_start)
    ins_end = np.where(has, ins_off + ins_lens, look_end)
    chained = bool(not ids.size or int(ids.min()) >= 0) and ids.size < (1 << 31)
    pid, n_pids = _pids(ids) if chained else (np.zeros(0, np.int32), 0)
    row_start = np.concatenate((look_start, ins_start[has])).astype(np.int64)
    row_len = np.concatenate((look_end - look_start, ins_lens[has])).astype(np.int64)
    if chained and pid.size:
        first = np.zeros(pid.size, dtype=bool)
        first[row_start[row_len > 0]] = True
        par = np.empty_like(pid)
        par[1:] = pid[:-1]
        par[first] = -1
        seen = np.full(n_pids, -2, dtype=np.int32)
        seen[pid] = par
        chained = bool(np.array_equal(seen[pid], par))
        del seen, par, first
    if not chained:
        z = np.zeros(0, np.int32)
        return PreparedTrace(trace, outputs, False, 0, z, *[z.astype(np.int64)] * 5, z, z)
    pid, n_pids, loc = _first_seen_order(pid, n_pids)
    dep = np.zeros(n_pids, dtype=np.int32)
    depth = np.arange(pid.size, dtype=np.int64) - np.repeat(row_start, row_len) + 1
    dep[pid] = depth.astype(np.int32)  # the chain rule makes every occurrence agree
    return PreparedTrace(
        trace, outputs, True, n_pids, pid, look_start, look_end, ins_start, ins_end, total, loc, dep
    )
