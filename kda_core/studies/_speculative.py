"""The inspection columns of ``studies.speculative.verify_step``: outputs rebuilt from the
checkpoint and the ring's fast group, fold vs exact replay, commit vs a sequential run, per
acceptance count (max over KDA layers; S and conv windows). docs/speculative.md."""

from __future__ import annotations

import numpy as np

from kda_core.kda.quant import round_bf16
from kda_core.model import ModelState, TinyHybrid
from kda_core.serve import spec

__all__ = ["commit_errors", "fold_errors", "fold_state", "reconstruct_error"]


def _decays(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gam = inclusive cumsum of g [n, H, K] and exp(Gam_t - Gam_j) for j <= t (0 above)."""
    Gam = np.cumsum(g, axis=0)
    causal = np.tril(np.ones((g.shape[0],) * 2, bool))[:, :, None, None]
    return Gam, np.exp(np.where(causal, Gam[:, None] - Gam[None, :], -np.inf))


def reconstruct_outputs(S0, q, d, k, g) -> np.ndarray:
    """Outputs o [n, H, V] rebuilt from the checkpoint S0 and the ring's (d, k, g) plus q:
    ``o_t = scale (S0^T (e^Gam_t q_t) + sum_{j<=t} <q_t, A(t, j) k_j> d_j)``."""
    Gam, A = _decays(g)
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    o0 = np.einsum("thk,hkv->thv", np.exp(Gam) * q, S0)
    return S0.shape[1] ** -0.5 * (o0 + np.einsum("tjh,jhv->thv", qk, d))


def fold_state(S0, d, k, g) -> np.ndarray:
    """Open-loop fold of the fast group: S_n = Diag(e^Gam_n) S0 + sum_j (k_j A(n, j)) d_j^T.
    Exact in exact arithmetic; with a rounded d (bf16 in SGLang) its error enters the state,
    which is why the commit replays the exact group (``spec.exact_replay``) instead."""
    Gam = np.cumsum(g, axis=0)
    kt = k * np.exp(Gam[-1][None] - Gam)  # [n, H, K]
    return np.exp(Gam[-1])[:, :, None] * S0 + np.einsum("jhk,jhv->hkv", kt, d)


def reconstruct_error(rs: spec.ReplaySSM, state: ModelState, res: spec.VerifyResult) -> float:
    """Max |outputs rebuilt from (S0, ring) - the verify's|, over the KDA layers (between the
    verify and its commit: the commit invalidates the rejected tail's entries)."""
    n, err = len(res.tokens), 0.0
    for j, ring in enumerate(rs.rings):
        d, k, g = (ring.read(f, res.start, n) for f in ("d", "k", "g"))
        o = reconstruct_outputs(state.kda[j].S, res.q[j], d, k, g)
        err = max(err, float(np.max(np.abs(o - res.o[j]))))
    return err


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
            exact = spec.exact_replay(
                S0,
                r.read("rawk", res.start, m),
                r.read("rawv", res.start, m),
                g,
                r.read("beta", res.start, m),
            )
            f64 = fold_state(S0, d, k, g)
            f16 = fold_state(S0, round_bf16(d), round_bf16(k), g)
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
