"""Request by request on ``studies.hit_reasons``: the requests that lose the most, and one
request's explanation for both engines (the positions that decide its cached tokens).

``worst_requests(r, n)``: the ``n`` requests whose cached tokens fall furthest below their
token match (the larger gap of the two engines; ties: earlier first). ``explain(r, i)``: the
request's input, token match and trace blocks, and per engine its hit grid (SGLang's
checkpoint grid, vLLM's block or match unit), the tokens a lookup can reuse (at most
``input - 1``: the last prompt token is recomputed), the deepest grid point inside them, the
cached tokens under the budgets and without them, and the reason.

The token match is split into parts that add up to it (``EngineExplanation.parts``): the
tokens restored from a saved state (the engine column), those an unlimited run restores and a
budget took, those up to the deepest grid point with no state (and why: the nearest deeper
state lies past the shared tokens, or at the last prompt token, or none was ever saved on the
path), the reusable tokens short of one grid unit, and the last prompt token the lookup leaves
out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kda_core._checks import check_int
from kda_core.studies.hit_reasons import ENGINES, REASONS, EngineHits, HitReasons

__all__ = ["EngineExplanation", "RequestExplanation", "explain", "worst_requests"]

_DEEPER = ("none", "past_match", "last_token")
"""Where the nearest deeper state lies: none saved on the path, past the tokens the request
shares (in another request's own tokens), or at its last prompt token (the lookup of at most
``input - 1`` tokens cannot use it)."""


@dataclass(frozen=True, slots=True)
class EngineExplanation:
    """One engine on one request; lengths in tokens. ``grid_point``: the deepest multiple of
    ``unit`` within ``reusable`` (where a state could sit); ``cached``: the restore point
    under the budgets; ``cached_unlimited``: without them.

    The run without budgets: ``source`` saved the state at ``cached_unlimited`` (-1: none);
    ``deeper`` (0: none), saved by ``deeper_source``, is the nearest state past it on a path
    sharing the whole token match, and ``deeper_at`` says where it lies: "past_match" (in another
    request's own tokens), "last_token" (the prompt's end: the lookup of at most ``input - 1``
    tokens cannot use it) or "none" (no earlier request saved a state on the path past it).
    ``evicted_by``: the budget reason that took ``cached_unlimited - cached`` tokens ("" when
    nothing was taken).

    ``parts``: the token match split, in this order, into "restored" (= ``cached``),
    "evicted" (taken by a budget), "no_state" (up to ``grid_point``), "below_unit" (short of
    one grid unit) and "last_token" (left out of the lookup): each >= 0, summing to
    ``token_match``."""

    engine: str
    unit: int
    reusable: int
    grid_point: int
    cached: int
    cached_unlimited: int
    reason: str
    token_match: int = 0
    source: int = -1
    deeper: int = 0
    deeper_source: int = -1
    deeper_at: str = "none"
    evicted_by: str = ""

    parts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestExplanation:
    """One request: ``token_match`` (the prefix any earlier request shares) covers
    ``matched_blocks`` blocks of ``block_size`` tokens; ``known_branch``: the match ends where
    the prefix had already branched or an earlier request ended; ``sharer``: the first earlier
    request sharing all of it (-1: none)."""

    index: int
    input_len: int
    token_match: int
    block_size: int
    matched_blocks: int
    known_branch: bool
    sglang: EngineExplanation
    vllm: EngineExplanation
    sharer: int = -1


def _gap(r: HitReasons) -> np.ndarray:
    return np.maximum(*(r.token_match - getattr(r, e).cached for e in ENGINES))


def worst_requests(r: HitReasons, n: int = 50) -> np.ndarray:
    """Indices of the ``n`` requests with the largest gap between token match and cached
    tokens (either engine), largest first, ties in trace order."""
    if not isinstance(r, HitReasons):
        raise ValueError(f"r must be a HitReasons, got {type(r).__name__}")
    k = check_int("n", n, 1, 100_000)
    gap = _gap(r)
    order = np.lexsort((np.arange(len(gap)), -gap))
    return order[:k]


def explain(r: HitReasons, i: int) -> RequestExplanation:
    """Request ``i`` of the study, for both engines (see the module docstring)."""
    if not isinstance(r, HitReasons):
        raise ValueError(f"r must be a HitReasons, got {type(r).__name__}")
    n = len(r.input_len)
    if n == 0:
        raise ValueError("the study has no requests")
    i = check_int("i", i, 0, n - 1)
    L, match = int(r.input_len[i]), int(r.token_match[i])
    reusable = min(match, L - 1)
    engines = {name: _engine(getattr(r, name), i, match, reusable) for name in ENGINES}
    return RequestExplanation(
        i,
        L,
        match,
        r.block_size,
        -(-match // r.block_size),
        bool(r.known_branch[i]),
        engines["sglang"],
        engines["vllm"],
        -1 if r.sharer is None else int(r.sharer[i]),
    )


def _engine(e: EngineHits, i: int, match: int, reusable: int) -> EngineExplanation:
    def at(a: np.ndarray | None, fill: int) -> int:
        return fill if a is None else int(a[i])

    deeper = at(e.deeper, 0)
    where = 0 if deeper == 0 else 1 if deeper > match else 2
    evicted = at(e.evicted_by, 0)
    cached, full, grid = int(e.cached[i]), int(e.cached_unlimited[i]), reusable // e.unit * e.unit
    held = max(cached, full)
    parts = {
        "restored": cached,
        "evicted": held - cached,
        "no_state": grid - held,
        "below_unit": reusable - grid,
        "last_token": match - reusable,
    }
    return EngineExplanation(
        e.engine,
        int(e.unit),
        reusable,
        grid,
        cached,
        full,
        REASONS[int(e.reason[i])],
        match,
        at(e.source, -1),
        deeper,
        at(e.deeper_source, -1),
        _DEEPER[where],
        REASONS[evicted] if evicted else "",
        parts,
    )
