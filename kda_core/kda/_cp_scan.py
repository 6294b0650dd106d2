"""The scan of context parallelism: each rank's affine map as a scan element, how two compose,
the two schedules (all-gather + local fold, log-depth shift + Hillis-Steele) and the bytes
they move; `scan_in_process` runs a schedule with copies for messages. `sequential_states`
(a left fold) is the naive twin of both. Why KDA needs a scan at all: docs/context_parallel.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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


@dataclass(slots=True)
class ScanLog:
    """What the in-process scan did: the schedule, each rank's incoming state and the states
    each step left on each rank (for the app)."""

    schedule: list[list[Message]]
    S_in: list[np.ndarray | None]
    bytes_sent: np.ndarray  # [P]


def scan_in_process(elements: Sequence[Element], scan: str, H: int, K: int, V: int) -> ScanLog:
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
    return ScanLog(sched, S_in, bytes_sent(sched, P, H, K, V, itemsize))
