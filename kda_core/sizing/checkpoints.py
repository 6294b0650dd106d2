"""How many states SGLang stores per request (the K3 write-up's counting).

One per chunked-prefill chunk plus one for decode if decode crosses a track boundary
(``seq_len % track_interval == 0``); the K3 write-up's bound ``input_len // chunk + 2`` is checked
against it in tests/test_sizing_slots.py.
Left out: eviction (these are counts of states written, not of states still cached).
"""

from __future__ import annotations

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import MAX_COUNT


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
