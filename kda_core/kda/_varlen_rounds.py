"""The batched rounds of ``varlen.chunked_varlen``: the short sequences' pieces (and the long
ones' tails) bucketed round by round (``rounds``), and one group of pieces through the intra
pass and one batched scan step (``piece_group``, ``_scan_step``). Split from varlen.py (its
callers, twins and tests: ``varlen`` and tests/test_varlen.py)."""

from __future__ import annotations

import numpy as np

from kda_core.kda import _inputs, _intra

# a round's states are gathered into one array for its batched scan step only while each is
# smaller than this; bigger ones (H = 8, K = V = 128: 1 MiB) step piece by piece on their own
# rows of S, where a gather and a scatter would cost more than the extra numpy calls
_STATE_VIEW_BYTES = 1 << 18


def rounds(starts: np.ndarray, lens: np.ndarray, C: int):
    """Pieces of the short sequences, round by round: round j holds every sequence's j-th piece
    (its full chunks of C tokens, then its tail), so a sequence's pieces run in order. Within a
    round pieces are bucketed by their chunk size (a tail of r tokens is padded to whole
    16-row sub-chunks, at most C). Yields (chunk size, sequences, first row, rows) per bucket.
    Pieces of one length up to C (every request's prefill chunk of a serving step): one bucket,
    made directly (`_rounds_general`, the twin, spends ~15 numpy calls on it)."""
    n = int(lens[0]) if lens.size else 0
    if 0 < n <= C and lens.min() == lens.max():
        width = C if n == C else min(C, -(-n // _inputs.SUB) * _inputs.SUB)
        yield width, np.arange(lens.size), starts, lens
        return
    yield from _rounds_general(starts, lens, C)


def _rounds_general(starts: np.ndarray, lens: np.ndarray, C: int):
    """`rounds` for any lengths."""
    full = lens // C
    tail = lens % C
    n_pieces = full + (tail > 0)
    for j in range(int(n_pieces.max(initial=0))):
        have = np.flatnonzero(n_pieces > j)
        is_full = full[have] > j
        size = np.where(is_full, C, tail[have])
        # a tail of r tokens is padded to whole sub-chunks of 16 (at least one): tails of 1..16
        # tokens share one bucket instead of one tiny intra call per length
        width = np.where(
            is_full, C, np.minimum(C, -(-np.maximum(size, 1) // _inputs.SUB) * _inputs.SUB)
        )
        for Cp in np.unique(width):
            pick = width == Cp
            seqs = have[pick]
            yield int(Cp), seqs, starts[seqs] + j * C, size[pick]


def _piece(it: _intra.Intra, j: int) -> _intra.Intra:
    """Chunk j of ``it`` alone (views)."""
    one = slice(j, j + 1)
    return _intra.Intra(
        KQ=it.KQ[one],
        Tb=it.Tb[one],
        V=it.V[one],
        Aqk=it.Aqk[one],
        Kd=it.Kd[one],
        decay=it.decay[one],
        least_gam=it.least_gam,
        g_max=it.g_max,
    )


def _scan_step(it: _intra.Intra, S: np.ndarray) -> np.ndarray:
    """One chunk for each of B sequences (``it`` holds one chunk per sequence, S [B, H, K, V]
    updated in place). The math of ``chunkwise._scan`` for one chunk, with matmuls batched over
    (sequence, head) on strided views of the token-major intra arrays (no transposed copies):
        R = [kg; Qg] S0,  Vn = Tb (v - kg S0),  O = Qg S0 + Aqk Vn,  S1 = D S0 + Kd^T Vn.
    From zero states (every request's first prefill chunk without a cached prefix) R is 0, so
    Vn = Tb v, O = Aqk Vn and S1 = Kd^T Vn: the same numbers (x - 0, x + 0 and 0 d + x are x
    exactly) without the largest product and two passes over S. Returns O [B, H, C, V]."""
    C = it.Tb.shape[-1]
    if not S.any():  # zero states
        Vn = np.matmul(it.Tb, np.swapaxes(it.V, 1, 2))
        np.matmul(it.Kd.transpose(0, 2, 3, 1), Vn, out=S)
        return np.matmul(it.Aqk, Vn)
    R = np.matmul(np.swapaxes(it.KQ, 1, 2), S)  # [B, H, 2C, V]
    Vn = np.matmul(it.Tb, np.swapaxes(it.V, 1, 2) - R[:, :, :C])
    O = np.matmul(it.Aqk, Vn)
    O += R[:, :, C:]
    S *= it.decay[..., None]
    S += np.matmul(it.Kd.transpose(0, 2, 3, 1), Vn)
    return O


def piece_group(q, k, v, g, beta, S, o, seqs, row0, size, scale: float, Cp: int, measure: bool):
    """One chunk of Cp rows for each of the sequences ``seqs`` (piece i: rows row0[i] ..
    row0[i] + size[i], zero padded to Cp): the intra pass and one batched scan step; their
    rows of o and their S are written in place. Pieces of Cp rows laid end to end (the serving
    case: every request's prefill chunk of one length) are read and written as views of q, ...
    and o, and sequences numbered consecutively keep their states in S itself (no gathers);
    otherwise the rows and states are gathered and scattered. With ``measure``, returns what
    `_inputs.check_deferred` needs over these rows."""
    T, H, Vd = q.shape[0], q.shape[1], v.shape[2]
    n = seqs.size
    whole = bool(size.min() == Cp)  # no padded rows
    if whole and row0[-1] - row0[0] == (n - 1) * Cp and np.all(np.diff(row0) == Cp):
        rows = slice(int(row0[0]), int(row0[0]) + n * Cp)
        it = _intra.intra_chunk(*(x[rows] for x in (q, k, v, g, beta)), scale, Cp)
        pad = None
    else:
        off = np.arange(Cp)
        rows = (row0[:, None] + off).reshape(-1)
        pad = (off[None, :] >= size[:, None]).reshape(-1)  # past the piece's end
        xs = [x[np.minimum(rows, T - 1)] for x in (q, k, v, g, beta)]
        if not whole:  # zero k, v, g, beta rows leave the state unchanged
            for x in xs:
                x[pad] = 0.0
        it = _intra.intra_chunk(*xs, scale, Cp)
    assert np.all(np.diff(seqs) > 0), "pieces come in sequence order"
    if seqs[-1] - seqs[0] == n - 1:  # increasing, so consecutive: S's rows as a view
        oj = _scan_step(it, S[int(seqs[0]) : int(seqs[0]) + n])  # [n, H, Cp, V]
    elif S[0].nbytes >= _STATE_VIEW_BYTES:  # big states: no gather, no scatter
        return _piece_by_piece(it, S, o, seqs, row0, size, measure)
    else:
        Sj = S[seqs]
        oj = _scan_step(it, Sj)
        S[seqs] = Sj
    # padded rows have zero q: their outputs are 0 unless S is not finite
    seen = _inputs.Measured(it.g_max, it.least_gam, float(oj.sum())) if measure else None
    oj = oj.transpose(0, 2, 1, 3)  # [n, Cp, H, V]
    if pad is None:
        dst = o[rows].reshape(n, Cp, H, Vd)  # splitting the row axis: always a view
        assert np.may_share_memory(dst, o), "a view of o"
        dst[...] = oj
    else:
        keep = ~pad
        o[rows[keep]] = oj.reshape(-1, H, Vd)[keep]
    return seen


def _piece_by_piece(it: _intra.Intra, S, o, seqs, row0, size, measure: bool):
    """`piece_group`'s scan for big states: one scan step per piece on its own row of S, its
    output rows written straight to o; with ``measure``, what `_inputs.check_deferred` needs."""
    total = 0.0
    for j, i in enumerate(seqs.tolist()):
        oj = _scan_step(_piece(it, j), S[i : i + 1])[0]  # [H, Cp, V]
        if measure:  # padded rows included, as in the batched step
            total += float(oj.sum())
        a, r = int(row0[j]), int(size[j])
        o[a : a + r] = oj[:, :r].swapaxes(0, 1)
    return _inputs.Measured(it.g_max, it.least_gam, total) if measure else None
