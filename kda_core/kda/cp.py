"""Context parallelism for KDA: one long sequence split over P ranks, joined by an affine scan.

KV of different segments can be broadcast and attended to (MLA); KDA states of different segments
do not add. What composes is the segment's *affine map* S_end = M S_start + b (kda.AffineMap):

1. Local pass. Rank r owns tokens [t_r, t_{r+1}). It runs `kda.chunked` once on an augmented
   state [b | M] of width V + K: values [v | 0] from the state [0 | I]. The final state gives its
   map (M_r, b_r); the outputs split the same way, o_t = o0_t + S_in^T (scale M_t^T q_t), so the
   incoming state is needed only for a [T_r, K] x [K, V] product at the end, not a second pass.
   Rank 0 knows its initial state and runs plain `kda.chunked`: its element is a constant map.
2. Scan. An exclusive prefix over the ranks' maps gives every rank its incoming state:
   ``allgather`` (every rank receives every map, folds the ones before it: P-1 blocks sent per
   rank in a ring) or ``logdepth`` (each map shifted to the right neighbour, then Hillis-Steele
   over the shifted maps with send/recv: 1 + ceil(log2(P-1)) steps). A message is H*K*(K+V)
   numbers (a map) or H*K*V (a state, when the sender's prefix already reaches a known state):
   whatever T is.
3. Finish. o += qM S_in on the rank's open piece; the last rank's M S_in + b is the final state.

Varlen (packed documents, ``cu_seqlens``, one initial state each) is the same machinery: a rank
cuts its segment at document starts; pieces that start a document know their initial state and
run plain `kda.chunked`; only the first piece of a segment that starts mid-document is open. A
rank whose segment holds a document start hands the scan a constant map (it resets the prefix).

`context_parallel(..., ranks=P)` runs the ranks in this process (the same plan, schedule and
messages as the real ranks, copied instead of sent); ``group=cp_gloo.GlooGroup(P)`` runs them on
real processes over torch.distributed (gloo). ``sequential_states`` is the naive twin of both
scans (a left fold of the maps). `short_conv_cp` is the conv window's halo exchange: each rank
needs the last W-1 raw rows before its segment.

Left out: overlapping the scan with the local pass, a scan over layers (one layer per call),
grouped value heads and bf16 messages (messages here are the state dtype).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kda_core import conv, kda
from kda_core._checks import check_int

SCANS = ("allgather", "logdepth")
MAX_RANKS = 64
MAX_DOCS = 4096
# the open piece's augmented run goes in segments of this many tokens (see _open_piece)
OPEN_SEGMENT = 1024
FLUSH_BELOW = {np.dtype(np.float32): 2.0**-100, np.dtype(np.float64): 2.0**-900}


# --------------------------------------------------------------------------------------------
# scan elements


@dataclass(slots=True)
class Element:
    """A rank's map for the scan: S -> M S + b, or the constant b when M is None (the rank's
    prefix reaches a known state: rank 0, or a document starts inside its segment)."""

    M: np.ndarray | None  # [H, K, K]
    b: np.ndarray  # [H, K, V]

    @property
    def nbytes(self) -> int:
        return self.b.nbytes + (0 if self.M is None else self.M.nbytes)

    def apply(self, S: np.ndarray) -> np.ndarray:
        return self.b if self.M is None else np.matmul(self.M, S) + self.b


def combine(earlier: Element, later: Element) -> Element:
    """`earlier` then `later` (AffineMap.then; a constant `later` ignores what came before)."""
    if later.M is None:
        return later
    b = np.matmul(later.M, earlier.b) + later.b
    return Element(None if earlier.M is None else np.matmul(later.M, earlier.M), b)


def sequential_states(elements: Sequence[Element]) -> list[np.ndarray | None]:
    """The naive twin of both scans: S_in[r] = e_{r-1}(...e_0(.)), a left fold. S_in[0] = None
    (rank 0 has no predecessor; its element must be constant)."""
    if elements[0].M is not None:
        raise ValueError("elements[0] must be a constant map (rank 0 knows its initial state)")
    out: list[np.ndarray | None] = [None]
    S = elements[0].b
    for e in elements[1:]:
        out.append(S)
        S = e.apply(S)
    return out


# --------------------------------------------------------------------------------------------
# schedules (shared by the in-process ranks, the gloo ranks, the study and the app)


@dataclass(frozen=True, slots=True)
class Message:
    step: int
    src: int
    dst: int
    kind: str  # "map" (M and b) or "state" (b only)


def logdepth_schedule(constant: Sequence[bool]) -> list[list[Message]]:
    """Exclusive log-depth scan over P elements: first every rank hands its own element to the
    right neighbour (now rank r holds e_{r-1}), then a Hillis-Steele inclusive scan over ranks
    1..P-1 (distances 1, 2, 4, ...). Afterwards rank r holds e_0..e_{r-1} composed: its incoming
    state. ``constant[r]`` says e_r is constant; a prefix is constant once it covers a constant
    element (e_0 always is), and then its sender ships only the state. Steps: 1 + ceil(log2(P-1))
    (P > 2)."""
    const = list(constant)
    P = len(const)
    if P < 2:
        return []
    steps = [[Message(0, r, r + 1, "state" if const[r] else "map") for r in range(P - 1)]]
    held = [False] + const[:-1]  # whether the prefix rank r holds is constant
    d = 1
    while 1 + d < P:
        step = [
            Message(len(steps), r, r + d, "state" if held[r] else "map") for r in range(1, P - d)
        ]
        held = [held[r] or (r - d >= 1 and held[r - d]) for r in range(P)]
        steps.append(step)
        d *= 2
    return steps


def allgather_schedule(P: int) -> list[list[Message]]:
    """One step: every element reaches every rank (ring all-gather: each rank sends P-1 blocks,
    each a full map; all_gather needs equal shapes, so a constant map ships its zero M)."""
    if P == 1:
        return []
    return [[Message(0, s, d, "map") for s in range(P) for d in range(P) if s != d]]


def message_bytes(kind: str, H: int, K: int, V: int, itemsize: int) -> int:
    return H * K * (K + V if kind == "map" else V) * itemsize


def bytes_sent(schedule: list[list[Message]], P: int, H: int, K: int, V: int, itemsize: int):
    """Bytes each rank sends under ``schedule`` -> int array [P]."""
    out = np.zeros(P, np.int64)
    for step in schedule:
        for m in step:
            out[m.src] += message_bytes(m.kind, H, K, V, itemsize)
    return out


# --------------------------------------------------------------------------------------------
# the plan: segments and pieces


@dataclass(frozen=True, slots=True)
class Piece:
    start: int  # global token positions
    stop: int
    doc: int
    starts_doc: bool  # its initial state is the document's own (else: open, from the scan)
    ends_doc: bool


@dataclass(frozen=True, slots=True)
class Plan:
    T: int
    bounds: tuple[int, ...]  # P + 1 rank boundaries
    cu_seqlens: tuple[int, ...]
    pieces: tuple[tuple[Piece, ...], ...]  # per rank

    @property
    def ranks(self) -> int:
        return len(self.bounds) - 1

    @property
    def constant(self) -> tuple[bool, ...]:
        """Whether each rank's scan element is constant (it holds a document start)."""
        return tuple(len(p) > 1 or p[0].starts_doc for p in self.pieces)


