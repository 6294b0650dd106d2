"""How many states SGLang stores per request (the K3 write-up's counting).

One per chunked-prefill chunk plus one for decode if decode crosses a track boundary
(``seq_len % track_interval == 0``); ``checkpoints_upper_bound`` is the K3 write-up's bound.
Left out: eviction (these are counts of states written, not of states still cached).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import MAX_COUNT


def decode_track_points(input_len: int, output_len: int, track_interval: int = 256) -> list[int]:
    """Total sequence lengths in (input_len, input_len + output_len] where decode tracks a state.

    ``seq_len % track_interval == 0``: prompt 1000, interval 256 -> 1024, 1280, 1536, ...
    (after about 24, 280, 536 decoded tokens), not at output lengths 256, 512, ...
    """
    i = _check_int("input_len", input_len, 0, MAX_COUNT)
    o = _check_int("output_len", output_len, 0, MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, MAX_COUNT)
    first = (i // t + 1) * t
    if (i + o - first) // t > 1_000_000:
        raise ValueError("output_len / track_interval must be <= 1e6 track points")
    return list(range(first, i + o + 1, t))


def checkpoints_per_request(
    input_len: int,
    output_len: int,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
) -> int:
    """States SGLang stores for one request (the K3 write-up's counting).

    One per chunked-prefill chunk, ``ceil(input_len / chunk)``, plus one for decode if decode
    crosses a track boundary (only the last decode state is kept). Input 13600, output 512,
    chunk 6144 -> 3 + 1 = 4. The upper bound is ``input_len // chunk + 2``.
    """
    i = _check_int("input_len", input_len, 0, MAX_COUNT)
    o = _check_int("output_len", output_len, 0, MAX_COUNT)
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, MAX_COUNT)
    prefill = -(-i // c)
    decode = 1 if (i + o) // t > i // t else 0
    return prefill + decode


def checkpoints_upper_bound(input_len: int, chunked_prefill_size: int = 8192) -> int:
    """The K3 write-up's bound on states stored per request:
    ``input_len // chunked_prefill_size + 2``.

    ``checkpoints_per_request(i, o, c, t) <= checkpoints_upper_bound(i, c)`` for every output
    length and track interval (``ceil(i / c) <= i // c + 1``, plus at most one decode state).
    """
    i = _check_int("input_len", input_len, 0, MAX_COUNT)
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, MAX_COUNT)
    return i // c + 2


def mean_checkpoints_per_request(
    input_lens: Sequence[int] | np.ndarray,
    output_lens: Sequence[int] | np.ndarray,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
) -> float:
    """Vectorised mean of ``checkpoints_per_request`` over a workload (arrays of equal length)."""
    i = np.asarray(input_lens)
    o = np.asarray(output_lens)
    if i.ndim != 1 or o.shape != i.shape or i.size == 0 or i.size > 10_000_000:
        raise ValueError(
            "input_lens and output_lens must be 1-D of the same length in [1, 1e7], "
            f"got shapes {i.shape} and {o.shape}"
        )
    if not (np.issubdtype(i.dtype, np.integer) and np.issubdtype(o.dtype, np.integer)):
        raise ValueError("input_lens and output_lens must be integer arrays")
    if (i < 0).any() or (o < 0).any():
        raise ValueError("input_lens and output_lens must be >= 0")
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, MAX_COUNT)
    i = i.astype(np.int64)
    o = o.astype(np.int64)
    n = -(-i // c) + ((i + o) // t > i // t)
    return float(n.mean())
