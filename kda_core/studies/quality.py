"""What a compressed checkpoint costs in quality: bits per byte on held-out text, and the text.

TinyHybrid (trained weights) reads held-out passages of the frozen corpus
(`kda_core.model.corpus`, modules never seen in training). Each passage's first ``park_at``
bytes are the cached prefix; the rest is scored, byte by byte, by the model continuing from a
restored checkpoint. Arms, all scoring the same predictions (bytes ``park_at + 1 .. length - 1``):

* exact: the state continues untouched (a restore from an exact checkpoint is the identity);
* every format of `parking.VARIANTS` (INT8 per key channel / head / tensor,
  fp8-e4m3 per channel, bf16), restored ``k`` times: the KDA recurrent states are compressed
  and restored at ``k`` boundaries ``park_at + j * gap`` (j = 0 .. k-1), as when a
  conversation is parked and resumed k times (each turn's checkpoint is the previous restore
  decoded on). Conv windows and MLA KV stay exact (SGLang keeps conv windows native);
* inconsistent: the restore `kda_core.engine.Engine.generate(restore="inconsistent")` teaches:
  MLA KV of the whole prefix (the token match) but the KDA states and conv windows of a
  checkpoint ``lag`` tokens earlier, and no replay.

bits per byte = mean -log2 p(byte) over the scored predictions of all passages (one number per
arm, `kda_core.model.next_byte_bits`); a restore that changes nothing scores the exact value.

`continuations` is the reader's view: greedy decoding after a restore from an exact vs a
compressed checkpoint (free-running, each from its own state), decoded with
`kda_core.model.tokenizer`, with the first byte where they differ.

Left out: compressing MLA KV or conv windows, and sampling (greedy only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.kda import quant
from kda_core.model import ModelState, TinyHybrid, corpus, encode, next_byte_bits, tokenizer
from kda_core.studies import _parking as parking
from kda_core.studies._parking import tiny_model

_CYCLES: tuple[int, ...] = (1, 4, 16)
_LAGS: tuple[int, ...] = (8, 32, 128)
_MAX_PASSAGES = 32
_MAX_LENGTH = 2048


def passages(n: int, length: int) -> list[list[int]]:
    """The first ``length`` bytes of the first ``n`` held-out documents at least that long."""
    docs = [d.encode() for d in corpus.documents(corpus.load("heldout"))]
    long = [list(d[:length]) for d in docs if len(d) >= length][:n]
    if len(long) < n:
        raise ValueError(f"passages: only {len(long)} held-out documents hold {length} bytes")
    return long


def _compress(state: ModelState, fmt: str, granularity: str | None) -> None:
    for layer in state.kda:
        layer.S = quant.roundtrip(layer.S, fmt, granularity)


def _score(model: TinyHybrid, state: ModelState, ids: list[int], cuts: list[int], fmt, gran):
    """Feed ids[p:-1] after ``state`` (at boundary p), compressing the KDA states at each cut
    (absolute positions, the first = p); -> bits of every prediction ids[p+1:]."""
    p = state.boundary
    bounds = sorted(set(cuts) | {p, len(ids) - 1})
    logits = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a in cuts:
            _compress(state, fmt, gran)
        logits.append(model.prefill(ids[a:b], state))
    return next_byte_bits(np.concatenate(logits), ids[p + 1 :])


def _inconsistent(model: TinyHybrid, ids: list[int], park_at: int, lag: int) -> ModelState:
    """MLA KV of ids[:park_at], KDA states + conv windows of ids[:park_at - lag] (engine.py)."""
    ckpt = model.new_state()
    model.prefill(ids[: park_at - lag], ckpt)
    full = model.new_state()
    model.prefill(ids[:park_at], full)
    return ModelState(
        [s.copy() for s in ckpt.kda],
        full.mla_kv.copy(),
        list(ids[:park_at]),
        full.version,
        full.fingerprint,
    )


@dataclass(slots=True)
class QualityStudy:
    """bits per byte per arm. ``bpb [variant, cycle]`` for ``labels`` x ``cycles``;
    ``delta`` = bpb - ``exact_bpb``; ``inconsistent_bpb [lag]`` for ``lags``; ``scored`` =
    predictions per arm (passages x (length - park_at - 1))."""

    labels: tuple[str, ...]
    fmts: tuple[str, ...]
    granularities: tuple[str | None, ...]
    cycles: tuple[int, ...]
    lags: tuple[int, ...]
    exact_bpb: float
    bpb: np.ndarray
    delta: np.ndarray
    inconsistent_bpb: np.ndarray
    passages: int
    length: int
    park_at: int
    gap: int
    scored: int


def quality_study(
    n_passages: int = 6,
    length: int = 512,
    park_at: int = 192,
    gap: int = 16,
    cycles: tuple[int, ...] = _CYCLES,
    lags: tuple[int, ...] = _LAGS,
) -> QualityStudy:
    """Score every arm on ``n_passages`` held-out passages (see the module docstring)."""
    n = _check_int("n_passages", n_passages, 1, _MAX_PASSAGES)
    length = _check_int("length", length, 8, _MAX_LENGTH)
    park_at = _check_int("park_at", park_at, 2, length - 2)
    gap = _check_int("gap", gap, 1, length)
    cycles = tuple(_check_int("cycles", k, 1, 64) for k in cycles)
    lags = tuple(_check_int("lags", g, 1, park_at - 1) for g in lags)
    if park_at + (max(cycles) - 1) * gap >= length - 1:
        raise ValueError(
            f"cycles: the last restore (park_at + (max cycles - 1) * gap = "
            f"{park_at + (max(cycles) - 1) * gap}) must come before byte {length - 1}"
        )
    model = tiny_model()
    texts = passages(n, length)
    exact_bits, bits, inc = [], np.zeros((len(parking.VARIANTS), len(cycles))), np.zeros(len(lags))
    for ids in texts:
        parked = model.new_state()
        model.prefill(ids[:park_at], parked)
        exact_bits.append(_score(model, parked.copy(), ids, [], None, None))
        for i, (_, fmt, gran) in enumerate(parking.VARIANTS):
            for j, k in enumerate(cycles):
                cuts = [park_at + c * gap for c in range(k)]
                bits[i, j] += _score(model, parked.copy(), ids, cuts, fmt, gran).sum()
        for j, lag in enumerate(lags):
            inc[j] += _score(
                model, _inconsistent(model, ids, park_at, lag), ids, [], None, None
            ).sum()
    scored = n * (length - park_at - 1)
    exact = float(np.concatenate(exact_bits).sum() / scored)
    return QualityStudy(
        labels=tuple(v[0] for v in parking.VARIANTS),
        fmts=tuple(v[1] for v in parking.VARIANTS),
        granularities=tuple(v[2] for v in parking.VARIANTS),
        cycles=cycles,
        lags=lags,
        exact_bpb=exact,
        bpb=bits / scored,
        delta=bits / scored - exact,
        inconsistent_bpb=inc / scored,
        passages=n,
        length=length,
        park_at=park_at,
        gap=gap,
        scored=scored,
    )


# ---------------------------------------------------------------------------------------------
# the text itself


@dataclass(slots=True)
class Continuation:
    """Greedy continuations after an exact and a compressed restore of the same parked state.

    ``exact`` / ``compressed``: generated token ids; ``*_pieces``: one display label per token
    (`kda_core.model.tokenizer.pieces`); ``first_divergence``: index of the first differing
    token, or None when all ``steps`` tokens agree.
    """

    label: str
    prompt_tail: str
    exact: tuple[int, ...]
    compressed: tuple[int, ...]
    exact_pieces: tuple[str, ...]
    compressed_pieces: tuple[str, ...]
    first_divergence: int | None


def continuation(
    text: str = parking.DEFAULT_TEXT,
    n_tokens: int = 64,
    fmt: str = "int8",
    granularity: str | None = "channel",
    steps: int = 32,
) -> Continuation:
    """Park ``n_tokens`` of ``text`` (as the int8 study does), restore exactly and compressed,
    decode ``steps`` greedy tokens from each."""
    parked = parking.park(text, n_tokens)
    steps = _check_int("steps", steps, 1, parking.MAX_STEPS)
    fmt, granularity = parking.check_variant(fmt, granularity)
    model = tiny_model()
    runs = []
    for compress in (False, True):
        state = parked.state.copy()
        if compress:
            _compress(state, fmt, granularity)
        last, ids = parked.logits_last, []
        for i in range(steps):
            ids.append(int(np.argmax(last)))
            if i + 1 < steps:
                last = model.decode_step(ids[-1], state)
        runs.append(tuple(ids))
    diff = [i for i, (a, b) in enumerate(zip(*runs)) if a != b]
    full = parked.tokens[: parked.n_tokens]
    return Continuation(
        label=parking.variant_label(fmt, granularity),
        prompt_tail=tokenizer.display(full[-48:]),
        exact=runs[0],
        compressed=runs[1],
        exact_pieces=tuple(tokenizer.pieces(full + list(runs[0]))[len(full) :]),
        compressed_pieces=tuple(tokenizer.pieces(full + list(runs[1]))[len(full) :]),
        first_divergence=diff[0] if diff else None,
    )


def _greedy_sample(prompt: str, steps: int = 120) -> str:
    """The README's sample: greedy continuation of ``prompt`` (display text)."""
    ids, _ = tiny_model().generate(encode(prompt), _check_int("steps", steps, 1, 4096))
    return tokenizer.display(ids, newline="\n")
