"""Speculative generation on TinyHybrid: toy drafts, acceptance, the verify / commit loop.

``speculative_generate`` runs greedy speculative decoding with ``ReplaySSM`` and returns the
tokens, logits and per-step records; its tokens equal plain greedy decoding (the twin:
``TinyHybrid.generate``). Drafts: ``ngram_draft`` (prompt lookup) and ``make_noisy_draft`` (the
target with noise on its logits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int
from kda_core.model import (
    VOCAB,
    ModelState,
    TinyHybrid,
    check_tokens,
    encode,
)
from kda_core.serve.spec.replay import ReplaySSM
from kda_core.serve.spec.segment import MAX_DRAFT_TOKENS

# --------------------------------------------------------------------------------------------
# toy drafts and the speculative generation loop

# A draft proposes n tokens to follow ``history`` (whose last token is the pending one, not yet
# consumed by ``state``). It may use the committed state (e.g. the target with noise).
Draft = Callable[[list[int], ModelState, int], list[int]]


def ngram_draft(history: Sequence[int], n: int, order: int = 3) -> list[int]:
    """Prompt-lookup draft: copy what followed the latest earlier occurrence of the longest
    suffix (<= ``order`` tokens) of the history; the last token again when nothing matches."""
    n = check_int("n", n, 0, MAX_DRAFT_TOKENS)
    order = check_int("order", order, 1, 16)
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
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 0, 4096)
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
