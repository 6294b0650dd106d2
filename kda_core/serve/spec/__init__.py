"""Speculative decoding on TinyHybrid with ReplaySSM (SGLang ``--enable-linear-replayssm-spec``),
what ``Engine(speculative=...)`` decodes with. docs/speculative.md.
"""

from kda_core.serve.spec._draft import (
    SpecConfig,
    SpecRequest,
    VerifyRecord,
    accept_length,
    make_noisy_draft,
)
from kda_core.serve.spec._replay import (
    MAX_DRAFT_TOKENS,
    RING_FIELDS,
    ReplaySSM,
    VerifyResult,
    check_draft_tokens,
    check_ring_len,
    exact_replay,
)

__all__ = [
    "MAX_DRAFT_TOKENS",
    "RING_FIELDS",
    "ReplaySSM",
    "SpecConfig",
    "SpecRequest",
    "VerifyRecord",
    "VerifyResult",
    "accept_length",
    "check_draft_tokens",
    "check_ring_len",
    "exact_replay",
    "make_noisy_draft",
]
