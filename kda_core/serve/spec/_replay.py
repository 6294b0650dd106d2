"""ReplaySSM on TinyHybrid: ring buffers per KDA layer, verify D tokens, commit a prefix exactly
(rings of length L >= 2D indexed by ``p & (L - 1)``, the conv window after each verified step;
derivations, layouts and the L >= 2D rule: docs/speculative.md).

``ring_verify`` rebuilds every output of a D-token segment from the checkpoint S0 and the rank-1
writes d, with no per-token state (its naive twin, a state per token, is in tests/test_spec.py);
``exact_replay`` is the commit's replay of the exact group in recurrent order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core import kda, sizing
from kda_core._checks import check_int
from kda_core.kda.conv import short_conv
from kda_core.model import MAX_TOKENS, KDALayerState, ModelState, TinyHybrid, check_tokens

MAX_DRAFT_TOKENS = 64  # D cap: verify cost and the [D, D, H, K] pairwise decays stay small
MAX_RING_LEN = 1024
RING_FIELDS: tuple[str, ...] = ("d", "k", "g", "rawv", "rawk", "beta")


def check_draft_tokens(draft_tokens: object) -> int:
    """D, the tokens verified per step (pending token included): an integer in [1, 64]."""
    return check_int("draft_tokens", draft_tokens, 1, MAX_DRAFT_TOKENS)


def check_ring_len(ring_len: object, draft_tokens: int) -> int:
    """L: None -> next_pow2(2D); otherwise a power of two in [2D, 1024] (ValueError if not)."""
    d = check_draft_tokens(draft_tokens)
    if ring_len is None:
        return sizing.default_ring_len(d)
    n = check_int("ring_len", ring_len, 1, MAX_RING_LEN)
    if n & (n - 1):
        raise ValueError(f"ring_len must be a power of two (>= 2*draft_tokens = {2 * d}), got {n}")
    if n < 2 * d:
        raise ValueError(
            f"ring_len must be >= 2*draft_tokens = {2 * d} (and a power of two), got {n}"
        )
    return n


def ring_verify(S0, q, k, v, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """ReplaySSM verify of one layer: outputs and ring d from S0 without any per-token state.

    With Gam_t = g_1 + ... + g_t and A(t, j) = exp(Gam_t - Gam_j) (the decay from after token j
    to token t), for t = 1..n:
        d_t = beta_t (v_t - S0^T (e^Gam_t * k_t) - sum_{j<t} <k_t, A(t, j) k_j> d_j)
        o_t = scale (S0^T (e^Gam_t * q_t) + sum_{j<=t} <q_t, A(t, j) k_j> d_j)
    i.e. a unit lower-triangular solve for d (the UT transform of the chunked form).
    S0 [H, K, V]; q, k, g [n, H, K]; v [n, H, V]; beta [n, H]; n <= 64; scale = K^-1/2.
    -> (o, d).
    """
    n = g.shape[0]
    Gam = np.cumsum(g, axis=0)
    causal = np.tril(np.ones((n, n), bool))[:, :, None, None]
    A = np.exp(np.where(causal, Gam[:, None] - Gam[None, :], -np.inf))  # kept exponents <= 0
    E = np.exp(Gam)
    kk = np.einsum("thc,jhc,tjhc->tjh", k, k, A)  # [n, n, H]
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    base = np.einsum("thk,hkv->thv", E * k, S0)
    d = np.empty_like(v)
    for t in range(n):
        d[t] = beta[t][:, None] * (v[t] - base[t] - np.einsum("jh,jhv->hv", kk[t, :t], d[:t]))
    o = np.einsum("thk,hkv->thv", E * q, S0) + np.einsum("tjh,jhv->thv", qk, d)
    return S0.shape[1] ** -0.5 * o, d


def exact_replay(S0, rawk, rawv, g, beta) -> np.ndarray:
    """Commit: replay (rawk, rawv, g, beta) from the full-precision S0 in recurrent order: the KDA
    recurrence (``kda.recurrent``, which checks the inputs) on k = rawk / sqrt(|rawk|^2 + eps)
    (``kda.l2norm``, as the model): S = Diag(alpha) S; d = beta (rawv - S^T k); S = S + k d^T
    (SGLang 0.5.23's order too: kernels/ops/attention/linear/kda_replayssm_spec_decode.py,
    kda_replayssm_exact_fold_kernel). S0 [H, K, V]; rawk, g [n, H, K]; rawv [n, H, V];
    beta [n, H]. -> S [H, K, V] (S0 is not modified)."""
    k = kda.l2norm(np.asarray(rawk, dtype=np.float64))
    return kda.recurrent(k, k, rawv, g, beta, initial_state=S0)[1]


@dataclass(slots=True)
class LayerRing:
    """One KDA layer's rings of length L (a power of two): ``data[f]`` for f in RING_FIELDS
    (beta [L, H], the others [L, H, K]); pos [L] the absolute position each slot holds (-1:
    empty or invalidated). Invariant: slot ``p & (L - 1)`` holds position p or another one,
    never a stale entry labelled p."""

    data: dict[str, np.ndarray]
    pos: np.ndarray

    @staticmethod
    def empty(L: int, H: int, K: int) -> LayerRing:
        data = {f: np.zeros((L, H) if f == "beta" else (L, H, K)) for f in RING_FIELDS}
        return LayerRing(data, np.full(L, -1, np.int64))

    def slots(self, start: int, n: int) -> np.ndarray:
        return (start + np.arange(n)) & (len(self.pos) - 1)

    def write(self, start: int, values: Sequence[np.ndarray]) -> None:
        """Positions start.. get ``values`` (one array per RING_FIELDS entry, in its order)."""
        idx = self.slots(start, len(values[0]))
        for name, x in zip(RING_FIELDS, values):
            self.data[name][idx] = x
        self.pos[idx] = start + np.arange(len(idx))

    def read(self, name: str, start: int, n: int) -> np.ndarray:
        """Entries of positions start..start+n-1 (ValueError if any was overwritten)."""
        idx = self.slots(start, n)
        if not np.array_equal(self.pos[idx], start + np.arange(n)):
            raise ValueError(f"ring no longer holds positions {start}..{start + n - 1}")
        return self.data[name][idx].copy()


class VerifyResult(NamedTuple):
    """One verify of n <= D tokens: logits [n, VOCAB] (row i predicts the token after
    tokens[i]); q and o [n_kda, n, H, K], the queries and the KDA outputs of the verify (what
    rebuilding the outputs from the ring takes and gives); mla_latents [n, n_mla, C]."""

    start: int
    tokens: tuple[int, ...]
    logits: np.ndarray
    q: np.ndarray
    o: np.ndarray
    mla_latents: np.ndarray


class ReplaySSM:
    """ReplaySSM speculative verify/commit for one request of a TinyHybrid.

    ``verify(state, tokens)`` runs up to D tokens after the committed ``state`` (not modified);
    ``commit(state, result, n_accept)`` returns the state after the first ``n_accept`` of them.
    A result commits once, and only while it is the latest verify (a later one overwrites it).
    """

    def __init__(
        self, model: TinyHybrid, draft_tokens: int = 8, ring_len: int | None = None
    ) -> None:
        if not isinstance(model, TinyHybrid):
            raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
        self.model = model
        self.draft_tokens = check_draft_tokens(draft_tokens)
        self.ring_len = L = check_ring_len(ring_len, self.draft_tokens)
        c = model.config
        H, K = c.n_heads, c.head_dim
        self.rings = [LayerRing.empty(L, H, K) for _ in model.kda_layers]
        # the window after each verified step (SGLang's intermediate_conv_window)
        self.conv_windows = np.zeros(
            (len(self.rings), self.draft_tokens, c.conv_size - 1, 3 * H * K)
        )
        self._open: tuple[VerifyResult, list[int]] | None = None  # the result, its state's tokens

    def verify(self, state: ModelState, tokens: Sequence[int]) -> VerifyResult:
        """Run ``tokens`` (1..D of them) after ``state``; fill the rings and conv windows."""
        model = self.model
        model.check_state(state)
        ids = check_tokens(tokens, name="tokens")
        if len(ids) > self.draft_tokens:
            raise ValueError(
                f"tokens: at most draft_tokens = {self.draft_tokens} per verify, got {len(ids)}"
            )
        start, n = state.boundary, len(ids)
        if start + n > MAX_TOKENS:
            raise ValueError(f"tokens: a request holds at most {MAX_TOKENS} tokens in all")
        W = model.config.conv_size
        x = model.embed[ids]
        qs, os_, lats = [], [], []
        for layer, kind in enumerate(model.layer_kinds):
            h = model.norm1(layer, x)
            if kind == "kda":
                j = model.kda_layers.index(layer)
                st = state.kda[j]
                f = model.kda_features(layer, h, st.conv)
                full = np.concatenate([st.conv, f.raw])
                for t in range(n):
                    self.conv_windows[j, t] = full[t + 1 : t + W]
                act, _ = short_conv(f.raw, model.blocks[layer].mixer.conv_w, st.conv, "silu")
                HK = act.shape[1] // 3
                rawk = act[:, HK : 2 * HK].reshape(f.k.shape)  # the key before normalisation
                o, d = ring_verify(st.S, f.q, f.k, f.v, f.g, f.beta)  # rawv is f.v
                self.rings[j].write(start, (d, f.k, f.g, f.v, rawk, f.beta))
                qs.append(f.q)
                os_.append(o)
                y = model.kda_readout(layer, h, o)
            else:
                y, lat = model.mla_mixer(layer, h, state.mla_kv[:, model.mla_layers.index(layer)])
                lats.append(lat)
            x = x + y
            x = x + model.mlp(layer, x)
        lat = np.stack(lats, axis=1)
        res = VerifyResult(start, tuple(ids), model.logits(x), np.stack(qs), np.stack(os_), lat)
        self._open = (res, list(state.tokens))
        return res

    def commit(self, state: ModelState, result: VerifyResult, n_accept: int) -> ModelState:
        """The committed state after the first ``n_accept`` verified tokens (0..n); ``state``
        is not modified. KDA: exact replay of the ring's (rawk, rawv, g, beta) from
        ``state.kda[j].S`` and the conv window of step n_accept - 1 (unchanged for 0); MLA: the
        accepted tokens' latents appended. The rejected tail's ring entries are invalidated."""
        if self._open is None or result is not self._open[0]:
            raise ValueError("result must be the latest uncommitted verify of this ReplaySSM")
        self.model.check_state(state)
        if state.tokens != self._open[1]:  # the same tokens: the same boundary too
            raise ValueError(
                f"state must be the state that was verified (boundary {result.start}), "
                f"got one at boundary {state.boundary}"
            )
        n = len(result.tokens)
        a = check_int("n_accept", n_accept, 0, n)
        kda_states = []
        for j, st in enumerate(state.kda):
            ring = self.rings[j]
            if a:
                exact = (ring.read(f, result.start, a) for f in ("rawk", "rawv", "g", "beta"))
                S = exact_replay(st.S, *exact)
                kda_states.append(KDALayerState(S, self.conv_windows[j, a - 1].copy()))
            else:
                kda_states.append(KDALayerState(st.S.copy(), st.conv.copy()))
            ring.pos[ring.slots(result.start + a, n - a)] = -1  # the rejected tail: unreadable
        self._open = None
        mla = np.concatenate([state.mla_kv, result.mla_latents[:a]])
        toks = state.tokens + list(result.tokens[:a])
        return ModelState(kda_states, mla, toks, state.version, state.fingerprint)

    @property
    def ring_nbytes(self) -> int:
        """Bytes of all rings (float64 here)."""
        return sum(x.nbytes for r in self.rings for x in r.data.values())

    @property
    def conv_window_nbytes(self) -> int:
        return int(self.conv_windows.nbytes)

    @property
    def per_draft_state_nbytes(self) -> int:
        """What the naive approach would hold instead of the rings: D states per KDA layer."""
        c = self.model.config
        return self.draft_tokens * len(self.rings) * c.n_heads * c.head_dim * c.head_dim * 8
