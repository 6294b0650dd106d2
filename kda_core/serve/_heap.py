"""Keep freed heap memory in the process while serving: the batched passes' temporaries are
megabytes each, and glibc's default malloc hands such blocks back to the kernel as soon as they
are freed, so every layer of every step faults its pages in again.

glibc serves blocks of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB at first, raised
dynamically up to the largest mmapped block freed so far) with a fresh ``mmap`` each, and
trims the top of its heap once more than ``M_TRIM_THRESHOLD`` is free there. A packed prefill of
32 x 16 tokens allocates [512, 548] projections, [512, 512] MLP activations and the varlen
KDA's gathers and intra-chunk arrays per layer: measured 2,500-6,500 minor page faults per
``forward_packed`` call, 7-11 ms of system time on an ~80 ms call (2-vCPU VM). With the
thresholds below the faults go to 0 (``keep_freed_memory``; docs/serving.md has the A/B
figures). The cost: each malloc arena (glibc keeps one per thread that allocates, up to 8 per
core) keeps up to ``TRIM_BYTES`` free at its top instead of returning it, and blocks up to
``MMAP_BYTES`` come from the heaps, where freed holes below the top are kept for reuse, not
bounded by either threshold.

The same knobs as the environment variables ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` (glibc's ``mallopt(3)``), set once per process when the first
``Engine`` is made (so ``generate`` and ``serve`` run under the same allocator, and a bench
comparing them compares like with like). It is process-wide, so it can be declined:
``KDA_KEEP_FREED_MEMORY=0`` (or false / no / off) leaves glibc's defaults, and either glibc
variable, or a ``GLIBC_TUNABLES`` naming a malloc threshold, set in the environment is the
user's own choice, which glibc applied at start and this leaves alone.
Other C libraries (macOS, musl's no-op ``mallopt``): nothing happens.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["MMAP_BYTES", "OPT_OUT", "TRIM_BYTES", "declined", "keep_freed_memory"]

MMAP_BYTES = 32 << 20  # blocks below this come from the heap, not a fresh mmap
TRIM_BYTES = 128 << 20  # the heap's top is returned to the kernel past this much free
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
_done: list[bool] = []


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


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (``MMAP_BYTES``, ``TRIM_BYTES``) once per process.
    Returns True if they are set (now or earlier); False where there is no glibc or the
    environment declines it (``declined``)."""
    if _done:
        return _done[0]
    ok = False
    if sys.platform.startswith("linux") and declined() is None:
        try:
            libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
            gnu = libc.gnu_get_libc_version  # glibc only (musl's mallopt does nothing)
            gnu.restype = ctypes.c_char_p
            ok = bool(gnu()) and bool(
                libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)
                and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
            )
        except (OSError, AttributeError):
            ok = False
    _done.append(ok)
    return ok
