"""Speculative decoding on TinyHybrid with ReplaySSM: verify D tokens, commit a prefix exactly.

A verify step feeds D tokens (the pending token + D-1 draft tokens) through the model from the
committed state. A plain implementation keeps a full KDA state per draft token
(``[layers, D, H, K, V]``) so it can later keep the one at the accepted length. ReplaySSM (SGLang
``--enable-linear-replayssm-spec``, third seed) keeps none of them. Per KDA layer it keeps the
checkpoint S0 (the committed, full-precision state) and ring buffers of length L (a power of
two, L >= 2D, default ``next_pow2(2D)``: 16 for D = 8) indexed by absolute token position
``p & (L - 1)``. Per token, per head:

* (d, k, g) — the fast group. ``d_t = beta_t (v_t - (Diag(alpha_t) S_{t-1})^T k_t)`` is the
  rank-1 write of token t. Every state inside the segment is
  ``S_m = Diag(A_1..m) S0 + sum_j (k_j * A_j+1..m) d_j^T`` (A = products of alpha = exp of
  cumulative g), so outputs ``o_t = scale S_t^T q_t`` are rebuilt from S0 and the ring alone,
  with no per-token state ever materialised (``ring_verify``, ``reconstruct_outputs``).
* (rawv, rawk, g, beta) — the exact group. Commit replays the accepted prefix from S0 in the
  recurrent order: ``k = rawk / sqrt(|rawk|^2 + eps)``, ``S = alpha S``,
  ``d = beta (rawv - S^T k)``, ``S += k d^T`` (``exact_replay``). It never folds the stored d,
  whose errors (SGLang keeps d in bf16) would otherwise leak into the persistent state.

The short-conv window is handled the SGLang way: the verify saves the window after each draft
step (``intermediate_conv_window[step]``) and commit copies the one of the last accepted step.
MLA layers keep the latent KV of accepted tokens only. Rejected tokens leave no trace in the
committed ``ModelState`` (their ring entries are invalidated too).

Layouts here: state [H, K, V] (key-major, as kda.py); ring fields [L, H, *]; intermediate conv
windows [n_kda, D, W-1, 3*H*K]. Everything is float64, so rings and states cost 8 B per element
here; ``spec_memory`` gives the serving sizes (bf16 / fp32) through ``kda_core.sizing``.

Why L >= 2D (our reading of SGLang's rule): two consecutive verify windows [n, n+D) and
[n+a, n+a+D) (a <= D accepted) span at most 2D positions, so with L >= 2D the next verify never
overwrites an entry of the previous one while it may still be read (overlap scheduling).

Left out: batching, trees of drafts (only a chain), sampling other than greedy, a bf16 ring
(``quant.round_bf16`` shows what it would do to an open-loop fold), and the draft model's own cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core import kda, sizing
from kda_core.kda.conv import short_conv
from kda_core.model import (
    MAX_TOKENS,
    VOCAB,
    KDALayerState,
    ModelConfig,
    ModelState,
    TinyHybrid,
    check_tokens,
    encode,
)

MAX_DRAFT_TOKENS = 64  # D cap: verify cost and the [D, D, H, K] pairwise decays stay small
MAX_RING_LEN = 1024
RING_FIELDS: tuple[str, ...] = ("d", "k", "g", "rawv", "rawk", "beta")
L2_EPS = 1e-6  # kda.l2norm's eps: the same normalisation the model applies to k


# --------------------------------------------------------------------------------------------
# validation


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


def check_draft_tokens(draft_tokens: object) -> int:
    """D, the tokens verified per step (pending token included): an integer in [1, 64]."""
    return _check_int("draft_tokens", draft_tokens, 1, MAX_DRAFT_TOKENS)


def check_ring_len(ring_len: object, draft_tokens: int) -> int:
    """L: None -> next_pow2(2D); otherwise a power of two in [2D, 1024] (ValueError if not)."""
    d = check_draft_tokens(draft_tokens)
    if ring_len is None:
        return sizing.default_ring_len(d)
    n = _check_int("ring_len", ring_len, 1, MAX_RING_LEN)
    if n & (n - 1):
        raise ValueError(f"ring_len must be a power of two (>= 2*draft_tokens = {2 * d}), got {n}")
    if n < 2 * d:
        raise ValueError(
            f"ring_len must be >= 2*draft_tokens = {2 * d} (and a power of two), got {n}"
        )
    return n


def _segment_inputs(S0, q, k, g, name_v: str, v=None, beta=None):
    S0 = np.asarray(S0, dtype=np.float64)
    if S0.ndim != 3:
        raise ValueError(f"S0 must have shape [H, K, V], got {S0.shape}")
    H, K, V = S0.shape
    k = np.asarray(k, dtype=np.float64)
    if k.ndim != 3 or k.shape[1:] != (H, K) or not 1 <= k.shape[0] <= MAX_DRAFT_TOKENS:
        raise ValueError(
            f"k must have shape [n, H, K] = [n, {H}, {K}] with n in [1, {MAX_DRAFT_TOKENS}], "
            f"got {k.shape}"
        )
    n = k.shape[0]
    g = np.asarray(g, dtype=np.float64)
    if g.shape != (n, H, K):
        raise ValueError(f"g must have shape [n, H, K] = {(n, H, K)}, got {g.shape}")
    if np.any(g > 0):
        raise ValueError(f"g is a log decay and must be <= 0, got max {g.max():.3g}")
    if q is not None:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (n, H, K):
            raise ValueError(f"q must have shape [n, H, K] = {(n, H, K)}, got {q.shape}")
    if v is not None:
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (n, H, V):
            raise ValueError(f"{name_v} must have shape [n, H, V] = {(n, H, V)}, got {v.shape}")
    if beta is not None:
        beta = np.asarray(beta, dtype=np.float64)
        if beta.shape != (n, H):
            raise ValueError(f"beta must have shape [n, H] = {(n, H)}, got {beta.shape}")
    return S0, q, k, g, v, beta


# --------------------------------------------------------------------------------------------
# per-layer math (pure functions of one KDA layer's segment)


class SegmentOutputs(NamedTuple):
    """A verify segment of n tokens: o [n, H, V], d [n, H, V] and, for the naive twin only,
    the per-draft states [n, H, K, V] (None for the ring path)."""

    o: np.ndarray
    d: np.ndarray
    states: np.ndarray | None


def _pair_decay(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gam = inclusive cumsum of g [n, H, K] and exp(Gam_t - Gam_j) for j <= t (0 above)."""
    Gam = np.cumsum(g, axis=0)
    n = g.shape[0]
    causal = np.tril(np.ones((n, n), bool))[:, :, None, None]
    diff = np.where(causal, Gam[:, None] - Gam[None, :], -np.inf)  # every kept exponent <= 0
    return Gam, np.exp(diff)  # [n, H, K], [n, n, H, K]


