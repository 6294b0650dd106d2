"""Row parsers of the lengths-only CSV traces: BurstGPT and the Azure LLM inference traces.

Neither has prompt content, so the trace they give has no prefix information (every request
gets fresh block ids; ``Trace.has_prefix_info`` is False): they drive memory and concurrency
views, never a hit rate. Columns are found by their header name (any order, extra columns
ignored); the header is the first non-blank line.

* ``burstgpt`` (Wang et al., "BurstGPT", KDD 2025; github.com/HPMLL/BurstGPT ``data/``):
  ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``, ``Timestamp`` in
  seconds from the start of the collection; the newer files add ``Session ID`` and ``Elapsed
  time``. Read: ``Timestamp``, ``Request tokens`` (>= 1), ``Response tokens`` (0 for a failed
  request), ``Log Type`` (the request kind) and ``Session ID`` when present.
* ``azure`` (github.com/Azure/AzurePublicDataset, ``AzureLLMInferenceDataset2023.md`` and
  ``...2024.md``): ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is a date-time,
  ``2023-11-16 18:15:46.6805900`` in 2023 (100 ns digits), ``2024-05-12 00:00:00.001163+00:00``
  or ``2024-05-12 00:00:00+00:00`` in 2024 (no zone = UTC). Arrivals start at 0.

A field is plain text (a quoted field is read as CSV quoting; quoted newlines are not
supported). Rows are sorted by arrival when the file is not (stable).
"""

from __future__ import annotations

import csv
import math
import re
from datetime import datetime, timedelta, timezone

from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads._caps import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from kda_core.workloads.ingest import RowError

BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?"
)


def split_fields(line: str) -> list[str]:
    if '"' in line:
        return next(csv.reader([line]))
    return line.split(",")


def _int_text(s: str, col: str, lo: int, hi: int) -> int:
    s = s.strip()
    if not (s.isascii() and s.isdigit()):
        raise RowError(col, f"{col!r} must be an integer, got {s!r}")
    v = int(s)
    if not lo <= v <= hi:
        raise RowError(col, f"{col!r} must be in [{lo}, {hi}], got {v}")
    return v


def _seconds_text(s: str, col: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise RowError(col, f"{col!r} must be a number of seconds, got {s.strip()!r}") from None
    if not math.isfinite(v) or v < 0:
        raise RowError(col, f"{col!r} must be finite and >= 0, got {s.strip()!r}")
    return v


def _epoch_seconds(s: str, col: str) -> float:
    """A date-time as seconds since 1970 (UTC when it has no zone), up to 9 fraction digits."""
    m = _DATETIME.fullmatch(s.strip())
    if m is None:
        raise RowError(
            col,
            f"{col!r} must be a date-time like 2024-05-12 00:00:00.001163+00:00, got {s.strip()!r}",
        )
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    tz = timezone.utc
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        zh, zm = int(zone[1:3]), int(zone[-2:])
        tz = timezone(sign * timedelta(hours=zh, minutes=zm))
    try:
        whole = datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), tzinfo=tz)
    except ValueError as e:
        raise RowError(col, f"{col!r} is not a valid date-time ({e}): {s.strip()!r}") from None
    return whole.timestamp() + (float("0." + frac) if frac else 0.0)


class CsvRows:
    """A header-led CSV trace (``fmt`` "burstgpt" or "azure"); see the module docstring."""

    def __init__(self, acc: Accumulator, fmt: str) -> None:
        self.acc, self.fmt = acc, fmt
        self.need = BURSTGPT_COLUMNS if fmt == "burstgpt" else AZURE_COLUMNS
        self.cols: dict[str, int] | None = None
        self.width = 0

    def _parse_header(self, fields: list[str], lineno: int) -> None:
        names = [f.strip() for f in fields]
        missing = [c for c in self.need if c not in names]
        if missing:
            raise ValueError(
                f"{self.acc.source}line {lineno}: the {self.fmt} header has no column "
                f"{missing[0]!r} (needs {', '.join(self.need)}; got {', '.join(names)})"
            )
        self.cols = {n: i for i, n in enumerate(names)}
        self.width = len(names)

    def __call__(self, line: str, lineno: int) -> None:
        fields = split_fields(line)
        if self.cols is None:
            self._parse_header(fields, lineno)
            return
        if len(fields) != self.width:
            raise RowError("fields", f"{len(fields)} fields where the header has {self.width}")
        c = self.cols
        if self.fmt == "burstgpt":
            t = _seconds_text(fields[c["Timestamp"]], "Timestamp")
            n_in = _int_text(fields[c["Request tokens"]], "Request tokens", 1, MAX_INPUT_TOKENS)
            n_out = _int_text(fields[c["Response tokens"]], "Response tokens", 0, MAX_OUTPUT_TOKENS)
            kind = self.acc.kind(fields[c["Log Type"]].strip() if "Log Type" in c else "burstgpt")
            sid = fields[c["Session ID"]].strip() if "Session ID" in c else ""
            session = self.acc.session(sid or None)
        else:
            t = _epoch_seconds(fields[c["TIMESTAMP"]], "TIMESTAMP")
            n_in = _int_text(fields[c["ContextTokens"]], "ContextTokens", 1, MAX_INPUT_TOKENS)
            n_out = _int_text(fields[c["GeneratedTokens"]], "GeneratedTokens", 0, MAX_OUTPUT_TOKENS)
            kind, session = 0, -1
        self.acc.add(lineno, t, n_in, n_out, None, session, kind)
