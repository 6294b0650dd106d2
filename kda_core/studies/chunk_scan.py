"""Data for the chunk_scan app and figures: chunked == recurrent, and the affine maps behind it.

* Agreement: `kda.chunked` against the token recurrence `kda.recurrent` for every (T, C) of a
  grid: max abs and relative Frobenius differences of the outputs o ``[T, H, V]`` and the final
  state ``[H, K, V]`` (float64: ~1e-15; C = 1 is the recurrence in chunk clothing).
* Timing (measured, so not deterministic): best-of-``repeats`` seconds of both, and the speed-up.
* Cost model (deterministic): sequential steps T (one per token) vs ceil(T / C) (one per chunk),
  matmul FLOPs of the recurrence (6 H K V per token: S^T k, the rank-1 write, the read-out) vs
  `kda.chunked_flops` — chunking does *more* arithmetic, in far fewer, matmul-shaped steps.
* Composition: tokens split into segments A, B, C, ... each summarised by its affine map
  S -> M S + b (`kda.segment_map`). Any grouping of the composition ("(A->B)->C",
  "A->(B->C)", the closed form of the whole span, token by token) gives the same map to ~1e-15
  (associative), and applied to S0 it gives the recurrent state at the end; any other order
  of the segments gives another map (not commutative). Prefix compositions reproduce the state
  at every segment boundary (what a parallel scan or a checkpoint restore relies on).

Measured (defaults; tests assert the bounds): chunked vs recurrent max abs error <= 1.6e-15
for T in {16, 64, 200, 512} and C in {1, ..., 128}; groupings differ by <= 1e-15 in M and b;
other orders differ by 0.024-0.039 in M and 0.42-1.24 in b (state relative distance
0.25-1.1). One K3 KDA layer (96 x 128 x 128) at T = 8192, C = 64: 128 sequential steps instead
of 8192, for 1.86x the recurrence's matmul FLOPs.

Inputs are seeded and made the way fla's tests and the lab's bench make them (L2-normalised
q, k; K3's lower-bound gate; sigmoid beta; a random initial state), or, with ``text``, the
first KDA layer's real q, k, v, g, beta from TinyHybrid for the text's bytes.
Left out: float32 / bf16 kernels' rounding, GPU timings, and the MLA side.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import kda
from kda_core._checks import check_bool, check_int, rel_error
from kda_core.studies._chunk_cost import Cost, cost
from kda_core.studies._kda_inputs import (  # the limits are chunk_scan's too (app, tests)
    MAX_DIM,  # noqa: F401
    MAX_HEADS,  # noqa: F401
    MAX_T,
    Inputs,
    check_grid,
    model_inputs,
    random_inputs,
    slice_inputs,
)

MAX_SEGMENTS = 5
_MAX_REPEATS = 10
_LETTERS = "ABCDE"


# ---------------------------------------------------------------------------------------------
# chunked == recurrent


@dataclass(slots=True)
class Agreement:
    """`chunked` vs `recurrent` on the same inputs, grids ``T_values [nT]`` x ``chunk_sizes [nC]``:
    ``o_max_abs``, ``o_rel``, ``S_max_abs``, ``S_rel`` all ``[nT, nC]`` (rel = relative
    Frobenius against the recurrence)."""

    source: str
    T_values: np.ndarray
    chunk_sizes: np.ndarray
    o_max_abs: np.ndarray
    o_rel: np.ndarray
    S_max_abs: np.ndarray
    S_rel: np.ndarray


def agreement(
    T_values: Sequence[int] = (16, 64, 200, 512),
    chunk_sizes: Sequence[int] = (1, 8, 16, 32, 64, 128),
    H: int = 2,
    K: int = 32,
    V: int = 32,
    seed: int = 0,
    text: str | None = None,
) -> Agreement:
    """Max and relative errors of the chunked form for every T (prefixes of one sequence) and C."""
    Ts = check_grid("T_values", T_values, 1, MAX_T)
    Cs = check_grid("chunk_sizes", chunk_sizes, 1, 1024)
    if text is None:
        x = random_inputs(max(Ts), H, K, V, seed)
    else:
        x = model_inputs(text)
        if max(Ts) > x.q.shape[0]:
            raise ValueError(f"T_values must be <= the text's {x.q.shape[0]} bytes, got {max(Ts)}")
    shape = (len(Ts), len(Cs))
    o_abs, o_rel, S_abs, S_rel = (np.zeros(shape) for _ in range(4))
    for i, T in enumerate(Ts):
        y = slice_inputs(x, T)
        args = (y.q, y.k, y.v, y.g, y.beta)
        o_ref, S_ref = kda.recurrent(*args, initial_state=y.S0)
        for j, C in enumerate(Cs):
            o, S = kda.chunked(*args, initial_state=y.S0, chunk_size=C)
            o_abs[i, j] = np.abs(o - o_ref).max()
            S_abs[i, j] = np.abs(S - S_ref).max()
            o_rel[i, j] = rel_error(o, o_ref)
            S_rel[i, j] = rel_error(S, S_ref)
    return Agreement(x.source, np.array(Ts), np.array(Cs), o_abs, o_rel, S_abs, S_rel)


@dataclass(slots=True)
class Timing:
    """Measured best-of-``repeats`` seconds: ``recurrent_s [nT]``, ``chunked_s [nT, nC]``,
    ``speedup [nT, nC]`` = recurrent / chunked. Wall clock: varies run to run and machine to
    machine (the ratios are the point; single-threaded BLAS recommended)."""

    T_values: np.ndarray
    chunk_sizes: np.ndarray
    H: int
    K: int
    V: int
    repeats: int
    recurrent_s: np.ndarray
    chunked_s: np.ndarray
    speedup: np.ndarray


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def timing(
    T_values: Sequence[int] = (64, 256, 1024),
    chunk_sizes: Sequence[int] = (16, 64),
    H: int = 4,
    K: int = 32,
    V: int = 32,
    repeats: int = 3,
    seed: int = 0,
) -> Timing:
    """Time both forms at modest sizes (T <= 4096, H <= 16, K, V <= 128)."""
    Ts = check_grid("T_values", T_values, 1, MAX_T)
    Cs = check_grid("chunk_sizes", chunk_sizes, 1, 1024)
    repeats = check_int("repeats", repeats, 1, _MAX_REPEATS)
    x = random_inputs(max(Ts), H, K, V, seed)
    rec = np.zeros(len(Ts))
    chk = np.zeros((len(Ts), len(Cs)))
    for i, T in enumerate(Ts):
        y = slice_inputs(x, T)
        args = (y.q, y.k, y.v, y.g, y.beta)
        rec[i] = chk[i] = math.inf
        for _ in range(repeats):  # interleaved, so load on a shared machine hits both alike
            rec[i] = min(
                rec[i], _seconds(lambda a=args, s=y.S0: kda.recurrent(*a, initial_state=s))
            )
            for j, C in enumerate(Cs):
                run = lambda a=args, s=y.S0, c=C: kda.chunked(*a, initial_state=s, chunk_size=c)  # noqa: E731
                chk[i, j] = min(chk[i, j], _seconds(run))
    return Timing(
        np.array(Ts), np.array(Cs), int(H), int(K), int(V), repeats, rec, chk, rec[:, None] / chk
    )


# ---------------------------------------------------------------------------------------------
# affine composition: grouping vs order


@dataclass(slots=True)
class Composition:
    """Segments ``labels`` (A, B, ...) of ``lengths`` tokens; every difference is max abs.

    Groupings (``grouping_labels [g]``): ``grouping_M_diff``, ``grouping_b_diff`` against the
    left fold "(A->B)->C", ``grouping_S_diff`` = |map(S0) - recurrent final state|.
    Orders (``order_labels [p]``, every permutation, the true order first): ``order_M_diff``,
    ``order_b_diff`` against the true map, ``order_S_rel`` = relative distance of map(S0) to
    the true final state. Boundaries: ``boundary_tokens [n]`` and ``boundary_S_diff [n]`` =
    |prefix composition(S0) - recurrent state after that many tokens|.
    Heatmaps for ``head``: ``M_true``, ``M_swapped`` [K, K] and ``b_true``, ``b_swapped``
    [K, V] of the true order and of ``order_labels[1]`` (the last two segments swapped).
    """

    source: str
    head: int
    labels: tuple[str, ...]
    lengths: np.ndarray
    grouping_labels: tuple[str, ...]
    grouping_M_diff: np.ndarray
    grouping_b_diff: np.ndarray
    grouping_S_diff: np.ndarray
    order_labels: tuple[str, ...]
    order_M_diff: np.ndarray
    order_b_diff: np.ndarray
    order_S_rel: np.ndarray
    boundary_tokens: np.ndarray
    boundary_S_diff: np.ndarray
    M_true: np.ndarray
    M_swapped: np.ndarray
    b_true: np.ndarray
    b_swapped: np.ndarray


def _fold(maps: Sequence[kda.AffineMap]) -> kda.AffineMap:
    out = maps[0]
    for m in maps[1:]:
        out = out.then(m)
    return out


def _fold_right(maps: Sequence[kda.AffineMap]) -> kda.AffineMap:
    out = maps[-1]
    for m in reversed(maps[:-1]):
        out = m.then(out)
    return out


def _tree(maps: Sequence[kda.AffineMap]) -> kda.AffineMap:
    """Pairwise (parallel-scan style) reduction: ((A->B)->(C->D))->E ..."""
    level = list(maps)
    while len(level) > 1:
        nxt = [level[i].then(level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _arrows(names: Sequence[str]) -> str:
    return "->".join(names)


def composition(
    lengths: Sequence[int] = (16, 16, 16),
    H: int = 2,
    K: int = 16,
    V: int = 16,
    seed: int = 0,
    head: int = 0,
    text: str | None = None,
) -> Composition:
    """Compose the segment maps of one token sequence in several groupings and every order."""
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        raise ValueError(f"lengths must be a sequence of 2..{MAX_SEGMENTS} segment lengths")
    if not 2 <= len(lengths) <= MAX_SEGMENTS:
        raise ValueError(f"lengths must hold 2..{MAX_SEGMENTS} segments, got {len(lengths)}")
    lens = tuple(check_int("lengths", n, 1, 1024) for n in lengths)
    T = sum(lens)
    if T > MAX_T:
        raise ValueError(f"lengths must sum to at most {MAX_T}, got {T}")
    if text is None:
        x = random_inputs(T, H, K, V, seed)
    else:
        x = model_inputs(text)
        if x.q.shape[0] < T:
            raise ValueError(f"lengths must sum to <= the text's {x.q.shape[0]} bytes, got {T}")
        x = slice_inputs(x, T)
    head = check_int("head", head, 0, x.q.shape[1] - 1)
    names = tuple(_LETTERS[: len(lens)])
    edges = np.concatenate([[0], np.cumsum(lens)])
    maps = [
        kda.segment_map(x.k[a:b], x.v[a:b], x.g[a:b], x.beta[a:b])
        for a, b in zip(edges[:-1], edges[1:])
    ]
    _, S_ref = kda.recurrent(x.q, x.k, x.v, x.g, x.beta, initial_state=x.S0)

    left = _fold(maps)
    gl, gM, gb, gS = _groupings(maps, names, x, left, S_ref)
    ol, oM, ob, oS, composed = _orders(maps, names, x, left, S_ref)
    bd = _boundaries(maps, edges, x)
    return Composition(
        source=x.source,
        head=head,
        labels=names,
        lengths=np.array(lens),
        grouping_labels=gl,
        grouping_M_diff=gM,
        grouping_b_diff=gb,
        grouping_S_diff=gS,
        order_labels=ol,
        order_M_diff=oM,
        order_b_diff=ob,
        order_S_rel=oS,
        boundary_tokens=edges[1:].astype(np.int64),
        boundary_S_diff=bd,
        M_true=left.M[head].copy(),
        M_swapped=composed[1].M[head].copy(),
        b_true=left.b[head].copy(),
        b_swapped=composed[1].b[head].copy(),
    )


def _groupings(maps, names, x: Inputs, left: kda.AffineMap, S_ref: np.ndarray):
    """Labels and max-abs differences (M, b vs the left fold; map(S0) vs the true state)."""
    n = len(maps)
    groupings = {  # with two segments the left and right folds are the same grouping
        "(" * (n - 2) + "->".join(names[:2]) + "".join(f")->{c}" for c in names[2:]): left
    }
    right = "".join(f"{c}->(" for c in names[:-2]) + "->".join(names[-2:]) + ")" * (n - 2)
    groupings.setdefault(right, _fold_right(maps))
    groupings["pairwise tree (parallel scan)"] = _tree(maps)
    groupings["closed form of the whole span"] = kda.segment_map(x.k, x.v, x.g, x.beta)
    groupings["token by token"] = kda.segment_map_naive(x.k, x.v, x.g, x.beta)
    gl = tuple(groupings)
    gM = np.array([np.abs(m.M - left.M).max() for m in groupings.values()])
    gb = np.array([np.abs(m.b - left.b).max() for m in groupings.values()])
    gS = np.array([np.abs(m.apply(x.S0) - S_ref).max() for m in groupings.values()])
    return gl, gM, gb, gS


def _orders(maps, names, x: Inputs, left: kda.AffineMap, S_ref: np.ndarray):
    """Every order of the segments, the true one first and the last two swapped second."""
    n = len(maps)
    perms = list(itertools.permutations(range(n)))
    swap = tuple(range(n - 2)) + (n - 1, n - 2)
    perms.remove(swap)
    perms.insert(1, swap)  # true order first, then the last two swapped
    composed = [_fold([maps[i] for i in p]) for p in perms]
    ol = tuple(_arrows([names[i] for i in p]) for p in perms)
    oM = np.array([np.abs(m.M - left.M).max() for m in composed])
    ob = np.array([np.abs(m.b - left.b).max() for m in composed])
    oS = np.array([rel_error(m.apply(x.S0), S_ref) for m in composed])
    return ol, oM, ob, oS, composed


def _boundaries(maps, edges: np.ndarray, x: Inputs) -> np.ndarray:
    """|prefix composition(S0) - recurrent state| at every segment boundary."""
    n = len(maps)
    bd = np.zeros(n)
    for i in range(n):
        T_i = int(edges[i + 1])
        _, S_i = kda.recurrent(
            x.q[:T_i], x.k[:T_i], x.v[:T_i], x.g[:T_i], x.beta[:T_i], initial_state=x.S0
        )
        bd[i] = np.abs(_fold(maps[: i + 1]).apply(x.S0) - S_i).max()
    return bd


# ---------------------------------------------------------------------------------------------
# the whole study


@dataclass(slots=True)
class ChunkScanStudy:
    """What the chunk_scan app draws by default; ``timing`` is None unless measured;
    ``chunk_size`` is the reader's C (one of the grids' sizes)."""

    agreement: Agreement
    cost: Cost
    composition: Composition
    timing: Timing | None
    chunk_size: int = 64


def chunk_scan_study(
    text: str | None = None,
    seed: int = 0,
    chunk_size: int = 64,
    measure_time: bool = False,
) -> ChunkScanStudy:
    """Defaults of every part; ``chunk_size`` is added to the grids (agreement, timing, cost).

    Without timing this takes ~0.2 s; ``measure_time=True`` adds `timing()` (~0.5-1 s, wall
    clock, not deterministic: the figure scripts should leave it off or draw `cost`)."""
    C = check_int("chunk_size", chunk_size, 1, 1024)
    check_bool("measure_time", measure_time)
    grid = tuple(sorted({1, 8, 16, 32, 64, 128, C}))
    if text is None:
        ag = agreement(chunk_sizes=grid, seed=seed)
        comp = composition(seed=seed)
    else:
        T = len(text.encode("utf-8")) if isinstance(text, str) else 0
        Ts = tuple(t for t in (16, 64, 200, 512) if t < T) + ((min(T, MAX_T),) if T else ())
        ag = agreement(T_values=Ts or (1,), chunk_sizes=grid, text=text)
        n = min(T, 3 * 16) // 3
        if n < 1:
            raise ValueError("text must be at least 3 bytes long to split into three segments")
        comp = composition(lengths=(n, n, n), text=text)
    tm = timing(chunk_sizes=tuple(sorted({16, 64, C})), seed=seed) if measure_time else None
    return ChunkScanStudy(ag, cost(chunk_sizes=tuple(sorted({16, 32, 64, 128, C}))), comp, tm, C)