def split_points(
    T: int, ranks: int, chunk_size: int = 64, first_weight: float = 1.0
) -> tuple[int, ...]:
    """Rank boundaries: shares in proportion 1 : ... : 1, with rank 0's share ``first_weight``
    times the others' (rank 0 runs the plain pass, the others the wider augmented one: see
    `balance_weight`); rounded to whole chunks when every rank gets >= 8 of them."""
    if not 1.0 <= first_weight <= 8.0:
        raise ValueError(f"first_weight must be in [1, 8], got {first_weight}")
    C = chunk_size if 8 * ranks * chunk_size <= T else 1  # rounding must not unbalance ranks
    total = first_weight + ranks - 1
    pts = [0] + [round(T * (first_weight + r - 1) / total / C) * C for r in range(1, ranks)]
    pts.append(T)
    if any(a >= b for a, b in zip(pts, pts[1:])):  # tiny T: plain equal shares
        pts = [round(r * T / ranks) for r in range(ranks)] + [T]
    return tuple(pts)


def balance_weight(T: int, H: int, K: int, V: int, chunk_size: int = 64) -> float:
    """How much more a token costs in the augmented pass (state width V + K) than in the plain
    one (width V), by `kda.chunked_flops`: rank 0 gets that many times the others' share, so the
    ranks finish their local passes together (K = V = 128: 1.72)."""
    return kda.chunked_flops(T, H, K, V + K, chunk_size) / kda.chunked_flops(T, H, K, V, chunk_size)


