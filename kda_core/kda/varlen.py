"""Varlen (packed) KDA and short conv: many sequences in one call, each with its own state.

The serving runner feeds every running request's tokens of one scheduler step as one packed
array: ``x [T_total, ...]`` with ``cu_seqlens [N + 1]`` (sequence ``i`` is rows
``cu_seqlens[i]:cu_seqlens[i + 1]``, fla / flash-attn's convention), per-sequence initial
states ``[N, H, K, V]`` and conv windows ``[N, W-1, D]``.

* ``chunked_varlen`` - the chunkwise KDA of ``kda.chunked`` over packed sequences. Each
  sequence is cut into chunks of C tokens (its last one zero padded: zero k, v, g, beta rows
  leave the state unchanged and their outputs are dropped, as in ``kda.chunked``), so no chunk
  straddles two sequences. The work runs in rounds: round j takes the j-th chunk of every
  sequence (a tail of r < C tokens is its own chunk of about r tokens, so short sequences are
  not padded to C), in groups of about one ``kda.chunked`` slab; the state-independent part
  (``_intra.intra_chunk``) runs on a group's chunks at once and one batched scan step
  (``_scan_step``, ``chunkwise._scan``'s math with matmuls over (sequence, head)) advances all of
  them: 256 sequences of one chunk cost a few batched steps where one 256-chunk sequence costs
  256 scan steps. Sequences with ``_OWN_SLABS`` full chunks or more run ``kda.chunked`` on
  those rows (no gather; their scan steps amortise the per-chunk cost) and only their tails
  join the rounds (``_varlen_rounds``: views, not gathers, where pieces lie end to end).
* ``_step`` - one token for B independent states in one numpy step (batched decode; its
  validated form and twin are in tests/test_varlen.py).
* ``kda_varlen`` - the runner's dispatcher: length-1 sequences through ``_step_batch``, the
  rest through ``chunked_varlen``.
* the packed short conv lives in ``conv_varlen``.

Every fast path has a per-sequence twin (``*_naive``: a loop of the single-sequence
function); tests/test_varlen.py checks they agree to 1e-10 in float64.

Left out: grouped value heads, float32 fast paths (float64 only, like the model).
"""

from __future__ import annotations

import functools

import numpy as np

from kda_core import kda
from kda_core.kda import _inputs, chunkwise
from kda_core.kda._threads import for_each
from kda_core.kda._varlen_rounds import piece_group, rounds

__all__ = [
    "chunked_varlen",
    "chunked_varlen_naive",
    "kda_varlen",
]

# `_chunked_varlen` splits sequences over its threads only if the heaviest part carries at most
# this much more than its share of the tokens (else it splits heads, which always balance)
_BALANCE = 0.1
_OWN_SLABS = 3
"""Sequences with at least this many full chunks run ``kda.chunked`` on those contiguous rows
(a few scan steps amortise its per-chunk Python cost, and it needs no gather); their tails and
the shorter sequences (the serving case: prefill chunks of at most ``chunk_size`` tokens) are
batched across sequences, where the per-chunk cost would dominate (bench/bench_serve.py)."""


def _check_state_shape(S: np.ndarray, shape: tuple[int, int, int, int]) -> None:
    if S.shape != shape:
        raise ValueError(f"initial_states must have shape [N, H, K, V] = {shape}, got {S.shape}")


def _check_states(
    initial_states, N: int, H: int, K: int, V: int, deferred: bool = False
) -> np.ndarray:
    if initial_states is None:
        return np.zeros((N, H, K, V))
    S = np.array(initial_states, dtype=np.float64)  # a copy: the caller's array is not written
    _check_state_shape(S, (N, H, K, V))
    if not deferred and not np.all(np.isfinite(S)):
        raise ValueError("initial_states must be finite (found NaN or inf)")
    return S


