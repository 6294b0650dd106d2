"""What both object stores share (``store.EmbeddedStore``, ``mooncake.MooncakeStore``): the key
rule (a lowercase hex prefix hash), the cap on one object and the counters."""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEY = re.compile(r"^[0-9a-f]{8,64}$")
MAX_OBJECT_BYTES = 1 << 30


def check_key(key: object) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"key must be a lowercase hex prefix hash (8-64 chars), got {key!r}")
    return key


@dataclass(slots=True)
class StoreStats:
    puts: int = 0
    gets: int = 0
    misses: int = 0
    bytes_put: int = 0
    bytes_got: int = 0