def make_plan(
    T: int, ranks: int, cu_seqlens=None, chunk_size: int = 64, first_weight: float = 1.0
) -> Plan:
    ranks = check_int("ranks", ranks, 1, MAX_RANKS)
    if ranks > T:
        raise ValueError(f"ranks must be in [1, T={T}] (one token per rank at least), got {ranks}")
    cu = _check_cu_seqlens(cu_seqlens, T)
    bounds = split_points(T, ranks, chunk_size, first_weight)
    starts = set(cu[:-1])
    pieces = []
    for r in range(ranks):
        s, e = bounds[r], bounds[r + 1]
        cuts = [s] + [c for c in cu[1:-1] if s < c < e] + [e]
        doc0 = int(np.searchsorted(cu, s, side="right")) - 1
        pieces.append(
            tuple(
                Piece(a, b, doc0 + i, a in starts, b in set(cu[1:]))
                for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))
            )
        )
    return Plan(T, bounds, cu, tuple(pieces))


def _check_cu_seqlens(cu_seqlens, T: int) -> tuple[int, ...]:
    if cu_seqlens is None:
        return (0, T)
    cu = np.asarray(cu_seqlens)
    if cu.ndim != 1 or cu.dtype.kind not in "iu" or not 2 <= cu.size <= MAX_DOCS + 1:
        raise ValueError(f"cu_seqlens must be 2..{MAX_DOCS + 1} integers, got {cu_seqlens!r:.80}")
    if cu[0] != 0 or cu[-1] != T or np.any(np.diff(cu) < 1):
        raise ValueError(f"cu_seqlens must rise strictly from 0 to T={T}, got {cu.tolist()!r:.80}")
    return tuple(int(c) for c in cu)


