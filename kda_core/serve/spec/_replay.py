"""ReplaySSM on TinyHybrid: ring buffers per KDA layer, verify D tokens, commit a prefix exactly
(rings of length L >= 2D indexed by ``p & (L - 1)``, the conv window after each verified step;
derivations, layouts and the L >= 2D rule: docs/speculative.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int
from kda_core.kda.conv import short_conv
from kda_core.model import MAX_TOKENS, KDALayerState, ModelState, TinyHybrid, check_tokens
from kda_core.serve.spec._segment import (
    RING_FIELDS,
    check_draft_tokens,
    check_ring_len,
    exact_replay,
    ring_verify,
)


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

    @property
    def ring_len(self) -> int:
        return int(self.pos.shape[0])

    def slots(self, start: int, n: int) -> np.ndarray:
        return (start + np.arange(n)) & (self.ring_len - 1)

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
