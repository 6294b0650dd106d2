"""The shipped k3-mini weights: one .npz of float32 arrays plus a JSON record with its sha256.

``assets/weights/k3-mini.npz`` holds one array per parameter, keyed like
`kda_core.model.named_weights` (``embed``, ``blocks.3.mixer.w_uk``, ...), and ``__meta__``: the
training record as UTF-8 JSON bytes (model and training config, corpus hashes, final metrics).
``k3-mini.json`` beside it repeats the record and adds the file's sha256; `load` refuses a file
whose hash differs. The zip is written with fixed timestamps and order, so the same arrays
always give the same bytes (and the same hash).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "assets" / "weights" / "k3-mini.npz"
_META_KEY = "__meta__"
_MAX_FILE_BYTES = 8 << 20  # the cap on the shipped file: small enough to commit and clone
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _record_path(path: Path) -> Path:
    return Path(path).with_suffix(".json")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> str:
    """Write arrays (as float32) + meta to ``path`` and the record beside it; returns sha256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        items = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(arrays.items())}
        items[_META_KEY] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
        for key, arr in items.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(key + ".npy", _ZIP_TIME), buf.getvalue())
    digest = sha256_file(path)
    record = {"file": path.name, "sha256": digest, "bytes": path.stat().st_size, **meta}
    _record_path(path).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return digest


@functools.lru_cache(maxsize=4)
def _parse_weights_file(path: str, mtime_ns: int) -> tuple[dict[str, np.ndarray], dict, str]:
    p = Path(path)
    rec = _record_path(p)
    got = sha256_file(p)
    if rec.exists():
        want = json.loads(rec.read_text())["sha256"]
        if got != want:
            raise ValueError(f"weights {p.name}: sha256 {got} does not match {rec.name} ({want})")
    with np.load(p, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop(_META_KEY).tobytes().decode()) if _META_KEY in arrays else {}
    for a in arrays.values():
        a.setflags(write=False)  # shared between callers through the cache
    return arrays, meta, got


def _checked(path: Path) -> tuple[dict[str, np.ndarray], dict, str]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(
            f"weights file {p} does not exist (train it: python -m kda_core.model.train)"
        )
    if p.stat().st_size > _MAX_FILE_BYTES:
        raise ValueError(f"weights file {p} is larger than {_MAX_FILE_BYTES} bytes")
    return _parse_weights_file(str(p.resolve()), p.stat().st_mtime_ns)


def digest(path: Path = DEFAULT_PATH) -> str:
    """sha256 of the weights file (checked against its record when there is one; cached)."""
    return _checked(path)[2]


def load(path: Path = DEFAULT_PATH) -> tuple[dict[str, np.ndarray], dict]:
    """(float32 arrays keyed by parameter name, training record); hash-checked, cached."""
    arrays, meta, _ = _checked(path)
    return arrays, meta