def ring_verify(S0, q, k, v, g, beta, *, scale: float | None = None) -> SegmentOutputs:
    """ReplaySSM verify of one layer: outputs and ring d from S0 without any per-token state.

    With A(t, j) = exp(Gam_t - Gam_j) (decay from after token j to token t), for t = 1..n:
        d_t = beta_t (v_t - S0^T (e^Gam_t * k_t) - sum_{j<t} <k_t, A(t, j) k_j> d_j)
        o_t = scale (S0^T (e^Gam_t * q_t) + sum_{j<=t} <q_t, A(t, j) k_j> d_j)
    i.e. a unit lower-triangular solve for d (the UT transform of the chunked form).
    S0 [H, K, V]; q, k, g [n, H, K]; v [n, H, V]; beta [n, H]; n <= 64.
    """
    S0, q, k, g, v, beta = _segment_inputs(S0, q, k, g, "v", v, beta)
    K = S0.shape[1]
    scale = K**-0.5 if scale is None else float(scale)
    Gam, A = _pair_decay(g)
    E = np.exp(Gam)
    kk = np.einsum("thc,jhc,tjhc->tjh", k, k, A)  # [n, n, H]
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    base = np.einsum("thk,hkv->thv", E * k, S0)
    d = np.empty_like(v)
    for t in range(k.shape[0]):
        acc = v[t] - base[t] - np.einsum("jh,jhv->hv", kk[t, :t], d[:t])
        d[t] = beta[t][:, None] * acc
    o = scale * (np.einsum("thk,hkv->thv", E * q, S0) + np.einsum("tjh,jhv->thv", qk, d))
    return SegmentOutputs(o, d, None)


