"""``Engine``'s arguments: the default policy, pool sizes by mode, prompt tokens (checked).

Each function raises ``ValueError`` naming the argument and its allowed range; the messages are
the engine's (tests match on them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.cache import policy as policy_mod
from kda_core.cache.pool import MAX_SLOTS
from kda_core.model import MAX_TOKENS, check_tokens, encode
from kda_core.serve.pools import int8_checkpoint_slots, slots_held, slots_up_front

MAX_NEW_TOKENS = 4096
DEFAULT_POLICY = {"name": "sglang", "grid": 16, "track_interval": 32}
"""SGLang's placement scaled to the tiny model: grid 16 (instead of 64), decode every 32."""
DEFAULT_CHECKPOINT_SLOTS = 256
"""Checkpoint pool capacity when ``checkpoint_slots`` is None (bounds a long app session)."""

__all__ = [
    "DEFAULT_CHECKPOINT_SLOTS",
    "DEFAULT_POLICY",
    "MAX_NEW_TOKENS",
    "check_policy_chunk",
    "legacy_sizes",
    "make_policy",
    "prompt_tokens",
    "shared_sizes",
]


def make_policy(policy: Any) -> Any:
    """A fresh Policy from a Policy (copied: per-run state is never shared), a name or None."""
    if policy is None:
        params = dict(DEFAULT_POLICY)
        return policy_mod.make(params.pop("name"), **params)
    if isinstance(policy, str):
        return policy_mod.make(policy)
    if isinstance(policy, policy_mod.Policy):
        return replace(policy)
    raise ValueError(
        f"policy must be a Policy, one of {policy_mod.POLICY_NAMES} or None, "
        f"got {type(policy).__name__}"
    )


def check_policy_chunk(policy: Any, chunk_size: int) -> None:
    """Place checkpoints once for the longest prompt: a policy that cannot work with this
    ``chunk_size`` fails here, not on every request."""
    P = MAX_TOKENS - MAX_NEW_TOKENS
    try:
        policy.checkpoint_positions(
            P, None, total_len=MAX_TOKENS - 1, chunk_size=chunk_size, page_size=1
        )
    except ValueError as e:
        raise ValueError(
            f"chunk_size={chunk_size} does not suit policy {policy.name!r}: {e}"
        ) from None


def shared_sizes(
    state_slots: Any, active_slots: Any, checkpoint_slots: Any, strategy: str, overlap: bool,
    int8: bool,
) -> tuple[int, int, int]:  # fmt: skip
    """(state_slots, checkpoint pool, active pool) for one shared pool of ``state_slots``."""
    spr = sizing.slots_per_request(strategy, overlap)
    n = check_int("state_slots", state_slots, spr, MAX_SLOTS)
    if active_slots is not None:
        raise ValueError("active_slots must be None when state_slots is given")
    if not int8:
        if checkpoint_slots is not None:
            raise ValueError(
                "checkpoint_slots must be None when state_slots is given without INT8 "
                "checkpoints (running and cached states share the state_slots pool)"
            )
        return n, n, n
    return n, int8_checkpoint_slots(n, checkpoint_slots), n


def legacy_sizes(
    checkpoint_slots: Any, active_slots: Any, strategy: str, overlap: bool
) -> tuple[int, int]:
    """(checkpoint pool, active pool) of the separate legacy pools."""
    ck = DEFAULT_CHECKPOINT_SLOTS if checkpoint_slots is None else checkpoint_slots
    ck = check_int("checkpoint_slots", ck, 1, MAX_SLOTS)
    need = slots_up_front(strategy, overlap)
    act = slots_held(strategy, overlap) if active_slots is None else active_slots
    act = check_int("active_slots", act, 1, MAX_SLOTS)
    if act < need:
        raise ValueError(
            f"active_slots must be >= {need} for strategy {strategy!r} "
            f"(the slots one request holds up front), got {act}"
        )
    return ck, act


def prompt_tokens(prompt: Any) -> list[int]:
    """Text (UTF-8 bytes) or token ids, at most ``MAX_TOKENS - MAX_NEW_TOKENS`` of them."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt must not be empty")
        ids = encode(prompt)
    elif isinstance(prompt, (list, tuple, np.ndarray)):
        ids = check_tokens(prompt, name="prompt")
    else:
        raise ValueError(
            f"prompt must be a str or a list of token ids, got {type(prompt).__name__}"
        )
    if len(ids) > MAX_TOKENS - MAX_NEW_TOKENS:
        raise ValueError(f"prompt: at most {MAX_TOKENS - MAX_NEW_TOKENS} tokens, got {len(ids)}")
    return ids
