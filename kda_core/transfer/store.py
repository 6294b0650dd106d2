"""Object stores keyed by prefix hash: bytes in, bytes out; they never look inside.

``EmbeddedStore()`` keeps objects in a dict of this process (the default: ``make demo`` needs
no service). ``EmbeddedStore(path)`` keeps one ``<prefix hash>.safetensors`` file per object
in a directory, so two processes on one machine share it (the embedded medium of the PD
selftest); a write goes to a temporary file renamed into place, so a reader sees a whole
object or none. ``kda_core.transfer.mooncake.MooncakeStore`` has the same methods.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kda_core.transfer._store_rules import MAX_OBJECT_BYTES, StoreStats, check_key

__all__ = ["EmbeddedStore"]


class EmbeddedStore:
    """An in-process store (``path=None``) or a directory of safetensors files (``path``)."""

    name = "embedded"

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
        self._mem: dict[str, bytes] = {}
        self.stats = StoreStats()

    def _file(self, key: str) -> Path:
        assert self.path is not None
        return self.path / f"{check_key(key)}.safetensors"

    def put(self, key: str, data: bytes) -> None:
        check_key(key)
        if not isinstance(data, (bytes, bytearray)) or not 0 < len(data) <= MAX_OBJECT_BYTES:
            raise ValueError(f"data must be 1..{MAX_OBJECT_BYTES} bytes")
        if self.path is None:
            self._mem[key] = bytes(data)
        else:
            fd, tmp = tempfile.mkstemp(dir=self.path, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self._file(key))
        self.stats.puts += 1
        self.stats.bytes_put += len(data)

    def get(self, key: str) -> bytes | None:
        check_key(key)
        if self.path is None:
            data = self._mem.get(key)
        else:
            try:
                data = self._file(key).read_bytes()
            except FileNotFoundError:
                data = None
        if data is None:
            self.stats.misses += 1
            return None
        self.stats.gets += 1
        self.stats.bytes_got += len(data)
        return data

    def contains_many(self, keys: list[str]) -> list[bool]:
        if self.path is None:
            return [check_key(k) in self._mem for k in keys]
        return [self._file(k).exists() for k in keys]

    def keys(self) -> list[str]:
        if self.path is None:
            return sorted(self._mem)
        return sorted(p.stem for p in self.path.glob("*.safetensors"))

    def close(self) -> None:
        self._mem.clear()
