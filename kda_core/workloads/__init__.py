"""Request workloads for the trace-driven simulator: the real Mooncake traces and synthetic ones.

``traces`` (the :class:`Trace` container, validation, stats), ``mooncake`` (the JSONL loader,
the bundled traces), ``builder`` + ``synthetic`` (seeded generators). See docs/workloads.md.
"""

from kda_core.workloads.mooncake import (
    BUNDLED_TRACES,
    TRACES_DIR,
    bundled_trace,
    load_mooncake,
    parse_mooncake_lines,
)
from kda_core.workloads.synthetic import (
    SYNTHETIC,
    agentic,
    mix,
    multi_turn_chat,
    one_shot_documents,
    uniform_prefix,
    workload,
)
from kda_core.workloads.traces import (
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_REQUESTS,
    MAX_TOTAL_BLOCKS,
    MOONCAKE_BLOCK_TOKENS,
    Trace,
    TraceStats,
    ideal_prefix_tokens,
    trace_stats,
    validate,
)

__all__ = [
    "BUNDLED_TRACES",
    "MAX_INPUT_TOKENS",
    "MAX_OUTPUT_TOKENS",
    "MAX_REQUESTS",
    "MAX_TOTAL_BLOCKS",
    "MOONCAKE_BLOCK_TOKENS",
    "SYNTHETIC",
    "TRACES_DIR",
    "Trace",
    "TraceStats",
    "agentic",
    "bundled_trace",
    "ideal_prefix_tokens",
    "load_mooncake",
    "mix",
    "multi_turn_chat",
    "one_shot_documents",
    "parse_mooncake_lines",
    "trace_stats",
    "uniform_prefix",
    "validate",
    "workload",
]