def per_draft_states(S0, q, k, v, g, beta, *, scale: float | None = None) -> SegmentOutputs:
    """The naive twin: step the recurrence token by token and keep every state [n, H, K, V]."""
    S0, q, k, g, v, beta = _segment_inputs(S0, q, k, g, "v", v, beta)
    K = S0.shape[1]
    scale = K**-0.5 if scale is None else float(scale)
    S = S0.copy()
    n = k.shape[0]
    states = np.empty((n,) + S.shape)
    d = np.empty_like(v)
    o = np.empty_like(v)
    for t in range(n):
        S = np.exp(g[t])[:, :, None] * S
        d[t] = beta[t][:, None] * (v[t] - np.einsum("hk,hkv->hv", k[t], S))
        S = S + k[t][:, :, None] * d[t][:, None, :]
        states[t] = S
        o[t] = scale * np.einsum("hk,hkv->hv", q[t], S)
    return SegmentOutputs(o, d, states)


def reconstruct_outputs(S0, q, d, k, g, *, scale: float | None = None) -> np.ndarray:
    """Outputs o [n, H, V] rebuilt from the checkpoint S0 and the ring's (d, k, g) plus q."""
    S0, q, k, g, d, _ = _segment_inputs(S0, q, k, g, "d", d)
    K = S0.shape[1]
    scale = K**-0.5 if scale is None else float(scale)
    Gam, A = _pair_decay(g)
    qk = np.einsum("thc,jhc,tjhc->tjh", q, k, A)
    o0 = np.einsum("thk,hkv->thv", np.exp(Gam) * q, S0)
    return scale * (o0 + np.einsum("tjh,jhv->thv", qk, d))


def fold_state(S0, d, k, g) -> np.ndarray:
    """Open-loop fold of the fast group: S_n = Diag(e^Gam_n) S0 + sum_j (k_j A(n, j)) d_j^T.

    Exact in exact arithmetic; with a rounded d (bf16 in SGLang) its error enters the state,
    which is why commit uses ``exact_replay`` instead.
    """
    S0, _, k, g, d, _ = _segment_inputs(S0, None, k, g, "d", d)
    Gam = np.cumsum(g, axis=0)
    kt = k * np.exp(Gam[-1][None] - Gam)  # [n, H, K]
    return np.exp(Gam[-1])[:, :, None] * S0 + np.einsum("jhk,jhv->hkv", kt, d)


def exact_replay(S0, rawk, rawv, g, beta) -> tuple[np.ndarray, np.ndarray]:
    """Commit: replay (rawv, rawk, g, beta) from the full-precision S0 in recurrent order.

    Per token (the seed's four lines): k = rawk / sqrt(|rawk|^2 + eps); S = Diag(alpha) S;
    d = beta (rawv - S^T k); S = S + k d^T. Returns (S [H, K, V], recomputed d [n, H, V]).
    """
    S0, _, rawk, g, rawv, beta = _segment_inputs(S0, None, rawk, g, "rawv", rawv, beta)
    k = kda.l2norm(rawk, L2_EPS)
    S = S0.copy()
    d = np.empty_like(rawv)
    for t in range(k.shape[0]):
        S *= np.exp(g[t])[:, :, None]  # decay
        resid = rawv[t] - np.einsum("hk,hkv->hv", k[t], S)  # residual on the decayed state
        d[t] = beta[t][:, None] * resid  # times beta
        S += k[t][:, :, None] * d[t][:, None, :]  # rank-1 update
    return S, d


