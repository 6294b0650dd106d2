"""ReplaySSM on TinyHybrid: ring buffers per KDA layer, verify D tokens, commit a prefix exactly.

``ReplaySSM.verify`` feeds D tokens from the committed state without a state per draft token
(rings of length L >= 2D indexed by ``p & (L - 1)``; intermediate conv windows per step);
``commit`` replays the accepted prefix in the recurrent order from the exact ring group
(``segment.exact_replay``) and copies the conv window of the last accepted step; rejected
tokens leave no trace. Derivations, layouts and the L >= 2D rule: docs/speculative.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int
from kda_core.kda.conv import short_conv
from kda_core.model import (
    MAX_TOKENS,
    KDALayerState,
    ModelState,
    TinyHybrid,
    check_tokens,
)
from kda_core.serve.spec._segment import (
    RING_FIELDS,
    check_draft_tokens,
    check_ring_len,
    exact_replay,
    ring_verify,
)


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

    def _invalidate(self, start: int, n: int) -> None:
        idx = self.slots(start, n)
        mine = self.pos[idx] == start + np.arange(n)
        self.pos[idx[mine]] = -1
        for name in RING_FIELDS:
            getattr(self, name)[idx[mine]] = 0.0

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in RING_FIELDS)


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
                o, d = ring_verify(st.S, f.q, f.k, f.v, f.g, f.beta)
                self.rings[j].write(start, d=d, k=f.k, g=f.g, rawv=rawv, rawk=rawk, beta=f.beta)
                qs[j], os_[j] = f.q, o
                y = model.kda_readout(layer, h, o)
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
        a = check_int("n_accept", n_accept, 0, n)
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
            ring._invalidate(result.start + a, n - a)
        self._open = None
        mla = np.concatenate([state.mla_kv, result.mla_latents[:a]], axis=0)
        return ModelState(
            new_kda, mla, state.tokens + list(result.tokens[:a]), state.version, state.fingerprint
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