# --------------------------------------------------------------------------------------------
# one rank's work


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
            o[t], S = kda.chunked(
                *args, scale=scale, initial_state=initial_states[p.doc], chunk_size=chunk_size
            )
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
    x[np.abs(x) < FLUSH_BELOW[x.dtype]] = 0
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
    step = max(chunk_size, OPEN_SEGMENT // chunk_size * chunk_size)
    for a in range(0, n, step):
        t = slice(a, min(n, a + step))
        if not X[:, :, V:].any():  # forgotten: M = 0 from here on
            rows = (q[t], k[t], v[t], g[t], beta[t])
            o[t], X[:, :, :V] = kda.chunked(
                *rows, scale=scale, initial_state=X[:, :, :V], chunk_size=chunk_size
            )
            continue
        v_aug = np.concatenate([v[t], np.zeros((t.stop - a, H, K), v.dtype)], axis=2)
        o_aug, X = kda.chunked(q[t], k[t], v_aug, g[t], beta[t], scale=scale, initial_state=X,
                               chunk_size=chunk_size)  # fmt: skip
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


# --------------------------------------------------------------------------------------------
# the scans, in process


@dataclass(slots=True)
class ScanTrace:
    """What the in-process scan did: the schedule, each rank's incoming state and the states
    each step left on each rank (for the app)."""

    schedule: list[list[Message]]
    S_in: list[np.ndarray | None]
    bytes_sent: np.ndarray  # [P]


def scan_in_process(elements: Sequence[Element], scan: str, H: int, K: int, V: int) -> ScanTrace:
    """Run `scan` over the ranks' elements as the real ranks would (messages are copies)."""
    P = len(elements)
    itemsize = elements[0].b.dtype.itemsize
    if scan == "allgather":
        sched = allgather_schedule(P)
        gathered = [Element(e.M, e.b.copy()) for e in elements]  # what every rank receives
        S_in = sequential_states(gathered)  # each rank folds the maps before it
    else:
        sched = logdepth_schedule([e.M is None for e in elements])
        held: list[Element | None] = [None] * P  # the prefix each rank holds
        for step in sched:
            new = list(held)
            for m in step:
                sent = elements[m.src] if m.step == 0 else held[m.src]
                if (m.kind == "state") != (sent.M is None):
                    raise AssertionError("schedule and elements disagree on a constant map")
                new[m.dst] = sent if m.step == 0 else combine(sent, held[m.dst])
            held = new
        S_in = [None] + [h.b.copy() for h in held[1:]]
    return ScanTrace(sched, S_in, bytes_sent(sched, P, H, K, V, itemsize))


# --------------------------------------------------------------------------------------------
# public entry points


def _initial_states(initial_states, n_docs: int, H: int, K: int, V: int, dtype) -> np.ndarray:
    if initial_states is None:
        return np.zeros((n_docs, H, K, V), dtype)
    S = np.asarray(initial_states)
    if S.shape != (n_docs, H, K, V):
        raise ValueError(
            f"initial_states must have shape [N_docs, H, K, V] = {(n_docs, H, K, V)}, got {S.shape}"
        )
    return np.stack([kda._as_float("initial_states", s, np.dtype(dtype)) for s in S])


def context_parallel_varlen(
    q, k, v, g, beta, *, ranks, cu_seqlens=None, initial_states=None, scan="logdepth",
    scale=None, chunk_size=64, group=None, balance=True,
):  # fmt: skip
    """Packed documents split over ``ranks``: -> (o [T, H, V], final states [N_docs, H, K, V]),
    equal to `kda.chunked` per document. ``group`` (a cp_gloo.GlooGroup of ``ranks`` processes)
    runs the ranks for real; without it they run in this process. ``balance``: rank 0 (plain
    pass) gets `balance_weight` times the others' share; False: equal shares."""
    q, k, v, g, beta, _, scale = kda._validate(q, k, v, g, beta, None, scale)
    if scan not in SCANS:
        raise ValueError(f"scan must be one of {SCANS}, got {scan!r}")
    T, H, K = q.shape
    V = v.shape[2]
    C = kda._check_chunk_size(chunk_size)
    weight = balance_weight(T, H, K, V, C) if balance and cu_seqlens is None else 1.0
    plan = make_plan(T, ranks, cu_seqlens, C, weight)
    S0 = _initial_states(initial_states, len(plan.cu_seqlens) - 1, H, K, V, q.dtype)
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
    """All ranks of ``plan`` in this process -> (o, finals, (local passes, ScanTrace))."""
    H, K, V = S0.shape[1:]
    passes = []
    for r in range(plan.ranks):
        t = slice(plan.bounds[r], plan.bounds[r + 1])
        rows = [x[t] for x in inputs]
        passes.append(local_pass(*rows, plan.pieces[r], S0, scale=scale, chunk_size=chunk_size))
    trace = scan_in_process([lp.element for lp in passes], scan, H, K, V)
    o_parts, finals = [], {}
    for lp, S_in in zip(passes, trace.S_in):
        o_r, f_r = finish(lp, S_in)
        o_parts.append(o_r)
        finals.update(f_r)
    return np.concatenate(o_parts, axis=0), finals, (passes, trace)


def context_parallel(
    q, k, v, g, beta, *, ranks, scan="allgather", initial_state=None, scale=None,
    chunk_size=64, group=None, balance=True,
):  # fmt: skip
    """One sequence over ``ranks`` ranks -> (o [T, H, V], S [H, K, V]), equal to `kda.chunked`.

    ``ranks=1`` is a plain `kda.chunked` call (no torch). Without ``group`` the ranks run in
    this process (numpy); ``group=cp_gloo.GlooGroup(ranks)`` runs them on real processes."""
    S0 = None if initial_state is None else np.asarray(initial_state)[None]
    o, S = context_parallel_varlen(
        q, k, v, g, beta, ranks=ranks, initial_states=S0, scan=scan, scale=scale,
        chunk_size=chunk_size, group=group, balance=balance,
    )  # fmt: skip
    return o, S[0]


# --------------------------------------------------------------------------------------------
# the conv window across ranks


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
        x, w, ranks=ranks, window=window, activation=activation, chunk_size=chunk_size,
        first_weight=first_weight, group=group,
    )  # fmt: skip
    return y, windows[0]


def short_conv_cp_varlen(
    x, w, *, ranks, cu_seqlens=None, window=None, activation="silu", chunk_size=64,
    first_weight=1.0, group=None,
):  # fmt: skip
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