# --------------------------------------------------------------------------------------------
# ring buffers


@dataclass(slots=True)
class LayerRing:
    """One KDA layer's six ring buffers of length L (a power of two), indexed by position.

    d, rawv [L, H, V]; k, g, rawk [L, H, K]; beta [L, H]; pos [L] the absolute token position
    each slot holds (-1: empty or invalidated). Invariant: slot ``p & (L - 1)`` holds position p
    or something else, never a stale entry labelled p.
    """

    d: np.ndarray
    k: np.ndarray
    g: np.ndarray
    rawv: np.ndarray
    rawk: np.ndarray
    beta: np.ndarray
    pos: np.ndarray

    @staticmethod
    def empty(ring_len: int, H: int, K: int, V: int) -> LayerRing:
        L = ring_len
        return LayerRing(
            np.zeros((L, H, V)),
            np.zeros((L, H, K)),
            np.zeros((L, H, K)),
            np.zeros((L, H, V)),
            np.zeros((L, H, K)),
            np.zeros((L, H)),
            np.full(L, -1, np.int64),
        )

    @property
    def ring_len(self) -> int:
        return int(self.pos.shape[0])

    def slots(self, start: int, n: int) -> np.ndarray:
        return (start + np.arange(n)) & (self.ring_len - 1)

    def write(self, start: int, **fields: np.ndarray) -> None:
        n = fields["d"].shape[0]
        if n > self.ring_len:
            raise ValueError(f"cannot write {n} entries into a ring of length {self.ring_len}")
        idx = self.slots(start, n)
        for name in RING_FIELDS:
            getattr(self, name)[idx] = fields[name]
        self.pos[idx] = start + np.arange(n)

    def read(self, name: str, start: int, n: int) -> np.ndarray:
        """Entries of positions start..start+n-1 (ValueError if any was overwritten)."""
        if name not in RING_FIELDS:
            raise ValueError(f"name must be one of {RING_FIELDS}, got {name!r}")
        idx = self.slots(start, n)
        if not np.array_equal(self.pos[idx], start + np.arange(n)):
            raise ValueError(f"ring no longer holds positions {start}..{start + n - 1}")
        return getattr(self, name)[idx].copy()

    def invalidate(self, start: int, n: int) -> None:
        idx = self.slots(start, n)
        mine = self.pos[idx] == start + np.arange(n)
        self.pos[idx[mine]] = -1
        for name in RING_FIELDS:
            getattr(self, name)[idx[mine]] = 0.0

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in RING_FIELDS)


# --------------------------------------------------------------------------------------------
# verify / commit on TinyHybrid


class VerifyResult(NamedTuple):
    """One verify step. n = len(tokens) <= D.

    logits [n, VOCAB] (row i predicts the token after tokens[i]); q [n_kda, n, H, K] (what the
    fast reconstruction needs besides the ring); o [n_kda, n, H, V] the KDA outputs the verify
    used; mla_latents [n, n_mla, C]; epoch ties the result to the ring contents it wrote.
    """

    start: int
    tokens: tuple[int, ...]
    logits: np.ndarray
    q: np.ndarray
    o: np.ndarray
    mla_latents: np.ndarray
    epoch: int


