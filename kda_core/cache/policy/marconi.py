"""``marconi``: Marconi's speculative insertion and FLOP-aware eviction (Pan et al., "Marconi:
Prefix Caching for the Era of Hybrid LLMs", MLSys 2025, arXiv 2411.19379).

Placement keeps the lookup's branch point and the request's last token; eviction scores
unlocked nodes with at most one child by ``minmax(recency) + alpha * minmax(efficiency)``
(FLOPs a hit saves per byte held), alpha tuned by grid search after a bootstrap window.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kda_core._checks import check_int
from kda_core.cache.policy._base import PlanContext, Policy
from kda_core.cache.radix import StateRows

__all__ = ["MarconiPolicy"]


def _is_alpha(a: Any) -> bool:
    return isinstance(a, numbers.Real) and not isinstance(a, bool) and 0 <= a <= 100


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
    return np.ones_like(x) if hi <= lo else (x - lo) / (hi - lo)


@dataclass(slots=True)
class MarconiPolicy(Policy):
    """Marconi: branch + last admission, FLOP-aware eviction (see module doc)."""

    alpha: Any = "auto"
    bootstrap: int = 5
    alpha_grid: tuple = tuple(round(0.1 * i, 1) for i in range(21))
    d_model: int = 4096
    d_state: int = 128
    n_ssm_layers: int = 24
    n_attn_layers: int = 4
    n_mlp_layers: int = 28
    kv_bytes_per_token: int | None = None
    efficiency_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    # the alpha in use now (0 before tuning when alpha='auto')
    alpha_value: float = field(default=0.0, init=False, repr=False)
    _tuned: bool = field(default=False, init=False, repr=False)
    _requests: int = field(default=0, init=False, repr=False)
    _first_eviction: int | None = field(default=None, init=False, repr=False)
    _eff_owner: int = field(default=-1, init=False, repr=False)
    _eff: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False, repr=False)
    _eff_ver: np.ndarray = field(default_factory=lambda: np.zeros(0, int), init=False, repr=False)
    name = "marconi"

    def __post_init__(self) -> None:
        if self.alpha != "auto":
            if not _is_alpha(self.alpha):
                raise ValueError(f"alpha must be a float in [0, 100] or 'auto', got {self.alpha!r}")
            self.alpha = self.alpha_value = float(self.alpha)
        self.bootstrap = check_int("bootstrap", self.bootstrap, 1, 1000)
        grid = tuple(self.alpha_grid)
        if not grid or not all(_is_alpha(a) for a in grid):
            raise ValueError("alpha_grid must be a non-empty sequence of floats in [0, 100]")
        self.alpha_grid = tuple(float(a) for a in grid)
        self.d_model = check_int("d_model", self.d_model, 1, 1 << 20)
        self.d_state = check_int("d_state", self.d_state, 1, 1 << 20)
        self.n_ssm_layers = check_int("n_ssm_layers", self.n_ssm_layers, 0, 10000)
        self.n_attn_layers = check_int("n_attn_layers", self.n_attn_layers, 0, 10000)
        self.n_mlp_layers = check_int("n_mlp_layers", self.n_mlp_layers, 0, 10000)
        if self.kv_bytes_per_token is None:
            self.kv_bytes_per_token = self.n_attn_layers * 4 * self.d_model
        self.kv_bytes_per_token = check_int("kv_bytes_per_token", self.kv_bytes_per_token, 0)
        if self.efficiency_fn is not None and not callable(self.efficiency_fn):
            raise ValueError("efficiency_fn must be callable or None")

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        out = [ctx.total_len // ctx.page * ctx.page]
        if ctx.token_match > ctx.restore_at:
            out.append(ctx.token_match // ctx.page * ctx.page)
        return out

    def _flops(self, L: Any, P: Any) -> Any:
        """FLOPs a hit at ``L`` saves over restoring at ``P`` (Marconi Table 1; floats or
        float64 arrays): SSM on the own segment, attention and MLP as prefix differences (the
        artifact subtracts the parent's attention FLOPs in the MLP term; fixed here)."""
        D, N = float(self.d_model), float(self.d_state)
        own = L - P
        ssm = 12.0 * own * D * D + 16.0 * own * D * N + 10.0 * own * D
        attn_l = 8.0 * L * D * D + 4.0 * L * L * D
        attn_p = 8.0 * P * D * D + 4.0 * P * P * D
        return (
            self.n_ssm_layers * ssm
            + self.n_attn_layers * (attn_l - attn_p)
            + self.n_mlp_layers * 16.0 * own * D * D
        )

    def _efficiency(
        self, length: np.ndarray, anc_length: np.ndarray, state_bytes: np.ndarray
    ) -> np.ndarray:
        """FLOPs saved per byte held, per candidate."""
        if self.efficiency_fn is not None:
            return np.asarray(self.efficiency_fn(length, anc_length, state_bytes), np.float64)
        L = np.asarray(length, np.float64)
        mem = np.asarray(state_bytes, np.float64) + float(self.kv_bytes_per_token) * L
        return self._flops(L, np.asarray(anc_length, np.float64)) / np.maximum(mem, 1.0)

    def _row_efficiency(self, t: StateRows, rows: np.ndarray) -> np.ndarray:
        """Efficiency of ``rows``, cached per row and recomputed when its version changes (all
        rows when the cache or the size of its table changes)."""
        cap = t.version.shape[0]
        if self._eff_owner != t.owner or self._eff.shape[0] != cap:
            self._eff, self._eff_ver = np.zeros(cap), np.full(cap, -1, np.int64)
            self._eff_owner = t.owner
        stale = rows[self._eff_ver[rows] != t.version[rows]]
        if stale.size > 16 or (stale.size and self.efficiency_fn is not None):
            self._eff[stale] = self._efficiency(
                t.length[stale], t.anc_length[stale], t.nbytes[stale]
            )
            self._eff_ver[stale] = t.version[stale]
        elif stale.size:  # a few new rows: scalar twin of _efficiency() (numpy call overhead)
            for r in stale.tolist():
                self._eff[r] = self._scalar_efficiency(
                    float(t.length[r]), float(t.anc_length[r]), float(t.nbytes[r])
                )
                self._eff_ver[r] = t.version[r]
        return self._eff[rows]

    def _scalar_efficiency(self, L: float, P: float, nbytes: float) -> float:
        """``_efficiency`` of one candidate on floats (the same operations in the same order)."""
        mem = nbytes + float(self.kv_bytes_per_token) * L
        return self._flops(L, P) / max(mem, 1.0)

    def cache_options(self) -> dict:
        """The base's options, with ``_choose_victim`` as the cache's ``victim`` hook."""
        return {**Policy.cache_options(self), "victim": self._choose_victim}

    def _scores(self, t: StateRows) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the eviction candidates: unlocked states with at most one child."""
        rows = np.flatnonzero(t.evictable & (t.nchild <= 1))
        if rows.size == 0:
            return rows, np.zeros(0)
        rec = 1.0 / (1.0 + (t.clock - t.time[rows]))
        if self.alpha_value == 0.0:
            return rows, _minmax(rec)
        eff = self._row_efficiency(t, rows)
        return rows, _minmax(rec) + self.alpha_value * _minmax(eff)

    def _choose_victim(self, t: StateRows) -> int:
        """The cache's ``victim`` hook: the lowest score, the oldest among ties (-1: none)."""
        rows, score = self._scores(t)
        if rows.size == 0:
            return -1
        if self._first_eviction is None:
            self._first_eviction = self._requests
        lowest = rows[score <= score.min()]
        return int(lowest[np.argmin(t.time[lowest])])

    def note_request(self) -> None:
        """Count one served request (drives the bootstrap window when alpha='auto')."""
        self._requests += 1

    def tuning_due(self) -> bool:
        """True once, when alpha='auto' and ``bootstrap * N0`` requests have been seen."""
        if self.alpha != "auto" or self._tuned or self._first_eviction is None:
            return False
        return self._requests >= self.bootstrap * max(self._first_eviction, 1)

    def tune(self, evaluate: Callable[[float], float]) -> float:
        """Adopt the grid alpha maximising ``evaluate(alpha)`` (the artifact: FLOPs saved over
        the last 500 requests of a replay from an empty tree); ties keep the smaller alpha."""
        if not callable(evaluate):
            raise ValueError("evaluate must be callable")
        best_a, best_v = self.alpha_grid[0], -math.inf
        for a in self.alpha_grid:
            v = float(evaluate(a))
            if v > best_v:
                best_a, best_v = a, v
        self.alpha_value = best_a
        self._tuned = True
        return best_a

    def with_alpha(self, alpha: float) -> MarconiPolicy:
        """A fresh copy with a fixed alpha (for tuning replays)."""
        return replace(self, alpha=alpha)
