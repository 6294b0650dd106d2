"""``load_trace``: a request trace from a file in any supported format, read as a stream.

Formats (``FORMATS``; sources and fields in each parser's module, summary in docs/workloads.md):
``mooncake`` (with or without ``hash_ids``; aiperf's extra fields ignored) and ``token-ids``
(``_jsonl_rows``), ``conversations`` (``_conversations``), ``burstgpt`` and ``azure``
(``_csv_rows``; lengths only), ``sglang-gsp`` (a JSON object of SGLang's generated-shared-prefix
settings, turned into the trace it generates; ``_shared_prefix``). ``format="auto"`` decides
from the first non-blank line (JSON keys or CSV header) and refuses a line that fits no
format, or more than one, naming the candidates. The file is read line by line into compact
arrays (``_accumulator``), never whole; caps (``ValueError``): ``MAX_TRACE_FILE_BYTES`` a file,
``MAX_TRACE_REQUESTS`` requests, ``MAX_TRACE_BLOCKS`` block ids, ``MAX_LINE_BYTES`` a line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads._caps import MAX_TRACE_FILE_BYTES, MAX_TRACE_REQUESTS, MOONCAKE_BLOCK_TOKENS
from kda_core.workloads._conversations import ConversationRows
from kda_core.workloads._csv_rows import AZURE_COLUMNS, BURSTGPT_COLUMNS, CsvRows, split_fields
from kda_core.workloads._jsonl_rows import TEXT_FIELDS, MooncakeRows, TokenIdRows
from kda_core.workloads._rows import read_batches, read_lines, run_rows
from kda_core.workloads._shared_prefix import gsp_from_settings
from kda_core.workloads.ingest import RowError
from kda_core.workloads.traces import Trace

FORMATS: tuple[str, ...] = (
    "mooncake",
    "burstgpt",
    "azure",
    "token-ids",
    "conversations",
    "sglang-gsp",
)
_ON_ERROR = ("raise", "skip")
_MAX_SETTINGS_BYTES = 1 << 20
_DETECT_LINES = 1000  # blank lines looked past to find the first row


def check_path(path: str | Path) -> Path:
    """``path`` as an existing file within ``MAX_TRACE_FILE_BYTES``."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    size = p.stat().st_size
    if size > MAX_TRACE_FILE_BYTES:
        raise ValueError(f"{p}: {size} bytes; the cap is {MAX_TRACE_FILE_BYTES} bytes (2 GiB)")
    return p


def _json_candidates(obj: object) -> set[str]:
    if isinstance(obj, list):
        return {"token-ids"} if all(type(x) is int for x in obj) else set()
    if not isinstance(obj, dict):
        return set()
    keys, found = set(obj), set()
    if (
        any(k.startswith("gsp_") for k in keys)
        or obj.get("dataset_name") == "generated-shared-prefix"
    ):
        found.add("sglang-gsp")
    if keys & {"messages", "conversations"}:
        found.add("conversations")
    if "token_ids" in keys:
        found.add("token-ids")
    if keys & ({"input_length", "hash_ids"} | set(TEXT_FIELDS) - {"messages"}):
        found.add("mooncake")
    return found


def _parse_whole_json(p: Path, lineno: int) -> set[str]:
    """Candidates of a file whose first line is not JSON alone: a multi-line JSON document."""
    if p.stat().st_size > _MAX_SETTINGS_BYTES:
        raise ValueError(f"{p}: line {lineno} is not a JSON value on its own (JSON lines expected)")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(
            f"{p}: line {lineno} is not JSON on its own, and the whole file is not one JSON "
            f"document either ({e})"
        ) from None
    if isinstance(obj, list):
        raise ValueError(f"{p}: one JSON array; write one JSON object a line (JSON lines)")
    return _json_candidates(obj) & {"sglang-gsp"}


