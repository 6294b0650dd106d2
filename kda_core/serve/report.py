"""What a served request reports: ``GenerateReport`` (one request), ``StepRecord`` (one model
call), ``EngineStats`` (an engine's totals). Shared by ``Engine.generate`` and ``Engine.serve``;
``kda_core.engine`` re-exports them (the contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core.cache.pool import PoolStats

__all__ = ["EngineStats", "GenerateReport", "StepRecord"]


class StepRecord(NamedTuple):
    """One model call. ``pos`` = boundary after it; ``n`` tokens consumed; ``token`` the last."""

    pos: int
    n: int
    token: int
    phase: str
    state_norm: float
    dist_to_match: float  # to the replayed state at the token match; nan outside the replay
    dist_to_uncached: float = float("nan")  # to the uncached state there (step tracing only)


@dataclass(slots=True)
class GenerateReport:
    """What one request did. Lengths in tokens; ``logits`` [n_new, vocab] float64."""

    prompt: tuple[int, ...]
    tokens: list[int]
    text: str
    logits: np.ndarray
    token_match: int
    restore_at: int
    replayed: int
    prefilled: int
    decoded: int
    restore: str
    planned_checkpoints: tuple[int, ...]
    checkpoints: tuple[int, ...]  # positions actually parked in the checkpoint pool
    checkpoints_created: int  # new states in the tree after insert
    checkpoints_existed: int  # the tree had them already (our copy freed)
    checkpoints_skipped: int  # no checkpoint slot even after eviction
    copies: int
    donations: int
    track_writes: int
    evicted_states: int
    evicted_kv_tokens: int
    restore_error: tuple[float, float]  # (max |S - S'|, rel Frobenius) of the restored ckpt
    step_log: tuple[StepRecord, ...]
    replay_states: np.ndarray | None  # [restore_at..token_match, L, H, K, V] if recorded
    ref_logits: np.ndarray | None  # uncached run's logits (reference=True)
    ref_max_abs_diff: float | None  # max |logits - ref_logits|
    pools: PoolStats
    seconds: float

    @property
    def consumed(self) -> int:
        """Tokens whose state the request ends at: prompt + all generated but the last."""
        return len(self.prompt) + max(len(self.tokens) - 1, 0)

    @property
    def saved(self) -> int:
        """Prompt tokens not recomputed (restored from a checkpoint)."""
        return self.restore_at


@dataclass(slots=True, frozen=True)
class EngineStats:
    requests: int
    state_hits: int  # requests restored from a checkpoint
    token_hits: int  # requests with a token match > 0
    prompt_tokens: int
    restored_tokens: int
    replayed_tokens: int
    prefilled_tokens: int
    decoded_tokens: int
    copies: int
    donations: int
    track_writes: int
    evicted_states: int
    evicted_kv_tokens: int
    checkpoints_skipped: int
    tree_states: int
    tree_nodes: int
    tree_kv_tokens: int

    @property
    def prefill_saved_fraction(self) -> float:
        """Fraction of prompt tokens not computed (restored)."""
        return self.restored_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