class ReplaySSM:
    """ReplaySSM speculative verify/commit for one request of a TinyHybrid.

    ``verify(state, tokens)`` runs up to D tokens from the committed ``state`` (not modified),
    writing the rings and the per-step conv windows; ``commit(state, result, n_accept)`` returns
    the new committed state after the first ``n_accept`` tokens (0..n) by exact replay.
    Commit must follow the verify it commits (a later verify invalidates older results).
    """

    def __init__(
        self, model: TinyHybrid, draft_tokens: int = 8, ring_len: int | None = None
    ) -> None:
        if not isinstance(model, TinyHybrid):
            raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
        self.model = model
        self.draft_tokens = check_draft_tokens(draft_tokens)
        self.ring_len = check_ring_len(ring_len, self.draft_tokens)
        c = model.config
        H, K, W = c.n_heads, c.head_dim, c.conv_size
        self.rings = [LayerRing.empty(self.ring_len, H, K, K) for _ in model.kda_layers]
        self.conv_windows = np.zeros((len(model.kda_layers), self.draft_tokens, W - 1, 3 * H * K))
        self._kda_index = {layer: j for j, layer in enumerate(model.kda_layers)}
        self._mla_index = {layer: j for j, layer in enumerate(model.mla_layers)}
        self._epoch = 0
        self._open: VerifyResult | None = None
        self._open_tokens: list[int] = []

    # -- verify ----------------------------------------------------------------------------

    def verify(self, state: ModelState, tokens: Sequence[int]) -> VerifyResult:
        """Run ``tokens`` (1..D of them) after ``state``; fill rings and conv windows."""
        model = self.model
        model.check_state(state)
        ids = check_tokens(tokens, name="tokens")
        if len(ids) > self.draft_tokens:
            raise ValueError(
                f"tokens: at most draft_tokens = {self.draft_tokens} per verify, got {len(ids)}"
            )
        start = state.boundary
        if start + len(ids) > MAX_TOKENS:
            raise ValueError(f"tokens: a request holds at most {MAX_TOKENS} tokens in all")
        c = model.config
        n, H, K, W = len(ids), c.n_heads, c.head_dim, c.conv_size
        HK = H * K
        self._epoch += 1
        x = model.embed[ids]
        qs = np.empty((len(self.rings), n, H, K))
        os_ = np.empty((len(self.rings), n, H, K))
        lats = []
        for layer, kind in enumerate(model.layer_kinds):
            h = model.norm1(layer, x)
            if kind == "kda":
                j = self._kda_index[layer]
                st = state.kda[j]
                f = model.kda_features(layer, h, st.conv)
                act, _ = short_conv(f.raw, model.blocks[layer].mixer.conv_w, st.conv, "silu")
                rawk = act[:, HK : 2 * HK].reshape(n, H, K)  # pre-normalisation key
                rawv = act[:, 2 * HK :].reshape(n, H, K)  # the value before the delta rule
                full = np.concatenate([st.conv, f.raw], axis=0)
                for t in range(n):  # window after consuming token t (intermediate_conv_window)
                    self.conv_windows[j, t] = full[t + 1 : t + W]
                seg = ring_verify(st.S, f.q, f.k, f.v, f.g, f.beta)
                self.rings[j].write(start, d=seg.d, k=f.k, g=f.g, rawv=rawv, rawk=rawk, beta=f.beta)
                qs[j], os_[j] = f.q, seg.o
                y = model.kda_readout(layer, h, seg.o)
            else:
                y, lat = model.mla_mixer(layer, h, state.mla_kv[:, self._mla_index[layer]])
                lats.append(lat)
            x = x + y
            x = x + model.mlp(layer, x)
        res = VerifyResult(
            start, tuple(ids), model.logits(x), qs, os_, np.stack(lats, axis=1), self._epoch
        )
        self._open = res
        self._open_tokens = list(state.tokens)
        return res

    # -- commit ----------------------------------------------------------------------------

    def commit(self, state: ModelState, result: VerifyResult, n_accept: int) -> ModelState:
        """New committed state after the first ``n_accept`` verified tokens (0..n).

        KDA: exact replay of (rawv, rawk, g, beta) from the checkpoint ``state.kda[j].S``; conv
        window = the intermediate window of step n_accept - 1 (unchanged for 0); MLA: latents
        of the accepted tokens appended. The rejected tail's ring entries are invalidated.
        ``state`` itself is not modified.
        """
        if not isinstance(result, VerifyResult):
            raise ValueError(f"result must be a VerifyResult, got {type(result).__name__}")
        if self._open is None or result.epoch != self._epoch:
            raise ValueError("result must be the latest uncommitted verify of this ReplaySSM")
        self.model.check_state(state)
        if state.boundary != result.start or state.tokens != self._open_tokens:
            raise ValueError(
                f"state must be the state that was verified (boundary {result.start}), "
                f"got one at boundary {state.boundary}"
            )
        n = len(result.tokens)
        a = _check_int("n_accept", n_accept, 0, n)
        new_kda = []
        for j, st in enumerate(state.kda):
            ring = self.rings[j]
            if a:
                S, _ = exact_replay(
                    st.S,
                    ring.read("rawk", result.start, a),
                    ring.read("rawv", result.start, a),
                    ring.read("g", result.start, a),
                    ring.read("beta", result.start, a),
                )
                conv = self.conv_windows[j, a - 1].copy()
            else:
                S, conv = st.S.copy(), st.conv.copy()
            new_kda.append(KDALayerState(S, conv))
            ring.invalidate(result.start + a, n - a)
        self._open = None
        mla = np.concatenate([state.mla_kv, result.mla_latents[:a]], axis=0)
        return ModelState(
            new_kda, mla, state.tokens + list(result.tokens[:a]), state.version, state.fingerprint
        )

    # -- inspection ------------------------------------------------------------------------

    def reconstruct(self, state: ModelState, result: VerifyResult, j: int) -> np.ndarray:
        """KDA layer j's outputs [n, H, V] rebuilt from S0 = state.kda[j].S and the ring.

        Call it between verify and commit (commit invalidates the rejected tail's entries).
        """
        j = _check_int("j", j, 0, len(self.rings) - 1)
        n = len(result.tokens)
        ring = self.rings[j]
        return reconstruct_outputs(
            state.kda[j].S,
            result.q[j],
            ring.read("d", result.start, n),
            ring.read("k", result.start, n),
            ring.read("g", result.start, n),
        )

    @property
    def ring_nbytes(self) -> int:
        """Bytes of all rings (float64 here)."""
        return sum(r.nbytes for r in self.rings)

    @property
    def conv_window_nbytes(self) -> int:
        return int(self.conv_windows.nbytes)

    @property
    def per_draft_state_nbytes(self) -> int:
        """What the naive approach would hold instead of the rings: D states per KDA layer."""
        c = self.model.config
        return self.draft_tokens * len(self.rings) * c.n_heads * c.head_dim * c.head_dim * 8


