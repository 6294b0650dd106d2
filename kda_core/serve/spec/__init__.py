"""Speculative decoding on TinyHybrid with ReplaySSM (SGLang ``--enable-linear-replayssm-spec``),
the mechanism the engine decodes with when ``Engine(speculative=...)`` is set.

Re-exports only: ``segment`` (the segment math and argument checks), ``replay`` (rings,
``ReplaySSM`` verify / commit), ``memory`` (rings vs per-draft states, bytes), ``draft``
(drafts, acceptance, the engine's per-request state). See docs/speculative.md.
"""

from kda_core.serve.spec.draft import (
    Draft,
    SpecConfig,
    SpecRequest,
    VerifyRecord,
    accept_length,
    make_noisy_draft,
    ngram_draft,
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
    "SpecConfig",
    "SpecMemory",
    "SpecRequest",
    "VerifyRecord",
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
    "tiny_spec",
]
