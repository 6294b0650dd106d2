"""Seeded and model-made KDA inputs for the kda studies (chunk_scan, context_parallel).

Random inputs are made the way fla's tests and the lab's bench make them (L2-normalised q, k;
K3's lower-bound gate; sigmoid beta; a random initial state); ``model_inputs`` takes the first
KDA layer's real q, k, v, g, beta from TinyHybrid for a text's bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import kda
from kda_core._checks import check_int
from kda_core.model import TinyHybrid, encode

MAX_T = 4096
MAX_HEADS = 16
MAX_DIM = 128
_MAX_GRID = 12  # values per axis of a grid


def check_grid(name: str, values: object, lo: int, hi: int) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} must be a sequence of 1..{_MAX_GRID} integers in [{lo}, {hi}]")
    if not 1 <= len(values) <= _MAX_GRID:
        raise ValueError(f"{name} must hold 1..{_MAX_GRID} values, got {len(values)}")
    return tuple(check_int(name, v, lo, hi) for v in values)


@dataclass(slots=True)
class Inputs:
    """One sequence of KDA inputs: q, k, g [T, H, K]; v [T, H, V]; beta [T, H]; S0 [H, K, V]."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    g: np.ndarray
    beta: np.ndarray
    S0: np.ndarray
    source: str


def random_inputs(T: int, H: int = 2, K: int = 32, V: int = 32, seed: int = 0) -> Inputs:
    """Seeded inputs: L2-normalised q, k; K3's lower-bound gate (-5) with fla's dt_bias init
    (dt = exp(U[log 1e-3, log 1e-1]) per key channel, dt_bias = inverse softplus of dt, so
    channels range from slow (alpha ~ 0.995) to fast (alpha ~ 0.6)); beta = sigmoid(randn);
    S0 ~ randn."""
    T = check_int("T", T, 1, MAX_T)
    H = check_int("H", H, 1, MAX_HEADS)
    K = check_int("K", K, 1, MAX_DIM)
    V = check_int("V", V, 1, MAX_DIM)
    seed = check_int("seed", seed, 0, 2**32 - 1)
    rng = np.random.default_rng(seed)
    q = kda.l2norm(rng.random((T, H, K)))
    k = kda.l2norm(rng.random((T, H, K)))
    v = rng.standard_normal((T, H, V))
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((T, H))))
    S0 = rng.standard_normal((H, K, V))
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H * K))
    dt_bias = dt + np.log(-np.expm1(-dt))  # softplus(dt_bias) = dt
    g = kda.lowerbound_gate(rng.standard_normal((T, H, K)), dt_bias, -5.0)
    return Inputs(q, k, v, g, beta, S0, f"random (seed {seed})")


def model_inputs(text: str, T: int | None = None) -> Inputs:
    """TinyHybrid's first KDA layer on the first T bytes of ``text`` (all of it if None), S0 = 0:
    the q, k, v, g, beta that layer really consumes (H = 4, K = V = 32)."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"text must be a non-empty str of at most {MAX_T} UTF-8 bytes")
    tokens = encode(text)
    if len(tokens) > MAX_T:
        raise ValueError(f"text must encode to at most {MAX_T} bytes, got {len(tokens)}")
    T = len(tokens) if T is None else check_int("T", T, 1, len(tokens))
    m = _model()
    h = m.norm1(0, m.embed[tokens[:T]])
    window = np.zeros((m.config.conv_size - 1, 3 * m.config.n_heads * m.config.head_dim))
    f = m.kda_features(0, h, window)
    H, K = m.config.n_heads, m.config.head_dim
    return Inputs(f.q, f.k, f.v, f.g, f.beta, np.zeros((H, K, K)), "TinyHybrid layer 0")


@functools.lru_cache(maxsize=1)
def _model() -> TinyHybrid:
    return TinyHybrid()


def slice_inputs(x: Inputs, T: int) -> Inputs:
    return Inputs(x.q[:T], x.k[:T], x.v[:T], x.g[:T], x.beta[:T], x.S0, x.source)