# --------------------------------------------------------------------------------------------
# memory: ReplaySSM rings vs a full state per draft token


def tiny_spec(config: ModelConfig | None = None) -> sizing.ModelSpec:
    """The TinyHybrid config as a ``sizing.ModelSpec`` (so its serving bytes use one formula)."""
    c = config or ModelConfig()
    kinds = c.layer_kinds
    return sizing.ModelSpec(
        name="k3-mini",
        n_kda_layers=kinds.count("kda"),
        n_mla_layers=kinds.count("mla"),
        kda_heads=c.n_heads,
        head_k_dim=c.head_dim,
        head_v_dim=c.head_dim,
        conv_kernel=c.conv_size,
        kv_lora_rank=c.mla_latent,
        qk_rope_head_dim=0,
        mla_heads=c.mla_heads,
    )


class SpecMemory(NamedTuple):
    """Speculative-verify buffers of ONE request on one GPU (bytes).

    ring_bytes: the six ReplaySSM rings (d, k, rawv, rawk in ``dtype``; g, beta float32);
    per_draft_state_bytes: the naive alternative, D full states [L_kda, D, h, K, V] in ``dtype``;
    conv_window_bytes: the per-step conv windows both approaches need; ratio = naive / rings.
    """

    model: str
    draft_tokens: int
    ring_len: int
    tp: int
    dtype: str
    ring_bytes: dict[str, int]
    ring_total: int
    per_draft_state_bytes: int
    conv_window_bytes: int
    ratio: float


