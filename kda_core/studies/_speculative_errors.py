"""The error columns of ``studies.speculative.verify_step``: fold vs exact replay, commit vs a
sequential run, per acceptance count (max over KDA layers; S and conv windows)."""

from __future__ import annotations

import numpy as np

from kda_core.cache.quant import round_bf16
from kda_core.model import ModelState, TinyHybrid
from kda_core.serve import spec

__all__ = ["commit_errors", "fold_errors"]


def _max_state_error(a: ModelState, b: ModelState) -> float:
    return max(
        max(float(np.max(np.abs(x.S - y.S))), float(np.max(np.abs(x.conv - y.conv))))
        for x, y in zip(a.kda, b.kda)
    )


def fold_errors(rs: spec.ReplaySSM, state: ModelState, res, D: int):
    """Per acceptance count m: max |fold(d, k, g) - exact replay| in float64 and with d, k
    rounded to bf16 (the fast group vs the exact group). -> (float64 [D+1], bf16 [D+1])."""
    fold_err = np.zeros(D + 1)
    fold16_err = np.zeros(D + 1)
    for m in range(1, D + 1):
        for j, r in enumerate(rs.rings):
            S0 = state.kda[j].S
            d, k, g = (r.read(f, res.start, m) for f in ("d", "k", "g"))
            exact, _ = spec.exact_replay(
                S0,
                r.read("rawk", res.start, m),
                r.read("rawv", res.start, m),
                g,
                r.read("beta", res.start, m),
            )
            f64 = spec.fold_state(S0, d, k, g)
            f16 = spec.fold_state(S0, round_bf16(d), round_bf16(k), g)
            fold_err[m] = max(fold_err[m], float(np.max(np.abs(f64 - exact))))
            fold16_err[m] = max(fold16_err[m], float(np.max(np.abs(f16 - exact))))
    return fold_err, fold16_err


def commit_errors(
    model: TinyHybrid,
    rs: spec.ReplaySSM,
    state: ModelState,
    inputs: list[int],
    committed: ModelState,
    a: int,
) -> np.ndarray:
    """Commit vs a sequential run for every acceptance count 0..D (``committed`` is the one
    at ``a``; the others commit a fresh verify)."""
    D = rs.draft_tokens
    commit_err = np.zeros(D + 1)
    seq = state.copy()
    for m in range(D + 1):
        if m:
            model.decode_step(inputs[m - 1], seq)
        if m == a:
            commit_err[m] = _max_state_error(committed, seq)
        else:
            other = spec.ReplaySSM(model, D, rs.ring_len)
            commit_err[m] = _max_state_error(
                other.commit(state, other.verify(state, inputs), m), seq
            )
    return commit_err
