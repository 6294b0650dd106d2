"""Token prompts shared by the hit-reason differentials (tests/real/test_hit_reasons_vs_*.py)."""

from __future__ import annotations

import random


def tokens(start: int, n: int) -> list[int]:
    """``n`` distinct token ids from ``start`` (ranges far apart never share a prefix)."""
    return list(range(start, start + n))


def prompt_mix(seed: int, n: int = 24) -> list[list[int]]:
    """``n`` prompts over three system prompts of 64-token multiples: resends of an earlier
    prompt, follow-ups that extend one, and new tails on a system prompt (seeded)."""
    rng = random.Random(seed)
    systems = [tokens(1_000_000 * (k + 1), 64 * rng.randint(1, 6)) for k in range(3)]
    prompts: list[list[int]] = []
    for i in range(n):
        roll = rng.random()
        if prompts and roll < 0.25:
            prompts.append(list(rng.choice(prompts)))
        elif prompts and roll < 0.5:
            base = rng.choice(prompts)
            prompts.append(base + tokens(5_000_000 + 1000 * i, 64 * rng.randint(1, 4)))
        else:
            tail = tokens(7_000_000 + 1000 * i, 64 * rng.randint(1, 8))
            prompts.append(rng.choice(systems) + tail)
    return prompts
