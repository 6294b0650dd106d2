"""Request by request on ``studies.hit_reasons``: the requests that lose the most, and one
request's explanation for both engines (the positions that decide its cached tokens).

``worst_requests(r, n)``: the ``n`` requests whose cached tokens fall furthest below their
token match (the larger gap of the two engines; ties: earlier first). ``explain(r, i)``: the
request's input, token match and trace blocks, and per engine its hit grid (SGLang's
checkpoint grid, vLLM's block or match unit), the tokens a lookup can reuse (at most
``input - 1``: the last prompt token is recomputed), the deepest grid point inside them, the
cached tokens under the budgets and without them, and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.studies.hit_reasons import ENGINES, REASONS, HitReasons

__all__ = ["EngineExplanation", "RequestExplanation", "explain", "worst_requests"]


@dataclass(frozen=True, slots=True)
class EngineExplanation:
    """One engine on one request; lengths in tokens. ``grid_point``: the deepest multiple of
    ``unit`` within ``reusable`` (where a state could sit); ``cached``: the restore point
    under the budgets; ``cached_unlimited``: without them."""

    engine: str
    unit: int
    reusable: int
    grid_point: int
    cached: int
    cached_unlimited: int
    reason: str


@dataclass(frozen=True, slots=True)
class RequestExplanation:
    """One request: ``token_match`` (the prefix any earlier request shares) covers
    ``matched_blocks`` blocks of ``block_size`` tokens; ``known_branch``: the match ends where
    the prefix had already branched or an earlier request ended."""

    index: int
    input_len: int
    token_match: int
    block_size: int
    matched_blocks: int
    known_branch: bool
    sglang: EngineExplanation
    vllm: EngineExplanation


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
    engines = {}
    for name in ENGINES:
        e = getattr(r, name)
        engines[name] = EngineExplanation(
            name,
            int(e.unit),
            reusable,
            reusable // e.unit * e.unit,
            int(e.cached[i]),
            int(e.cached_unlimited[i]),
            REASONS[int(e.reason[i])],
        )
    return RequestExplanation(
        i,
        L,
        match,
        r.block_size,
        -(-match // r.block_size),
        bool(r.known_branch[i]),
        engines["sglang"],
        engines["vllm"],
    )