def _validate(q, k, v, g, beta, cu_seqlens, initial_states, scale, deferred: bool = False):
    """Every check, in a fixed order; ``deferred=True`` skips the passes over q, k, v, g and
    the initial states that `chunked_varlen` proves from its run (see `_validate_deferred`)."""
    q, k, v, g, beta, _, scale = _inputs.validate(q, k, v, g, beta, None, scale, deferred=deferred)
    if q.dtype != np.float64:
        q, k, v, g, beta = (x.astype(np.float64) for x in (q, k, v, g, beta))
    T, H, K = q.shape
    cu = _inputs.check_cu_seqlens(cu_seqlens, T)
    S = _check_states(initial_states, cu.size - 1, H, K, v.shape[2], deferred)
    return q, k, v, g, beta, cu, S, scale


def _validate_deferred(*args):
    """`_validate` without the passes over q, k, v, g and the initial states; a failure is
    reported as the full check reports it (same message, same order). The run then proves
    them (`_inputs.check_deferred`): a NaN or inf in the initial states, as in q, k, v, always
    reaches o or the final states (decays and dense products keep it), and g is measured."""
    try:
        return _validate(*args, deferred=True)
    except ValueError:
        _validate(*args)  # the first failure of the full check
        raise


# --------------------------------------------------------------------------------------------
# chunkwise


