"""Parking a real TinyHybrid state in a compressed format: what the int8 and quality studies share.

`park` prefills the first ``n_tokens`` byte tokens of a text on the trained TinyHybrid and keeps
the state (its KDA recurrent states are what a checkpoint pool parks); `compress_states`
replaces every KDA recurrent state by its round trip through one of ``VARIANTS`` (INT8 per key
channel, SGLang's layout, first; per head; per tensor; fp8-e4m3; bf16). Conv windows and MLA KV
are never compressed (SGLang keeps conv windows native).
Left out: the float32 cast of SGLang's dequantization (the lab's states are float64).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.kda import quant
from kda_core.model import ModelState, TinyHybrid, encode

DEFAULT_TEXT = (
    "Kimi Delta Attention keeps one fixed-size state per request instead of a growing KV cache. "
    "前缀命中不等于状态命中：请求只能从保存了状态的检查点恢复，然后重放中间的词元。"
)
MAX_TEXT_CHARS = 4000
_MAX_TEXT_TOKENS = 4096
MAX_PARK_TOKENS = 1024
MAX_STEPS = 64
# (label, fmt, granularity) of every variant the study measures, SGLang's default first
VARIANTS: tuple[tuple[str, str, str | None], ...] = (
    ("int8 / key channel", "int8", "channel"),
    ("int8 / head", "int8", "head"),
    ("int8 / tensor", "int8", "tensor"),
    ("fp8-e4m3 / key channel", "fp8_e4m3", "channel"),
    ("bf16", "bf16", None),
)


def check_variant(fmt: str, granularity: str | None) -> tuple[str, str | None]:
    """(fmt, granularity) with the default granularity filled in; ValueError names the bad one."""
    quant.check_format(fmt, granularity)  # ValueError naming fmt / granularity
    return fmt, (None if fmt == "bf16" else (granularity or "channel"))


def variant_label(fmt: str, granularity: str | None) -> str:
    fmt, granularity = check_variant(fmt, granularity)
    for label, f, g in VARIANTS:
        if (f, g) == (fmt, granularity):
            return label
    return f"{fmt} / {granularity}"


@functools.lru_cache(maxsize=1)
def tiny_model() -> TinyHybrid:
    """The trained TinyHybrid, built once per process (the studies never mutate it)."""
    return TinyHybrid()


def kda_shape() -> tuple[int, int]:
    """(KDA layers, heads per layer) of the trained model every study serves: the ranges of the
    state views and heatmaps (prefix_replay, speculative_replay and int8_checkpoint read it)."""
    m = tiny_model()
    return len(m.kda_layers), int(m.config.n_heads)


@dataclass(slots=True)
class Parked:
    """The tiny model's state after ``n_tokens`` tokens of ``text`` (never mutated by studies).

    ``logits_last [vocab]`` predicts the first continued token (computed before parking).
    """

    text: str
    tokens: list[int]
    n_tokens: int
    state: ModelState
    logits_last: np.ndarray

    @property
    def kda_states(self) -> np.ndarray:
        """All KDA recurrent states stacked: [L_kda, H, K, V] (a copy)."""
        return np.stack([s.S for s in self.state.kda])


def park(text: str = DEFAULT_TEXT, n_tokens: int = 64) -> Parked:
    """Prefill the first ``n_tokens`` byte tokens of ``text`` on TinyHybrid."""
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_TEXT_CHARS:
        raise ValueError(f"text must be a str of 1..{MAX_TEXT_CHARS} characters")
    tokens = encode(text)
    if len(tokens) > _MAX_TEXT_TOKENS:
        raise ValueError(f"text must encode to at most {_MAX_TEXT_TOKENS} bytes, got {len(tokens)}")
    n = _check_int("n_tokens", n_tokens, 1, min(len(tokens), MAX_PARK_TOKENS))
    model = tiny_model()
    state = model.new_state()
    logits = model.prefill(tokens[:n], state)
    return Parked(text, tokens, n, state, logits[-1].copy())


def compress_states(state: ModelState, fmt: str, granularity: str | None) -> None:
    """Replace every KDA recurrent state by its compressed round trip (conv, MLA untouched)."""
    for layer in state.kda:
        layer.S = quant.roundtrip(layer.S, fmt, granularity)
