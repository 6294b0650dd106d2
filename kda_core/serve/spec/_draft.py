"""What the engine's speculative decoding is configured with (``Engine(speculative=...)``): toy
drafts (``ngram_draft``: prompt lookup; ``make_noisy_draft``: the target with noisy logits),
greedy acceptance, the per-request ReplaySSM and the record of each verify."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from kda_core._checks import check_int, check_seed
from kda_core.model import ModelState, TinyHybrid, check_tokens
from kda_core.serve.spec._replay import MAX_DRAFT_TOKENS, ReplaySSM, check_ring_len

# A draft proposes n tokens to follow ``history`` (whose last token is the pending one, not yet
# consumed by ``state``). It may use the committed state (e.g. the target with noise).
Draft = Callable[[list[int], ModelState, int], list[int]]


def ngram_draft(history: Sequence[int], n: int) -> list[int]:
    """Prompt-lookup draft: copy what followed the latest earlier occurrence of the longest
    suffix (<= 3 tokens) of the history; the last token again when nothing matches."""
    n = check_int("n", n, 0, MAX_DRAFT_TOKENS)
    hist = list(check_tokens(history, name="history"))
    out: list[int] = []
    for _ in range(n):
        nxt = hist[-1]
        for m in range(min(3, len(hist) - 1), 0, -1):
            # the latest earlier occurrence of the m-token suffix
            at = (s for s in range(len(hist) - m - 1, -1, -1) if hist[s : s + m] == hist[-m:])
            s = next(at, None)
            if s is not None:
                nxt = hist[s + m]
                break
        out.append(nxt)
        hist.append(nxt)
    return out


def _check_noise(noise: Any) -> None:
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise <= 100:
        raise ValueError(f"noise must be a number in [0, 100], got {noise!r}")


def make_noisy_draft(model: TinyHybrid, noise: float = 0.2, seed: int = 0) -> Draft:
    """The target itself with Gaussian noise (std ``noise`` x the logits' std) on its logits:
    greedy on the noisy logits from the committed state. noise = 0 is a perfect draft."""
    _check_noise(noise)
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


class VerifyRecord(NamedTuple):
    """One verify step of a request (``GenerateReport.verify_steps``): inputs = the pending
    token + the drafts; targets = the target's greedy token after each input; accepted =
    drafts accepted (the pending token is always committed: 1 + accepted tokens)."""

    start: int
    inputs: tuple[int, ...]
    targets: tuple[int, ...]
    accepted: int


@dataclass(frozen=True, slots=True)
class SpecConfig:
    """``Engine(speculative=...)``, checked: the draft ("noisy", "ngram" or a callable
    ``(history, state, n) -> n tokens``), D tokens verified per step (pending included), the
    ring length L (None: next_pow2(2D)), the noisy draft's noise and seed."""

    draft: Any = "noisy"
    draft_tokens: int = 8
    ring_len: int | None = None
    noise: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.draft in ("noisy", "ngram") or callable(self.draft)):
            raise ValueError(f"draft must be 'ngram', 'noisy' or a callable, got {self.draft!r}")
        check_ring_len(self.ring_len, self.draft_tokens)  # checks draft_tokens first
        _check_noise(self.noise)
        check_seed("seed", self.seed)

    @classmethod
    def of(cls, speculative: Any) -> SpecConfig | None:
        """None, or a dict of these fields (unknown keys refused)."""
        if speculative is None:
            return None
        if not isinstance(speculative, dict):
            raise ValueError(
                f"speculative must be a dict or None, got {type(speculative).__name__}"
            )
        known = set(cls.__dataclass_fields__)
        for key in speculative:
            if key not in known:
                raise ValueError(f"speculative: {key} is not one of {sorted(known)}")
        return cls(**speculative)


@dataclass(slots=True, eq=False)
class SpecRequest:
    """One request's speculative decoding: its rings, its draft and its verify records."""

    rings: ReplaySSM
    draft: Draft
    verifies: list[VerifyRecord] = field(default_factory=list)

    @classmethod
    def of(cls, model: TinyHybrid, cfg: SpecConfig) -> SpecRequest:
        if cfg.draft == "ngram":
            draft: Draft = lambda hist, st, n: ngram_draft(hist, n)  # noqa: E731
        elif cfg.draft == "noisy":
            draft = make_noisy_draft(model, cfg.noise, cfg.seed)
        else:
            draft = cfg.draft
        return cls(ReplaySSM(model, cfg.draft_tokens, cfg.ring_len), draft)

    def step(self, state: ModelState, pending: int, n: int) -> tuple[ModelState, int, np.ndarray]:
        """Verify ``pending`` + n - 1 drafts from ``state``, accept a prefix greedily, commit
        it by exact replay. -> (the committed state, tokens committed, their logits)."""
        proposal = check_tokens(
            self.draft(state.tokens + [pending], state, n - 1), allow_empty=True
        )
        if len(proposal) != n - 1:
            raise ValueError(f"draft must return {n - 1} tokens, got {len(proposal)}")
        inputs = [pending] + proposal
        res = self.rings.verify(state, inputs)
        targets = tuple(int(t) for t in np.argmax(res.logits, axis=1))
        a = accept_length(inputs, res.logits)
        self.verifies.append(VerifyRecord(res.start, tuple(inputs), targets, a - 1))
        return self.rings.commit(state, res, a), a, res.logits[:a]