def chunked_varlen(
    q, k, v, g, beta, cu_seqlens, *, scale=None, initial_states=None, chunk_size: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """Packed chunkwise KDA. q, k, g [T, H, K]; v [T, H, V]; beta [T, H]; cu_seqlens [N + 1];
    initial_states [N, H, K, V] (zeros if None). Returns (o [T, H, V], S [N, H, K, V]).

    Equal (to rounding) to ``kda.chunked`` run on each sequence with its own initial state;
    empty sequences (repeated offsets) keep their state."""
    C = _inputs.check_chunk_size(chunk_size)
    args = (q, k, v, g, beta, cu_seqlens, initial_states, scale)
    q, k, v, g, beta, cu, S, scale = _validate_deferred(*args)
    o, S, seen = _run(q, k, v, g, beta, cu, S, scale, C, measure=True)
    _inputs.check_deferred(lambda: _validate(*args), o, S, seen)
    return o, S


def _chunked_varlen(q, k, v, g, beta, cu, S, scale: float, C: int):
    """`chunked_varlen` after validation (see `_run`): (o, S)."""
    return _run(q, k, v, g, beta, cu, S, scale, C, measure=False)[:2]


def _run(q, k, v, g, beta, cu, S, scale: float, C: int, measure: bool):
    """`chunked_varlen` after validation (float64 arrays, int64 offsets); S [N, H, K, V] is
    updated in place and returned. Large inputs run on `kda.chunked`'s threads
    (chunkwise._head_groups says how many): split by sequences when they balance (each
    thread takes every head of about 1/n of the tokens: half the numpy calls of a head split,
    each twice the size), else by heads as `kda.chunked` does, so packing costs no
    parallelism either way."""
    T, H, K = q.shape
    assert q.dtype == v.dtype == S.dtype == np.float64 and S.shape[0] == cu.size - 1
    assert int(C) == C >= 1, "chunk size"
    o = np.empty((T, H, v.shape[2]))
    lens = np.diff(cu)
    C = _inputs.effective_chunk(C, max(int(lens.max()), 1))  # one chunk size for every part
    groups = chunkwise._head_groups(T, H, K, v.shape[2])
    parts = _balanced_parts(lens, len(groups))
    if parts is not None:
        seen = for_each(
            parts, lambda ids: _varlen_part(q, k, v, g, beta, cu, S, scale, C, o, ids, measure)
        )
    else:
        every = np.arange(cu.size - 1)
        seen = for_each(
            groups,
            lambda h: _varlen_part(
                q[:, h],
                k[:, h],
                v[:, h],
                g[:, h],
                beta[:, h],
                cu,
                S[:, h],
                scale,
                C,
                o[:, h],
                every,
                measure,
            ),
        )
    return o, S, functools.reduce(_inputs.Measured.add, seen) if measure else None


def _balanced_parts(lens: np.ndarray, n: int) -> list[np.ndarray] | None:
    """The sequences in n parts of nearly equal token counts (longest first, each to the
    lightest part), or None if n < 2 or the heaviest part would exceed the mean by more than
    _BALANCE (one long sequence among short ones: a head split balances better)."""
    if n < 2 or lens.size < n:
        return None
    load = np.zeros(n, np.int64)
    owner = np.empty(lens.size, np.int64)
    for i in np.argsort(-lens, kind="stable"):
        j = int(np.argmin(load))
        owner[i] = j
        load[j] += lens[i]
    if load.max() > (1 + _BALANCE) * lens.sum() / n:
        return None
    return [np.flatnonzero(owner == j) for j in range(n)]


def _varlen_part(*args) -> _inputs.Measured | None:
    """`_pipeline` on this thread, silent: a non-finite input flows through to o and S, where
    `_inputs.check_deferred` names it (or warns once if finite inputs overflowed)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _pipeline(*args)


def _pipeline(q, k, v, g, beta, cu, S, scale, C, o, ids, measure) -> _inputs.Measured | None:
    """The packed pipeline on sequences ``ids`` (and the heads of q, ..., S, o, views of the
    caller's arrays): their rows of o and their S are written in place. C is effective. With
    ``measure``, returns what `_inputs.check_deferred` needs (g's max and least chunk sum, o's
    sum) over the rows it ran."""
    seen = _inputs.Measured()
    T, H, K = q.shape
    Vd = v.shape[2]
    lens = np.diff(cu)[ids]
    starts, rest = cu[ids].copy(), lens.copy()
    for j in np.flatnonzero(lens // C >= _OWN_SLABS):  # long: kda.chunked on its full chunks
        i, n = ids[j], lens[j] // C * C
        s = slice(cu[i], cu[i] + n)
        # in place: its rows of o (n is whole chunks, so splitting the row axis is a view) and
        # its S[i] (the thread is a pool thread or the only one: no head split to hand on)
        dst = o[s].reshape(n // C, C, H, Vd)
        assert np.may_share_memory(dst, o), "a view of o"
        m = chunkwise._chunked_heads(q[s], k[s], v[s], g[s], beta[s], scale, C, S[i], dst, measure)
        if measure:
            seen = seen.add(m)
        starts[j] += n
        rest[j] -= n  # its tail (< C tokens) joins the batched rounds
    live = np.flatnonzero(rest > 0)
    for Cp, pos, row0, size in rounds(starts[live], rest[live], C):
        seqs = ids[live[pos]]
        # groups of about one kda.chunked slab: intermediates stay in cache between the intra
        # pass and the scan step
        group = max(1, chunkwise._SLAB_BYTES // (Cp * H * max(K, Vd) * 8))
        for g0 in range(0, len(seqs), group):
            gs = slice(g0, g0 + group)
            m = piece_group(
                q, k, v, g, beta, S, o, seqs[gs], row0[gs], size[gs], scale, Cp, measure
            )
            if measure:
                seen = seen.add(m)
    return seen if measure else None


def chunked_varlen_naive(
    q, k, v, g, beta, cu_seqlens, *, scale=None, initial_states=None, chunk_size: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """The twin: ``kda.chunked`` on each sequence in turn (empty ones keep their state)."""
    q, k, v, g, beta, cu, S, scale = _validate(q, k, v, g, beta, cu_seqlens, initial_states, scale)
    o = np.empty((q.shape[0], q.shape[1], v.shape[2]))
    for i in range(cu.size - 1):
        s = slice(cu[i], cu[i + 1])
        if cu[i + 1] > cu[i]:
            o[s], S[i] = kda.chunked(
                q[s],
                k[s],
                v[s],
                g[s],
                beta[s],
                scale=scale,
                initial_state=S[i],
                chunk_size=chunk_size,
            )
    return o, S


# --------------------------------------------------------------------------------------------
# one token for a batch of states (batched decode)


def _step(S, q, k, v, g, beta, scale: float, out=None) -> tuple[np.ndarray, np.ndarray]:
    """One token each for B sequences (the runner's inputs come from the model): S
    [B, H, K, V] (any strides, not written), q, k, g [B, H, K], v [B, H, V], beta [B, H];
    the new state goes to ``out`` [B, H, K, V] if given (any strides), else a new array."""
    B, H, K, Vd = S.shape
    q, k, v, g = (x.reshape(B, H, -1) for x in (q, k, v, g))
    beta = beta.reshape(B, H)
    Sn = np.multiply(S, np.exp(g)[..., None], out=out)  # decay rows first
    kS = np.matmul(k[:, :, None, :], Sn)[:, :, 0, :]
    u = beta[..., None] * (v - kS)
    Sn += k[..., None] * u[:, :, None, :]
    o = np.matmul(q[:, :, None, :], Sn)[:, :, 0, :] * scale
    return o, Sn


def kda_varlen(
    q, k, v, g, beta, cu_seqlens, initial_states, *, scale=None, chunk_size: int = 64, out=None
) -> tuple[np.ndarray, np.ndarray]:
    """The runner's KDA call: length-1 sequences (decode) through ``_step``'s math, the
    others (prefill chunks) through ``chunked_varlen``'s; same shapes as ``chunked_varlen``. The
    new states are written to ``out`` [N, H, K, V] when given (and returned). Its inputs come
    from the model, so only offsets, chunk size and state shape are checked (tests hold it to
    the public functions)."""
    cu = _inputs.check_cu_seqlens(cu_seqlens, np.shape(q)[0])
    C = _inputs.check_chunk_size(chunk_size)
    lens = np.diff(cu)
    S0 = np.asarray(initial_states, dtype=np.float64)
    _check_state_shape(S0, (lens.size, np.shape(q)[1], np.shape(q)[2], np.shape(v)[2]))
    scale = np.shape(q)[-1] ** -0.5 if scale is None else float(scale)
    if lens.size == np.shape(q)[0] and np.all(lens == 1):  # all decodes: no gathers, no copy
        return _step(S0, q, k, v, g, beta, scale, out)
    # float64 throughout; a float64 out is worked in directly, any other is filled at the end
    S = out if out is not None and out.dtype == np.float64 else S0.copy()
    if S is out:
        S[...] = S0
    o = _packed_steps(q, k, v, g, beta, cu, lens, S, scale, C)
    if out is not None and S is not out:
        out[...] = S
        S = out
    return o, S


def _packed_steps(q, k, v, g, beta, cu, lens, S, scale: float, C: int) -> np.ndarray:
    """`kda_varlen`'s non-decode step: S [N, H, K, V] float64, updated in place; returns o."""
    if np.all(lens > 1):  # prefill chunks only: no rows to gather
        arrays = [np.asarray(x, dtype=np.float64) for x in (q, k, v, g, beta)]
        return _chunked_varlen(*arrays, cu, S, scale, C)[0]
    o = np.empty(np.shape(v))
    one = np.flatnonzero(lens == 1)
    if one.size:
        r = cu[one]
        o[r], S[one] = _step(S[one], q[r], k[r], v[r], g[r], beta[r], scale)
    many = np.flatnonzero(lens > 1)
    if many.size:
        rows = np.concatenate([np.arange(cu[i], cu[i + 1]) for i in many])
        sub = np.concatenate([[0], np.cumsum(lens[many])])
        rows_of = [np.asarray(x, dtype=np.float64)[rows] for x in (q, k, v, g, beta)]
        o[rows], S[many] = _chunked_varlen(*rows_of, sub, S[many], scale, C)
    return o