def detect_format(path: str | Path) -> str:
    """The format of ``path`` from its first non-blank line (see the module docstring)."""
    p = check_path(path)
    for lineno, raw in enumerate(read_lines(p), start=1):
        if isinstance(raw, RowError) or lineno > _DETECT_LINES:
            raise ValueError(f"{p}: cannot tell the format: line {lineno} is not a row ({raw})")
        line = raw.strip()
        if not line:
            continue
        if line[0] in "{[":
            try:
                found = _json_candidates(json.loads(line))
            except (json.JSONDecodeError, RecursionError):
                found = _parse_whole_json(p, lineno)
        else:
            names = {f.strip() for f in split_fields(line)}
            found = {
                f
                for f, cols in (("burstgpt", BURSTGPT_COLUMNS), ("azure", AZURE_COLUMNS))
                if set(cols) <= names
            }
        if len(found) == 1:
            return found.pop()
        what = "fits none of the formats" if not found else f"fits {' and '.join(sorted(found))}"
        raise RowError(
            "format",
            f"{p}: cannot tell the format: line {lineno} {what}; pass format= one of {FORMATS}",
            line=lineno,
            fits=tuple(sorted(found)),
        )
    raise ValueError(f"{p}: the file has no rows")


def read_rows(
    batches: Iterable[list[str | RowError]],
    fmt: str,
    acc: Accumulator,
    name: str,
    *,
    strict_mooncake: bool = False,
) -> Trace:
    """Run a format's row parser over the batches of lines into ``acc``; the finished Trace."""
    parsers: dict[str, Callable[[Accumulator], Callable[[str, int], None]]] = {
        "mooncake": lambda a: MooncakeRows(a, strict=strict_mooncake),
        "token-ids": TokenIdRows,
        "conversations": ConversationRows,
        "burstgpt": lambda a: CsvRows(a, "burstgpt"),
        "azure": lambda a: CsvRows(a, "azure"),
    }
    run_rows(batches, parsers[fmt](acc), acc)
    return acc.finish(name, fmt, relative_time=fmt == "azure")


def _check_int(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _parse_gsp_file(p: Path, block_size: int, cap: int, limit: int | None) -> Trace:
    """The generated-shared-prefix trace of a settings file (``_shared_prefix``)."""
    if p.stat().st_size > _MAX_SETTINGS_BYTES:
        raise ValueError(f"{p}: a settings file over {_MAX_SETTINGS_BYTES} bytes")
    try:
        settings = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{p}: the settings are not a JSON object ({e})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{p}: the settings must be a JSON object")
    try:
        trace = gsp_from_settings(settings, block_size=block_size)
    except ValueError as e:
        raise ValueError(f"{p}: {e}") from None
    if len(trace) > cap and limit is None:
        raise ValueError(f"{p}: {len(trace)} requests, more than max_requests={cap}")
    trace = replace(trace, name=p.stem, source_format="sglang-gsp")
    return trace if limit is None else trace.head(limit)


def load_trace(
    path: str | Path,
    format: str = "auto",
    *,
    on_error: str = "raise",
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    limit: int | None = None,
    max_requests: int = MAX_TRACE_REQUESTS,
) -> Trace:
    """Read a request trace, streaming: ``format`` one of ``FORMATS`` or ``"auto"``.

    ``on_error="raise"``: a malformed row raises ``ValueError`` naming the file, the line and
    the field; ``"skip"``: it is skipped, and the returned trace counts it (``skipped_rows``)
    and keeps the first reasons (``skip_reasons``). ``block_size``: tokens per block (Mooncake
    ``hash_ids`` blocks; the hashing block of token ids and conversations). ``limit``: read
    only the first ``limit`` requests. Caps: a file of at most 2 GiB, at most ``max_requests``
    (<= 2,000,000) requests and 50,000,000 block ids, lines of at most 32 MiB (``ValueError``).
    Lengths-only formats give ``has_prefix_info=False``. Rows are sorted by arrival (stable).
    """
    p = check_path(path)
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"format must be 'auto' or one of {FORMATS}, got {format!r}")
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
    b = _check_int("block_size", block_size, 1, 65536)
    cap = _check_int("max_requests", max_requests, 1, MAX_TRACE_REQUESTS)
    lim = None if limit is None else _check_int("limit", limit, 1, cap)
    fmt = detect_format(p) if format == "auto" else format
    if fmt == "sglang-gsp":
        return _parse_gsp_file(p, b, cap, lim)
    kind = None if fmt == "burstgpt" else fmt
    acc = Accumulator(
        f"{p}: ",
        b,
        kind,
        skip=on_error == "skip",
        chain_check=fmt == "mooncake",
        max_requests=cap,
        limit=lim,
    )
    return read_rows(read_batches(p), fmt, acc, p.stem)
