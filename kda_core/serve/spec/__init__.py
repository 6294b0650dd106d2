"""Speculative decoding on TinyHybrid with ReplaySSM (SGLang ``--enable-linear-replayssm-spec``).

Re-exports only: ``segment`` (the segment math and argument checks), ``replay`` (rings,
``ReplaySSM`` verify / commit), ``memory`` (rings vs per-draft states, bytes), ``generate``
(drafts and the speculative generation loop). See docs/speculative.md.
"""

from kda_core.serve.spec.generate import (
    Draft,
    SpecGeneration,
    StepRecord,
    accept_length,
    make_noisy_draft,
    ngram_draft,
    speculative_generate,
)
from kda_core.serve.spec.memory import SpecMemory, spec_memory
from kda_core.serve.spec.replay import LayerRing, ReplaySSM, VerifyResult
from kda_core.serve.spec.segment import (
    L2_EPS,
    MAX_DRAFT_TOKENS,
    MAX_RING_LEN,
    RING_FIELDS,
    SegmentOutputs,
    check_draft_tokens,
    check_ring_len,
    exact_replay,
    fold_state,
    per_draft_states,
    reconstruct_outputs,
    ring_verify,
)
from kda_core.sizing import tiny_spec

__all__ = [
    "L2_EPS",
    "MAX_DRAFT_TOKENS",
    "MAX_RING_LEN",
    "RING_FIELDS",
    "Draft",
    "LayerRing",
    "ReplaySSM",
    "SegmentOutputs",
    "SpecGeneration",
    "SpecMemory",
    "StepRecord",
    "VerifyResult",
    "accept_length",
    "check_draft_tokens",
    "check_ring_len",
    "exact_replay",
    "fold_state",
    "make_noisy_draft",
    "ngram_draft",
    "per_draft_states",
    "reconstruct_outputs",
    "ring_verify",
    "spec_memory",
    "speculative_generate",
    "tiny_spec",
]