def spec_memory(
    spec: sizing.ModelSpec | str,
    draft_tokens: int = 8,
    ring_len: int | None = None,
    tp: int = 1,
    dtype: str = "bfloat16",
) -> SpecMemory:
    """Rings vs per-draft states for one request (``kda_core.sizing`` arithmetic).

    Kimi K3 at TP8, bf16, D = 8, L = 16: rings 295,680 B per KDA layer vs 3,145,728 B of
    per-draft states (x10.6).
    """
    d = check_draft_tokens(draft_tokens)
    L = check_ring_len(ring_len, d)
    spec = sizing.preset(spec) if isinstance(spec, str) else spec
    rings = sizing.replayssm_ring_bytes(spec, 1, tp, L, dtype)
    naive = sizing.intermediate_ssm_bytes(spec, 0, d, tp, dtype, replayssm=False)
    conv = sizing.intermediate_conv_window_bytes(spec, 0, d, tp, dtype)
    total = sum(rings.values())
    return SpecMemory(spec.name, d, L, tp, dtype, rings, total, naive, conv, naive / total)


# --------------------------------------------------------------------------------------------
# toy drafts and the speculative generation loop

# A draft proposes n tokens to follow ``history`` (whose last token is the pending one, not yet
# consumed by ``state``). It may use the committed state (e.g. the target with noise).
Draft = Callable[[list[int], ModelState, int], list[int]]


def ngram_draft(history: Sequence[int], n: int, order: int = 3) -> list[int]:
    """Prompt-lookup draft: copy what followed the latest earlier occurrence of the longest
    suffix (<= ``order`` tokens) of the history; the last token again when nothing matches."""
    n = _check_int("n", n, 0, MAX_DRAFT_TOKENS)
    order = _check_int("order", order, 1, 16)
    hist = list(check_tokens(history, name="history"))
    out: list[int] = []
    for _ in range(n):
        nxt = hist[-1]
        for m in range(min(order, len(hist) - 1), 0, -1):
            suffix = hist[-m:]
            found = False
            for s in range(len(hist) - m - 1, -1, -1):  # latest earlier occurrence first
                if hist[s : s + m] == suffix:
                    nxt, found = hist[s + m], True
                    break
            if found:
                break
        out.append(nxt)
        hist.append(nxt)
    return out


def make_noisy_draft(model: TinyHybrid, noise: float = 0.2, seed: int = 0) -> Draft:
    """The target itself with Gaussian noise (std ``noise`` x the logits' std) on its logits:
    greedy on the noisy logits from the committed state. noise = 0 is a perfect draft."""
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise <= 100:
        raise ValueError(f"noise must be a number in [0, 100], got {noise!r}")
    rng = np.random.default_rng(seed)

    def draft(history: list[int], state: ModelState, n: int) -> list[int]:
        out: list[int] = []
        tok, st = history[-1], state
        for _ in range(n):
            logits, st = model.forward([tok], st)
            z = logits[-1]
            tok = int(np.argmax(z + noise * z.std() * rng.standard_normal(z.shape)))
            out.append(tok)
        return out

    return draft


def accept_length(inputs: Sequence[int], logits: np.ndarray) -> int:
    """Greedy acceptance of a verify whose inputs[0] is the pending (already decided) token:
    1 + the number of leading drafts inputs[i] equal to argmax(logits[i-1]). In [1, n]."""
    ids = check_tokens(inputs, name="inputs")
    logits = np.asarray(logits)
    if logits.ndim != 2 or logits.shape[0] != len(ids):
        raise ValueError(f"logits must have shape [n, vocab] with n={len(ids)}, got {logits.shape}")
    targets = np.argmax(logits, axis=1)
    a = 1
    while a < len(ids) and ids[a] == targets[a - 1]:
        a += 1
    return a


class StepRecord(NamedTuple):
    """One verify step: inputs = pending token + drafts; accepted = drafts accepted (the pending
    token is always committed, so committed = accepted + 1); emitted = new output tokens."""

    start: int
    inputs: tuple[int, ...]
    targets: tuple[int, ...]  # the target's greedy token after each input
    accepted: int
    committed: int
    emitted: tuple[int, ...]


