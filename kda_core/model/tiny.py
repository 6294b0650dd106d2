"""TinyHybrid ("k3-mini"): a scaled-down Kimi K3 that runs in milliseconds on a CPU.

Layers follow ``config.layer_types`` (default K3's pattern, 3 KDA : 1 MLA, ending on MLA);
pre-norm blocks ``x += mixer(rmsnorm(x)); x += mlp(rmsnorm(x))``. The KDA mixer is fla's
`KimiDeltaAttention` (short conv, L2-normalised q/k, sigmoid beta, gated per-head RMSNorm); the
MLA mixer caches one row per token and up-projects keys and values from it (NoPE). Variant
``k3``: K3's lower-bound gate, a full-rank output gate, a gated MLA; variant ``kimi-linear``:
every layer as transformers' ``KimiLinearForCausalLM`` (softplus gate, low-rank output gate,
a shared key part beside the latent), loaded by `TinyHybrid.from_hf` and written by `export_hf`
(``kda_core.model._hf``). docs/model.md has the layer-by-layer description and its sources.

`TinyHybrid()` loads the shipped trained weights (`kda_core.model._weights`; or the checkpoint
folder named by ``_CHECKPOINT_ENV``); `TinyHybrid(weights="random", seed=s)` draws the init
distributions instead. `prefill` / `decode_step` advance a `ModelState` in place; `forward` is
the pure version. `bits_per_byte` scores a text. Everything runs in float64, deterministic.

Left out: MoE, RoPE, sampling other than greedy, batching (`kda_core.model.batch` batches the
k3 variant), and the real K3 sizes (`kda_core.sizing.preset("kimi-k3")`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import overload

import numpy as np

from kda_core import kda
from kda_core.kda.conv import short_conv, silu
from kda_core.model import _hf
from kda_core.model import _weights as weights_file
from kda_core.model._arrays import (
    KDAWeights,
    KimiLinearKDAWeights,
    KimiLinearMLAWeights,
    MLAWeights,
    init_weights,
    named_arrays,
    weights_from_arrays,
)
from kda_core.model._functional import rmsnorm, sigmoid
from kda_core.model.params import ModelConfig
from kda_core.model.state import KDALayerState, ModelState
from kda_core.model.tokenizer import (
    MAX_TOKENS,
    TOKENIZER_FINGERPRINT,
    VOCAB,
    check_tokens,
    encode,
)

_CHECKPOINT_ENV = "KDA_LAB_CHECKPOINT"  # a Kimi-Linear folder that TinyHybrid() loads instead


def named_weights(model: TinyHybrid) -> dict[str, np.ndarray]:
    """Every parameter of ``model`` by name (views, not copies): the keys of the weights file."""
    return named_arrays(model.embed, model.blocks, model.final_norm, model.lm_head)


@dataclass(slots=True)
class _KDAFeatures:
    """What the KDA recurrence consumes for T tokens of one layer, plus the advanced window."""

    q: np.ndarray  # [T, H, K] L2-normalised
    k: np.ndarray  # [T, H, K] L2-normalised
    v: np.ndarray  # [T, H, V]
    g: np.ndarray  # [T, H, K] log decay in (lower_bound, 0)
    beta: np.ndarray  # [T, H]
    raw: np.ndarray  # [T, 3*H*K] raw q|k|v projections (what the conv window stores)
    window: np.ndarray  # [W-1, 3*H*K] conv window after these tokens


class TinyHybrid:
    """The tiny K3 (or a Kimi-Linear checkpoint: `from_hf`). `prefill`/`decode_step` advance a
    ModelState in place and return logits."""

    def __init__(
        self,
        config: ModelConfig | None = None,
        *,
        weights: str | Path | dict[str, np.ndarray] = "trained",
        seed: int | None = None,
    ) -> None:
        """weights: "trained" (the shipped file; with no config and the environment variable
        ``_CHECKPOINT_ENV`` set, the Kimi-Linear checkpoint folder it names instead), "random"
        (init from ``seed`` / config.seed), a path to a weights .npz, or a dict of named arrays
        (what `kda_core.model.train` returns)."""
        folder = os.environ.get(_CHECKPOINT_ENV)
        if folder and config is None and isinstance(weights, str) and weights == "trained":
            config, weights = _hf.read(folder)
        cfg = config or ModelConfig()
        if seed is not None:
            if weights != "random":
                raise ValueError(f"seed applies to weights='random' only, got weights={weights!r}")
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
            cfg = replace(cfg, seed=int(seed))
        self.config = cfg
        if isinstance(weights, str) and weights == "random":
            self.embed, self.blocks, self.final_norm, self.lm_head = init_weights(cfg)
            tag = "random"
        else:
            if isinstance(weights, dict):
                arrays, tag = weights, "arrays"
            elif isinstance(weights, Path) or weights == "trained":
                path = weights_file.DEFAULT_PATH if weights == "trained" else weights
                arrays = weights_file.load(path)[0]
                tag = weights_file.digest(path)[:16]
            else:
                raise ValueError(
                    f"weights must be 'trained', 'random', a Path or a dict, got {weights!r}"
                )
            if cfg.seed != ModelConfig().seed:
                raise ValueError(
                    f"config.seed={cfg.seed} selects random weights: pass "
                    "weights='random' (trained weights have no seed)"
                )
            self.embed, self.blocks, self.final_norm, self.lm_head = weights_from_arrays(
                cfg, arrays
            )
        self.weights = tag  # "random", "arrays" or the first 16 hex digits of the file's sha256
        kinds = self.config.layer_kinds
        self.layer_kinds = kinds
        self.kda_layers = tuple(i for i, k in enumerate(kinds) if k == "kda")
        self.mla_layers = tuple(i for i, k in enumerate(kinds) if k == "mla")
        self._slot = {layer: j for j, layer in enumerate(self.kda_layers)}
        self._slot.update({layer: j for j, layer in enumerate(self.mla_layers)})
        if tag == "arrays":  # no file hash: fingerprint the arrays themselves
            tag = hashlib.sha256(b"".join(a.tobytes() for a in named_weights(self).values()))
            tag = tag.hexdigest()[:16]
        ident = repr(self.config) + ("" if tag == "random" else tag)
        name = "k3-mini-" if cfg.variant == "k3" else "kimi-linear-"
        self.version = name + hashlib.sha256(ident.encode()).hexdigest()[:12]

    @classmethod
    def from_hf(cls, folder: str | Path) -> TinyHybrid:
        """A small Kimi-Linear checkpoint (``config.json`` + safetensors, transformers'
        ``KimiLinearForCausalLM``) as the ``kimi-linear`` variant (`kda_core.model._hf`)."""
        config, arrays = _hf.read(folder)
        return cls(config, weights=arrays)

    # -- state -------------------------------------------------------------------------------

    def new_state(self) -> ModelState:
        c = self.config
        HK = c.n_heads * c.head_dim
        kda_states = [
            KDALayerState(
                np.zeros((c.n_heads, c.head_dim, c.head_dim)), np.zeros((c.conv_size - 1, 3 * HK))
            )
            for _ in self.kda_layers
        ]
        mla = np.zeros((0, len(self.mla_layers), c.mla_latent))
        return ModelState(kda_states, mla, [], self.version, TOKENIZER_FINGERPRINT)

    def check_state(self, state: ModelState) -> None:
        if not isinstance(state, ModelState):
            raise ValueError(f"state must be a ModelState, got {type(state).__name__}")
        if state.version != self.version or state.fingerprint != TOKENIZER_FINGERPRINT:
            raise ValueError(
                f"state was made by model {state.version!r} / tokenizer {state.fingerprint!r}, "
                f"this is {self.version!r} / {TOKENIZER_FINGERPRINT!r}"
            )
        if state.mla_kv.shape[0] != state.boundary:
            raise ValueError(
                f"state is inconsistent: MLA KV holds {state.mla_kv.shape[0]} tokens, "
                f"boundary is {state.boundary}"
            )

    # -- layers (pure: state in, state out) ----------------------------------------------------

    def kda_features(self, layer: int, h: np.ndarray, window: np.ndarray) -> _KDAFeatures:
        """Layer `layer`'s inputs to the recurrence for normed hidden states h [T, D]."""
        c = self.config
        w: KDAWeights = self.blocks[layer].mixer  # type: ignore[assignment]
        T, H, K = h.shape[0], c.n_heads, c.head_dim
        raw = h @ w.w_qkv
        act, new_window = short_conv(raw, w.conv_w, window, "silu")
        q, k, v = (act[:, i * H * K : (i + 1) * H * K].reshape(T, H, K) for i in range(3))
        f = ((h @ w.f_a) @ w.f_b).reshape(T, H, K)
        if c.variant == "k3":
            g = kda.lowerbound_gate(f, w.dt_bias, c.gate_lower_bound, A_log=w.A_log)
        else:  # transformers' KimiLinearForgetGate
            g = kda.softplus_gate(f, w.A_log, w.dt_bias)
        beta = sigmoid(h @ w.w_beta)
        return _KDAFeatures(kda.l2norm(q), kda.l2norm(k), v, g, beta, raw, new_window)

    def kda_readout(self, layer: int, h: np.ndarray, o: np.ndarray) -> np.ndarray:
        """Output projection of KDA outputs o [T, H, V] (gated per-head RMSNorm; the gate is
        full rank in k3, low rank in kimi-linear)."""
        w = self.blocks[layer].mixer
        if isinstance(w, KDAWeights):
            gate = sigmoid(h @ w.w_gate)
        else:
            assert isinstance(w, KimiLinearKDAWeights)
            gate = sigmoid((h @ w.g_a) @ w.g_b)
        y = rmsnorm(o, w.norm_w, self.config.norm_eps).reshape(o.shape[0], -1) * gate
        return y @ w.w_o

    def _kda_mixer(
        self, layer: int, h: np.ndarray, st: KDALayerState
    ) -> tuple[np.ndarray, KDALayerState]:
        f = self.kda_features(layer, h, st.conv)
        run = kda.chunked if h.shape[0] >= 16 else kda.recurrent
        o, S = run(f.q, f.k, f.v, f.g, f.beta, initial_state=st.S)
        return self.kda_readout(layer, h, o), KDALayerState(S, f.window)

    def mla_latent(self, layer: int, h: np.ndarray) -> np.ndarray:
        """The cached rows [T, mla_latent] of h [T, D]: the normed latent, then (kimi-linear)
        the key part shared by all heads, not normed."""
        c = self.config
        w = self.blocks[layer].mixer
        assert isinstance(w, (MLAWeights, KimiLinearMLAWeights))
        z = h @ w.w_dkv
        if isinstance(w, MLAWeights):
            return rmsnorm(z, w.norm_c, c.norm_eps)
        C = c.mla_kv_rank  # transformers' kv_a_layernorm keeps its default eps, 1e-6
        return np.concatenate([rmsnorm(z[:, :C], w.norm_c, 1e-6), z[:, C:]], axis=1)

    def mla_mixer(
        self, layer: int, h: np.ndarray, past: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Causal latent attention of h [T, D] over past cached rows [P, C+R] and its own.
        Keys are up-projected from the latent, then (kimi-linear) the shared key part is
        appended to every head's; no position encoding (both K3 and Kimi-Linear are NoPE).
        -> (y, new rows)."""
        c = self.config
        w = self.blocks[layer].mixer
        assert isinstance(w, (MLAWeights, KimiLinearMLAWeights))
        T, P, Hm, dh, dv = h.shape[0], past.shape[0], c.mla_heads, c.mla_head_dim, c.mla_value_dim
        C, R = c.mla_kv_rank, c.mla_rope_dim
        new = self.mla_latent(layer, h)
        lat = np.concatenate([past, new], axis=0)  # [P+T, C+R]
        q = (h @ w.w_q).reshape(T, Hm, dh + R)
        k = (lat[:, :C] @ w.w_uk).reshape(P + T, Hm, dh)
        if R:
            k = np.concatenate([k, np.broadcast_to(lat[:, None, C:], (P + T, Hm, R))], axis=2)
        v = (lat[:, :C] @ w.w_uv).reshape(P + T, Hm, dv)
        # batched matmuls over heads (BLAS), not einsum: ~10x faster at a few hundred tokens
        s = np.matmul(q.transpose(1, 0, 2), k.transpose(1, 2, 0)) / np.sqrt(dh + R)
        mask = np.arange(P + T)[None, :] <= (P + np.arange(T))[:, None]
        s = np.where(mask[None], s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        o = np.matmul(p, v.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(T, Hm * dv)
        if isinstance(w, MLAWeights):  # K3's output gate (transformers' MLA has none)
            o = o * sigmoid(h @ w.w_gate)
        return o @ w.w_o, new

    def mlp(self, layer: int, x: np.ndarray) -> np.ndarray:
        b = self.blocks[layer]
        gu = rmsnorm(x, b.norm2, self.config.norm_eps) @ b.w_up
        F = self.config.mlp_hidden
        return (silu(gu[:, :F]) * gu[:, F:]) @ b.w_down

    def norm1(self, layer: int, x: np.ndarray) -> np.ndarray:
        return rmsnorm(x, self.blocks[layer].norm1, self.config.norm_eps)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return rmsnorm(x, self.final_norm, self.config.norm_eps) @ self.lm_head

    # -- forward -------------------------------------------------------------------------------

    @overload
    def forward(self, tokens: list[int]) -> np.ndarray: ...

    @overload
    def forward(self, tokens: list[int], state: ModelState) -> tuple[np.ndarray, ModelState]: ...

    def forward(self, tokens, state=None):
        """Pure forward of `tokens` after `state`: returns (logits [T, vocab], new state).
        Without a state: the logits [T, vocab] of `tokens` from a fresh state (validated)."""
        if state is None:
            ids = check_tokens(tokens)
            return self.forward(ids, self.new_state())[0]
        x = self.embed[tokens]
        kda_states = list(state.kda)
        new_lat = []
        for layer, kind in enumerate(self.layer_kinds):
            h = self.norm1(layer, x)
            j = self._slot[layer]
            if kind == "kda":
                y, kda_states[j] = self._kda_mixer(layer, h, kda_states[j])
            else:
                y, lat = self.mla_mixer(layer, h, state.mla_kv[:, j])
                new_lat.append(lat)
            x = x + y
            x = x + self.mlp(layer, x)
        rows = np.stack(new_lat, axis=1) if new_lat else np.zeros((len(tokens), 0, 0))
        mla_kv = np.concatenate([state.mla_kv, rows.reshape(len(tokens), *state.mla_kv.shape[1:])])
        new = ModelState(
            kda_states, mla_kv, state.tokens + tokens, state.version, state.fingerprint
        )
        return self.logits(x), new

    def prefill(self, tokens, state: ModelState, chunk_size: int | None = None) -> np.ndarray:
        """Consume tokens (in chunks of chunk_size, or all at once), advancing state in place."""
        ids = check_tokens(tokens)
        self.check_state(state)
        if state.boundary + len(ids) > MAX_TOKENS:
            raise ValueError(f"tokens: a request holds at most {MAX_TOKENS} tokens in all")
        if chunk_size is None:
            chunk_size = len(ids)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
            raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        out = []
        for s in range(0, len(ids), chunk_size):
            logits, new = self.forward(ids[s : s + chunk_size], state)
            state.kda, state.mla_kv, state.tokens = new.kda, new.mla_kv, new.tokens
            out.append(logits)
        return np.concatenate(out, axis=0)

    def decode_step(self, token: int, state: ModelState) -> np.ndarray:
        """One token; returns logits [vocab] and advances state in place."""
        return self.prefill([token], state)[0]

    def generate(
        self, tokens, max_new_tokens: int, state: ModelState | None = None
    ) -> tuple[list[int], np.ndarray]:
        """Greedy: prefill tokens (after state, if given), then decode. -> (ids, logits [n, V])."""
        if not isinstance(max_new_tokens, (int, np.integer)) or not 0 <= max_new_tokens <= 4096:
            raise ValueError(
                f"max_new_tokens must be an integer in [0, 4096], got {max_new_tokens}"
            )
        state = self.new_state() if state is None else state
        last = self.prefill(tokens, state)[-1]
        ids: list[int] = []
        out = []
        for i in range(max_new_tokens):
            nxt = int(np.argmax(last))
            ids.append(nxt)
            out.append(last)
            if i + 1 < max_new_tokens:
                last = self.decode_step(nxt, state)
        return ids, np.array(out).reshape(len(out), VOCAB)


def export_hf(model: TinyHybrid, folder: str | Path) -> Path:
    """Write a ``kimi-linear`` model as a checkpoint transformers loads (``config.json`` +
    ``model.safetensors``, float32); the ``k3`` variant is refused (`kda_core.model._hf`)."""
    if not isinstance(model, TinyHybrid):
        raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
    return _hf.export(model.config, named_weights(model), folder)


def next_byte_bits(logits: np.ndarray, targets: list[int]) -> np.ndarray:
    """-log2 p(target) per row of logits [n, vocab] (a stable log-softmax in float64)."""
    lg = np.asarray(logits, dtype=np.float64)
    m = lg.max(axis=-1, keepdims=True)
    logz = m[:, 0] + np.log(np.exp(lg - m).sum(axis=-1))
    return (logz - lg[np.arange(len(targets)), targets]) / np.log(2.0)


def bits_per_byte(model: TinyHybrid, text: str, *, chunk_size: int = 512) -> float:
    """Mean -log2 p(byte_t | bytes_<t) over bytes 2..n of ``text`` (UTF-8), from a fresh state.

    The first byte has no prediction (there is no BOS token), so a text of n bytes scores n - 1
    predictions; at least 2 bytes are needed. Uniform guessing scores exactly 8.0. Prefill runs
    in chunks of ``chunk_size`` (exact: chunked prefill equals whole prefill).
    """
    if not isinstance(model, TinyHybrid):
        raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
    ids = encode(text)
    if not 2 <= len(ids) <= MAX_TOKENS:
        raise ValueError(f"text must encode to 2..{MAX_TOKENS} bytes, got {len(ids)}")
    logits = model.prefill(ids[:-1], model.new_state(), chunk_size=chunk_size)
    return float(next_byte_bits(logits, ids[1:]).mean())
