"""What a served request reports: one request (``GenerateReport``), one model call
(``StepRecord``), a serve and its steps (``ServeReport`` / ``StepRow``, ``BlockStepRow``
through vLLM's block table) and an engine's totals (``EngineStats``). ``kda_core.engine``
re-exports them (the contract)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core.cache.vllm_blocks import Step
from kda_core.serve._graphs import GraphStep
from kda_core.serve.spec import VerifyRecord

__all__ = [
    "BlockStepRow",
    "PoolStats",
    "CachedCheckpoint",
    "EngineStats",
    "GenerateReport",
    "ServeReport",
    "StepRecord",
    "StepRow",
]


@dataclass(slots=True, frozen=True)
class PoolStats:
    """Counts for the pools panel."""

    active_capacity: int
    active_used: int
    checkpoint_capacity: int
    checkpoint_used: int
    checkpoint_bytes: int
    copies: int
    donations: int
    loads: int
    track_writes: int
    int8: bool


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
    restore_error: tuple[float, float]  # (max |S - S'|, rel Frobenius) of the restored ckpt
    step_log: tuple[StepRecord, ...]
    pools: PoolStats
    seconds: float
    # the request's counters (``RequestState.bump`` names them)
    checkpoints_existed: int = 0  # the tree had them already (our copy freed)
    checkpoints_skipped: int = 0  # no checkpoint slot even after eviction
    copies: int = 0
    donations: int = 0
    track_writes: int = 0
    evicted_states: int = 0
    evicted_kv_tokens: int = 0
    replay_states: np.ndarray | None = None  # [restore_at..token_match, L, H, K, V] if recorded
    ref_logits: np.ndarray | None = None  # uncached run's logits (reference=True)
    ref_max_abs_diff: float | None = None  # max |logits - ref_logits|
    verify_steps: tuple[VerifyRecord, ...] = ()  # speculative decoding: one per verify

    @property
    def consumed(self) -> int:
        """Tokens whose state the request ends at: prompt + all generated but the last."""
        return len(self.prompt) + max(len(self.tokens) - 1, 0)


@dataclass(slots=True, frozen=True)
class EngineStats:
    """An engine's totals over its finished requests, and its pools and cache now."""

    requests: int = 0
    state_hits: int = 0  # requests restored from a checkpoint
    token_hits: int = 0  # requests with a token match > 0
    prompt_tokens: int = 0
    restored_tokens: int = 0
    replayed_tokens: int = 0
    prefilled_tokens: int = 0
    decoded_tokens: int = 0
    copies: int = 0
    donations: int = 0
    track_writes: int = 0
    evicted_states: int = 0
    evicted_kv_tokens: int = 0
    checkpoints_skipped: int = 0
    tree_states: int = 0
    tree_nodes: int = 0
    tree_kv_tokens: int = 0

    @property
    def prefill_saved_fraction(self) -> float:
        """Fraction of prompt tokens not computed (restored)."""
        return self.restored_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(slots=True, frozen=True)
class StepRow:
    """One scheduler step. Ids are the requests' positions in the input list."""

    step: int
    running: tuple[int, ...]  # ran in this step (decodes, then prefill chunks)
    prefill_tokens: int
    decode_tokens: int
    admitted: tuple[int, ...]
    retracted: tuple[int, ...]
    finished: tuple[int, ...]
    phases: tuple[str, ...]  # per request after the step: waiting/prefill/decode/finished/...
    slots_running: int
    slots_cached: int
    slots_free: int
    checkpoint_free: int | None  # the INT8 checkpoint pool's free slots (None: shared pool)
    graph: GraphStep | None = None  # the fixed-shape decode (cuda_graph_bs), else None
    # one byte buffer (unified_memory): (where the state side ends, where the KV side begins)
    border: tuple[int, int] | None = None
    # the arrived head of the queue that could not get its state slots / KV this step (FCFS:
    # the requests behind it wait on it), else None
    held_for_memory: int | None = None


@dataclass(frozen=True, slots=True)
class BlockStepRow:
    """One request's chunk in a serve through vLLM's block table: its index, "prefill" or "decode",
    the table's ``Step``, the state block its starting state was read from (None: the zero state)
    and its block tables after the step (0: the null block)."""

    request: int
    phase: str
    step: Step
    read_block: int | None
    kv_table: tuple[int, ...]
    state_table: tuple[int, ...]


@dataclass(slots=True)
class ServeReport:
    """What ``Engine.serve`` did: one report per request (input order; None if rejected)."""

    reports: list[GenerateReport | None]
    steps: list[StepRow]
    rejected: dict[int, str]  # request id -> SGLang-style message
    max_running: int
    capping_message: str | None
    peak_running: int
    retractions: int
    # CPU seconds of this process (time.process_time: on a shared machine the wall clock also
    # counts time descheduled, which lands on whichever part happened to run)
    seconds: float  # the whole serve
    scheduler_seconds: float  # Scheduler.schedule
    runner_seconds: float  # the model passes (Runner.run)
    block_steps: tuple[BlockStepRow, ...] = ()  # through vLLM's block table: every chunk


class CachedCheckpoint(NamedTuple):
    """A checkpoint the cache holds (``Engine.cached_checkpoint``): the MLA KV payloads of its
    prefix (root first), S [L, H, K, V] and conv [L, W-1, D] (read-only), its checkpoint
    slot, and the boundary of the deepest checkpoint before it (0: none)."""

    mla_kv: tuple
    kda_state: np.ndarray
    conv: np.ndarray
    slot: int
    parent: int