class SpecGeneration(NamedTuple):
    """Result of ``speculative_generate``. tokens / logits match ``TinyHybrid.generate``."""

    tokens: list[int]
    logits: np.ndarray  # [n, VOCAB]: the logits each emitted token was the argmax of
    steps: tuple[StepRecord, ...]
    drafted: int  # draft tokens proposed (verified)
    accepted: int  # draft tokens accepted
    acceptance_rate: float  # accepted / drafted (0 when nothing was drafted)
    tokens_per_step: float  # emitted tokens per verify (1 + mean accepted)
    state: ModelState  # committed state: prompt + all emitted tokens but the last


def speculative_generate(
    model: TinyHybrid,
    prompt: Sequence[int] | str,
    max_new_tokens: int,
    *,
    draft: str | Draft = "noisy",
    draft_tokens: int = 8,
    ring_len: int | None = None,
    noise: float = 0.2,
    seed: int = 0,
) -> SpecGeneration:
    """Greedy speculative decoding with ReplaySSM verify/commit.

    Each step verifies [pending] + (D-1) draft tokens, accepts drafts while each equals the
    target's greedy token after its predecessor, commits 1 + accepted tokens by exact replay,
    and takes the target's token after the last accepted one as the new pending token. The
    emitted tokens equal ``model.generate(prompt, max_new_tokens)`` exactly (greedy is decided
    by the target's own logits); only the number of forward passes changes.
    ``draft``: "noisy" (``make_noisy_draft(model, noise, seed)``, the default), "ngram"
    (``ngram_draft``: it hits where the greedy text repeats what came before) or a callable
    ``(history, state, n) -> tokens``.
    """
    max_new_tokens = _check_int("max_new_tokens", max_new_tokens, 0, 4096)
    ids = check_tokens(encode(prompt) if isinstance(prompt, str) else prompt, name="prompt")
    if draft == "ngram":
        fn: Draft = lambda hist, st, n: ngram_draft(hist, n)  # noqa: E731
    elif draft == "noisy":
        fn = make_noisy_draft(model, noise, seed)
    elif callable(draft):
        fn = draft
    else:
        raise ValueError(f"draft must be 'ngram', 'noisy' or a callable, got {draft!r}")
    rs = ReplaySSM(model, draft_tokens, ring_len)
    state = model.new_state()
    last = model.prefill(ids, state)[-1]
    if max_new_tokens == 0:
        return SpecGeneration([], np.zeros((0, VOCAB)), (), 0, 0, 0.0, 0.0, state)
    pending = int(np.argmax(last))
    tokens, logits = [pending], [last]
    steps: list[StepRecord] = []
    while len(tokens) < max_new_tokens:
        n = min(rs.draft_tokens, max_new_tokens - len(tokens))
        proposal = check_tokens(fn(state.tokens + [pending], state, n - 1), allow_empty=True)
        if len(proposal) != n - 1:
            raise ValueError(f"draft must return {n - 1} tokens, got {len(proposal)}")
        inputs = [pending] + proposal
        res = rs.verify(state, inputs)
        targets = [int(t) for t in np.argmax(res.logits, axis=1)]
        a = accept_length(inputs, res.logits)
        state = rs.commit(state, res, a)
        pending = targets[a - 1]
        emitted = tuple(inputs[1:a]) + (pending,)
        tokens.extend(emitted)
        logits.extend(res.logits[:a])
        steps.append(StepRecord(res.start, tuple(inputs), tuple(targets), a - 1, a, emitted))
    drafted = sum(len(s.inputs) - 1 for s in steps)
    accepted = sum(s.accepted for s in steps)
    return SpecGeneration(
        tokens,
        np.array(logits),
        tuple(steps),
        drafted,
        accepted,
        accepted / drafted if drafted else 0.0,
        (len(tokens) - 1) / len(steps) if steps else 0.0,
        state,
    )
