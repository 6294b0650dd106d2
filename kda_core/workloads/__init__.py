"""Request workloads for the trace-driven simulator: real traces from files, synthetic ones.

``traces`` (the :class:`Trace` container, validation, stats), ``loader`` (``load_trace``: the
file formats, read as a stream through ``ingest`` + ``chains``, rows parsed by ``jsonl_rows``,
``csv_rows``, ``conversations``), ``mooncake`` (the strict Mooncake loader, the bundled
traces), ``shared_prefix`` (SGLang's generated-shared-prefix workload), ``builder`` +
``synthetic`` (seeded generators). See docs/workloads.md.
"""

from kda_core.workloads.ingest import MAX_TRACE_BLOCKS, MAX_TRACE_FILE_BYTES, MAX_TRACE_REQUESTS
from kda_core.workloads.loader import FORMATS, detect_format, load_trace
from kda_core.workloads.mooncake import (
    BUNDLED_TRACES,
    TRACES_DIR,
    bundled_trace,
    load_mooncake,
    parse_mooncake_lines,
)
from kda_core.workloads.rows import MAX_LINE_BYTES
from kda_core.workloads.shared_prefix import GSP_DEFAULTS, generated_shared_prefix
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
    require_prefix_info,
    trace_stats,
    validate,
)

__all__ = [
    "BUNDLED_TRACES",
    "FORMATS",
    "GSP_DEFAULTS",
    "MAX_LINE_BYTES",
    "MAX_TRACE_BLOCKS",
    "MAX_TRACE_FILE_BYTES",
    "MAX_TRACE_REQUESTS",
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
    "detect_format",
    "generated_shared_prefix",
    "ideal_prefix_tokens",
    "load_mooncake",
    "load_trace",
    "mix",
    "multi_turn_chat",
    "one_shot_documents",
    "parse_mooncake_lines",
    "require_prefix_info",
    "trace_stats",
    "uniform_prefix",
    "validate",
    "workload",
]
