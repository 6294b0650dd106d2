"""Reading a trace file as rows: lines in batches, decoded, fed to a format's row parser.

:func:`read_batches` reads ``READ_BYTES`` at a time and yields the complete lines of each block
(UTF-8; a byte-order mark at the start dropped; a line that is not UTF-8 comes as a
``RowError`` in its place; a line over ``MAX_LINE_BYTES`` ends the read with ``ValueError``), so
no more than a block and one partial line is held. :func:`run_rows` hands each non-blank line
to the format's row parser, with the garbage collector paused.
"""

from __future__ import annotations

import gc
import json
import json.scanner
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads.ingest import RowError

MAX_LINE_BYTES = 32 << 20
_READ_BYTES = 4 << 20
_BATCH_LINES = 4096  # lines a batch when the source is an iterable of lines
_BOM = b"\xef\xbb\xbf"
_SCAN_JSON = json.scanner.make_scanner(json.JSONDecoder())  # the C scanner json.loads uses


def json_object(line: str) -> object:
    """``json.loads`` of a stripped line; invalid JSON is a ``RowError`` on the field "JSON"."""
    try:
        obj, end = _SCAN_JSON(line, 0)
    except StopIteration:
        raise RowError("JSON", "invalid JSON (Expecting value)") from None
    except json.JSONDecodeError as e:
        raise RowError("JSON", f"invalid JSON ({e.msg})") from None
    except RecursionError:
        raise RowError("JSON", "invalid JSON (nested too deeply)") from None
    if end != len(line):
        raise RowError("JSON", "invalid JSON (Extra data)")
    return obj


def _decode(raw: bytes) -> list[str | RowError]:
    """The lines of ``raw`` (complete lines, each ending with a newline)."""
    try:
        return raw.decode("utf-8").split("\n")[:-1]  # "\n" never occurs inside a character
    except UnicodeDecodeError:
        out: list[str | RowError] = []
        for line in raw.split(b"\n")[:-1]:
            try:
                out.append(line.decode("utf-8"))
            except UnicodeDecodeError as e:
                out.append(RowError("line", f"the line is not UTF-8 text (byte {e.start})"))
        return out


def read_batches(path: Path) -> Iterator[list[str | RowError]]:
    """The lines of ``path``, a block at a time (see the module docstring)."""
    with path.open("rb") as f:
        rest, lineno = b"", 0
        while True:
            block = f.read(_READ_BYTES)
            data = rest + block if rest else block
            if lineno == 0 and not rest and data.startswith(_BOM):
                data = data[len(_BOM) :]
            if not block:
                if data:
                    yield _decode(data + b"\n")
                return
            # only the first line of ``data`` can be longer than a block (READ_BYTES < the cap)
            first = data.find(b"\n")
            if (first if first >= 0 else len(data)) > MAX_LINE_BYTES:
                raise ValueError(f"{path}: line {lineno + 1} is longer than {MAX_LINE_BYTES} bytes")
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                lines = _decode(data[:cut])
                lineno += len(lines)
                yield lines


def read_lines(path: Path) -> Iterator[str | RowError]:
    """The lines of ``path`` one at a time (see :func:`read_batches`)."""
    for batch in read_batches(path):
        yield from batch


def batches_of(lines: Iterable[str | RowError]) -> Iterator[list[str | RowError]]:
    it = iter(lines)
    while batch := list(islice(it, _BATCH_LINES)):
        yield batch


def run_rows(
    batches: Iterable[list[str | RowError]],
    parse: Callable[[str, int], None],
    acc: Accumulator,
) -> None:
    """Feed the rows to the parser (see the module docstring) until the end or until the
    accumulator is full; a ``RowError`` (from a line or the parser) goes to ``acc.row_failed``."""
    # a batch's parsed rows are alive together: generational GC passes would rescan them
    # again and again (they hold no cycles), so it is paused while the rows are read
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        _feed(batches, parse, acc)
    finally:
        if gc_was_on:
            gc.enable()


def _feed(
    batches: Iterable[list[str | RowError]],
    parse: Callable[[str, int], None],
    acc: Accumulator,
) -> None:
    lineno = 0
    for lines in batches:
        first, lineno = lineno + 1, lineno + len(lines)
        for k, raw in enumerate(lines, start=first):
            if acc.full:
                return
            if type(raw) is not str:  # a line that could not be decoded
                acc.row_failed(k, raw)
                continue
            line = raw.strip()
            if not line:
                continue  # blank lines (e.g. a trailing one) carry no request
            try:
                parse(line, k)
            except RowError as e:
                acc.row_failed(k, e)
