"""Keep freed heap memory in the process while serving: glibc's malloc returns the batched
passes' multi-megabyte temporaries to the kernel as they are freed (``mmap`` from
``M_MMAP_THRESHOLD`` on, the heap top trimmed past ``M_TRIM_THRESHOLD``), so every layer of
every step faulted its pages in again (2,500-6,500 minor faults per 32 x 16 prefill).
``keep_freed_memory`` raises both thresholds once per process (``mallopt``). Declined by
``KDA_KEEP_FREED_MEMORY=0`` or the user's own ``MALLOC_*_`` variables; other C libraries:
nothing happens. Figures: docs/serving.md."""

from __future__ import annotations

import ctypes
import functools
import os
import sys

MMAP_BYTES = 32 << 20  # blocks below this come from the heap, not a fresh mmap
TRIM_BYTES = 128 << 20  # the heap's top is returned to the kernel past this much free
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
OPT_OUT = "KDA_KEEP_FREED_MEMORY"
_GLIBC_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def declined() -> str | None:
    """Why the thresholds are left alone (the variable that says so), or None."""
    if os.environ.get(OPT_OUT, "").strip().lower() in ("0", "false", "no", "off"):
        return OPT_OUT
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if "malloc.mmap_threshold" in tunables or "malloc.trim_threshold" in tunables:
        return "GLIBC_TUNABLES"
    return next((var for var in _GLIBC_VARS if var in os.environ), None)


@functools.cache  # once per process
def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (``MMAP_BYTES``, ``TRIM_BYTES``). Returns True if
    they are set; False where there is no glibc or the environment declines it (``declined``)."""
    if not sys.platform.startswith("linux") or declined() is not None:
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        gnu = libc.gnu_get_libc_version  # glibc only (musl's mallopt does nothing)
        gnu.restype = ctypes.c_char_p
        return bool(gnu()) and bool(
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)
            and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
        )
    except (OSError, AttributeError):
        return False
