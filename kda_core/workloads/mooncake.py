"""Mooncake JSONL traces: a strict streaming parser, the loader and the two bundled traces.

Format (Qin et al., "Mooncake", USENIX FAST 2025; github.com/kvcache-ai/Mooncake
``FAST25-release/traces``): one JSON object per line with ``timestamp`` (ms), ``input_length``,
``output_length`` and ``hash_ids`` (chained ids of 512-token blocks). The bundled copies live
in ``assets/traces/`` (Apache-2.0). Left out: output-token hashes (Mooncake has none).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import numpy as np

from kda_core.workloads.traces import (
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_REQUESTS,
    MAX_TOTAL_BLOCKS,
    MOONCAKE_BLOCK_TOKENS,
    Trace,
    _make_trace,
    _offsets,
)

TRACES_DIR = Path(__file__).resolve().parents[2] / "assets" / "traces"
BUNDLED_TRACES: dict[str, str] = {
    "conversation": "mooncake_conversation_trace.jsonl",
    "synthetic": "mooncake_synthetic_trace.jsonl",
}


def _parse_int_field(obj: dict, key: str, lineno: int, lo: int, hi: int) -> int:
    if key not in obj:
        raise ValueError(f"line {lineno}: missing field {key!r}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"line {lineno}: {key!r} must be a number, got {v!r}")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ValueError(f"line {lineno}: {key!r} must be an integer, got {v!r}")
        v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"line {lineno}: {key!r} must be in [{lo}, {hi}], got {v}")
    return v


def _parse_line(
    line: str, lineno: int, block_size: int, last_t: float, parent: dict[int, int]
) -> tuple[float, int, int, list[int]]:
    """One JSONL line -> (timestamp ms, input length, output length, hash ids); records each
    id's parent in ``parent`` (ValueError naming the line on any violation)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"line {lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"line {lineno}: expected a JSON object")
    if "timestamp" not in obj:
        raise ValueError(f"line {lineno}: missing field 'timestamp'")
    t = obj["timestamp"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ValueError(f"line {lineno}: 'timestamp' must be a finite number, got {t!r}")
    if t < 0:
        raise ValueError(f"line {lineno}: 'timestamp' must be >= 0, got {t}")
    if t < last_t:
        raise ValueError(f"line {lineno}: 'timestamp' {t} is before the previous {last_t}")
    n_in = _parse_int_field(obj, "input_length", lineno, 1, MAX_INPUT_TOKENS)
    n_out = _parse_int_field(obj, "output_length", lineno, 0, MAX_OUTPUT_TOKENS)
    if "hash_ids" not in obj:
        raise ValueError(f"line {lineno}: missing field 'hash_ids'")
    h = obj["hash_ids"]
    if not isinstance(h, list):
        raise ValueError(f"line {lineno}: 'hash_ids' must be a list")
    want = -(-n_in // block_size)
    if len(h) != want:
        raise ValueError(
            f"line {lineno}: 'hash_ids' has {len(h)} ids, input_length {n_in} needs "
            f"ceil({n_in}/{block_size}) = {want}"
        )
    prev = -1
    for x in h:
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise ValueError(f"line {lineno}: 'hash_ids' must be non-negative ints, got {x!r}")
        p = parent.setdefault(x, prev)
        if p != prev:
            raise ValueError(
                f"line {lineno}: hash id {x} follows {prev} here but {p} on an earlier line"
            )
        prev = x
    return float(t), n_in, n_out, h


def parse_mooncake_lines(
    lines: Iterable[str],
    *,
    name: str = "mooncake",
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_REQUESTS,
) -> Trace:
    """Parse Mooncake JSONL lines (see :func:`load_mooncake`); line numbers start at 1."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not 1 <= max_requests <= MAX_REQUESTS:
        raise ValueError(f"max_requests must be in [1, {MAX_REQUESTS}], got {max_requests}")
    ts: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    counts: list[int] = []
    blocks: list[int] = []
    parent: dict[int, int] = {}
    last_t = 0.0
    lineno = 0
    for lineno, raw in enumerate(lines, start=1):  # noqa: B007
        line = raw.strip()
        if not line:
            continue  # blank lines (e.g. a trailing one) carry no request
        if len(ts) >= max_requests:
            raise ValueError(f"line {lineno}: more than max_requests={max_requests} requests")
        t, n_in, n_out, h = _parse_line(line, lineno, block_size, last_t, parent)
        last_t = t
        want = len(h)
        if len(blocks) + want > MAX_TOTAL_BLOCKS:
            raise ValueError(f"line {lineno}: more than {MAX_TOTAL_BLOCKS} blocks in total")
        ts.append(t / 1000.0)
        ins.append(n_in)
        outs.append(n_out)
        counts.append(want)
        blocks.extend(h)
    if not ts:
        raise ValueError(f"{name}: the trace has no requests")
    offsets = _offsets(counts)
    n = len(ts)
    return _make_trace(
        name,
        block_size,
        np.array(ts),
        np.array(ins),
        np.array(outs),
        offsets,
        np.array(blocks, dtype=np.int64),
        np.full(n, -1),
        np.zeros(n, dtype=np.int64),
        ("conversation",),
    )


def load_mooncake(
    path: str | Path,
    *,
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_REQUESTS,
) -> Trace:
    """Read a Mooncake JSONL trace (``timestamp`` ms, ``input_length``, ``output_length``,
    ``hash_ids`` of ``block_size``-token blocks), streaming it line by line.

    Strict: a bad line (invalid JSON, missing field, non-integer or negative length, timestamp
    going backwards, ``len(hash_ids) != ceil(input_length / block_size)``, a hash id seen after
    two different parents) raises ``ValueError`` naming the line number (counted in the file,
    blank lines included). Blank (whitespace-only) lines are skipped. Timestamps become
    seconds. Capped at ``max_requests`` requests and ``MAX_TOTAL_BLOCKS`` blocks.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    with p.open("r", encoding="utf-8") as f:
        return parse_mooncake_lines(
            f, name=p.stem, block_size=block_size, max_requests=max_requests
        )


@lru_cache(maxsize=4)
def bundled_trace(name: str = "conversation") -> Trace:
    """A bundled Mooncake trace (``"conversation"``, the default real workload, or
    ``"synthetic"``), loaded once per process from ``assets/traces/`` next to the package."""
    if name not in BUNDLED_TRACES:
        raise ValueError(f"name must be one of {sorted(BUNDLED_TRACES)}, got {name!r}")
    return load_mooncake(TRACES_DIR / BUNDLED_TRACES[name])
