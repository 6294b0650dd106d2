"""Request workloads for the trace-driven simulator: real traces from files, synthetic ones.

``traces`` (the :class:`Trace` container), ``_loader`` (``load_trace``: the file formats, read
as a stream through ``_rows``, ``_accumulator`` + ``_chains``, rows parsed by ``_jsonl_rows``,
``_csv_rows``, ``_conversations``, ``_shared_prefix``), ``ingest`` (what a file may not do:
``RowError``), ``_caps`` (the caps), ``mooncake`` (the strict Mooncake loader, the bundled
traces), ``_builder`` + ``_synthetic`` (seeded generators, by name through ``workload``). See
docs/workloads.md.
"""

from kda_core.workloads._loader import FORMATS, load_trace
from kda_core.workloads._synthetic import workload
from kda_core.workloads.mooncake import (
    BUNDLED_TRACES,
    TRACES_DIR,
    bundled_trace,
    load_mooncake,
    parse_mooncake_lines,
)
from kda_core.workloads.traces import Trace, ideal_prefix_tokens, require_prefix_info

__all__ = [
    "BUNDLED_TRACES",
    "FORMATS",
    "TRACES_DIR",
    "Trace",
    "bundled_trace",
    "ideal_prefix_tokens",
    "load_mooncake",
    "load_trace",
    "parse_mooncake_lines",
    "require_prefix_info",
    "workload",
]
