"""The data behind a figure as CSV: ``write_csv`` (equal-length columns), ``series_csv``.

Files go to one per-process temp dir, named ``<stem>-<content hash>.csv`` so repeated calls do
not pile up files; floats are written with ``repr`` (no rounding). The columns themselves come
from the apps / ``kda_core.studies``; this module only serialises them.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

_CSV_DIR: Path | None = None


def _csv_dir() -> Path:
    global _CSV_DIR
    if _CSV_DIR is None or not _CSV_DIR.is_dir():
        _CSV_DIR = Path(tempfile.mkdtemp(prefix="kda-csv-"))
    return _CSV_DIR


def _cell(x: object) -> object:
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _write(stem: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_cell(x) for x in r])
    text = buf.getvalue()
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in stem) or "data"
    path = _csv_dir() / f"{safe}-{digest}.csv"
    if not path.is_file():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return str(path)


def write_csv(stem: str, columns: Mapping[str, Sequence[object] | np.ndarray]) -> str:
    """Write equal-length columns as ``<stem>-<hash>.csv``; returns the path."""
    cols = {
        k: list(np.asarray(v).tolist()) if isinstance(v, np.ndarray) else list(v)
        for k, v in columns.items()
    }
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"write_csv: columns must have equal lengths, got {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    return _write(stem, list(cols), [[cols[k][i] for k in cols] for i in range(n)])


def series_csv(
    stem: str,
    series: Mapping[str, tuple[Sequence[object] | np.ndarray, Sequence[object] | np.ndarray]],
    x_name: str = "x",
    y_name: str = "y",
) -> str:
    """Long format (series, x, y) for several series of possibly different lengths."""
    rows: list[list[object]] = []
    for name, (x, y) in series.items():
        xs = np.asarray(x).tolist()
        ys = np.asarray(y).tolist()
        if len(xs) != len(ys):
            raise ValueError(f"series_csv: {name!r} has {len(xs)} x and {len(ys)} y values")
        rows.extend([name, a, b] for a, b in zip(xs, ys))
    return _write(stem, ["series", x_name, y_name], rows)
