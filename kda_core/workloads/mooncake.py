"""Mooncake JSONL traces in their original, strict form: the loader and the bundled traces.

Format (Qin et al., "Mooncake", USENIX FAST 2025; github.com/kvcache-ai/Mooncake
``FAST25-release/traces``): one JSON object per line with ``timestamp`` (ms), ``input_length``,
``output_length`` and ``hash_ids`` (chained ids of 512-token blocks), every field required and
timestamps non-decreasing. The row parser is ``_jsonl_rows.MooncakeRows`` (``strict=True``), the
same one ``load_trace`` uses without ``strict`` (aiperf's optional fields). The bundled copies
live in ``assets/traces/`` (Apache-2.0). Left out: output-token hashes (Mooncake has none).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from kda_core._checks import check_int
from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads._caps import MAX_TRACE_REQUESTS, MOONCAKE_BLOCK_TOKENS
from kda_core.workloads._loader import check_path, read_rows
from kda_core.workloads._rows import batches_of, read_batches
from kda_core.workloads.traces import Trace

TRACES_DIR = Path(__file__).resolve().parents[2] / "assets" / "traces"
BUNDLED_TRACES: dict[str, str] = {
    "conversation": "mooncake_conversation_trace.jsonl",
    "synthetic": "mooncake_synthetic_trace.jsonl",
}


def parse_mooncake_lines(
    lines: Iterable[str],
    *,
    name: str = "mooncake",
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_TRACE_REQUESTS,
) -> Trace:
    """Parse Mooncake JSONL lines (see :func:`load_mooncake`); line numbers start at 1."""
    return _parse(batches_of(lines), f"{name}: ", name, block_size, max_requests)


def _parse(
    batches: Iterable[list[str]], source: str, name: str, block_size: int, max_requests: int
) -> Trace:
    b = check_int("block_size", block_size, 1, 65536)
    cap = check_int("max_requests", max_requests, 1, MAX_TRACE_REQUESTS)
    acc = Accumulator(source, b, "mooncake", max_requests=cap)
    return read_rows(batches, "mooncake", acc, name, strict_mooncake=True)


def load_mooncake(
    path: str | Path,
    *,
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_TRACE_REQUESTS,
) -> Trace:
    """Read a Mooncake JSONL trace (``timestamp`` ms, ``input_length``, ``output_length``,
    ``hash_ids`` of ``block_size``-token blocks), streaming it line by line.

    Strict: a bad line (invalid JSON, missing field, non-integer or negative length, timestamp
    going backwards, ``len(hash_ids) != ceil(input_length / block_size)``, a hash id seen after
    two different parents) raises ``ValueError`` naming the file and the line number (counted
    in the file, blank lines included). Blank (whitespace-only) lines are skipped. Timestamps
    become seconds. Capped as ``load_trace`` (``max_requests`` requests, 50,000,000 block ids,
    a 2 GiB file). ``load_trace(path, "mooncake")`` reads the same rows with aiperf's optional
    fields and can skip bad rows instead.
    """
    p = check_path(path)
    return _parse(read_batches(p), f"{p}: ", p.stem, block_size, max_requests)


@lru_cache(maxsize=4)
def bundled_trace(name: str = "conversation") -> Trace:
    """A bundled Mooncake trace (``"conversation"``, the default real workload, or
    ``"synthetic"``), loaded once per process from ``assets/traces/`` next to the package."""
    if name not in BUNDLED_TRACES:
        raise ValueError(f"name must be one of {sorted(BUNDLED_TRACES)}, got {name!r}")
    return load_mooncake(TRACES_DIR / BUNDLED_TRACES[name])
