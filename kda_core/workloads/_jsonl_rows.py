"""Row parsers of the JSONL formats with lengths or ids: Mooncake (and aiperf's variant of it)
and token-id rows. Each is called with one non-blank line and hands its request to the
``_accumulator.Accumulator``; a malformed line raises ``RowError`` naming the field.

* ``mooncake`` (Qin et al., "Mooncake", FAST 2025; github.com/kvcache-ai/Mooncake
  ``FAST25-release/traces``): ``timestamp`` (ms), ``input_length``, ``output_length``,
  ``hash_ids`` (chained ids of ``block_size``-token blocks). NVIDIA aiperf's ``mooncake_trace``
  (ai-dynamo/aiperf, ``src/aiperf/dataset/loader/models.py``, class ``MooncakeTrace``) makes
  ``hash_ids``, ``output_length`` and ``timestamp`` optional and adds fields (``session_id``,
  ``delay``, ``type``, ``extra``, ...): read here as ``hash_ids`` absent = no prefix
  information for that row, ``output_length`` absent = 0, ``timestamp`` absent = the previous
  row's plus ``delay`` (ms, default 0); ``session_id`` names the session; the rest is ignored.
  Rows carrying text (``text_input``, ``messages``, ``payload``) are refused: no lengths.
  ``strict=True`` is the original format (every field required, timestamps non-decreasing).
* ``token-ids``: ``{"token_ids": [...], "output_length": n, "timestamp": ms, "session_id": s}``
  (only ``token_ids`` required) or a bare JSON list of ids; block ids are chained digests of
  the tokens (``_conversations.BlockHasher``), so equal token prefixes share ids.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads._caps import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from kda_core.workloads._conversations import BlockHasher
from kda_core.workloads._rows import json_object
from kda_core.workloads.ingest import RowError

TEXT_FIELDS = ("text_input", "messages", "payload")


def _int_field(obj: dict, key: str, lo: int, hi: int, default: int | None = None) -> int:
    """``obj[key]`` as an int in [lo, hi] (an integral float is accepted); ``default`` when
    the key is absent (None: required)."""
    v = obj.get(key)
    if type(v) is int and lo <= v <= hi:
        return v
    if key not in obj:
        if default is None:
            raise RowError(key, f"missing field {key!r}")
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RowError(key, f"{key!r} must be a number, got {v!r}")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise RowError(key, f"{key!r} must be an integer, got {v!r}")
        v = int(v)
    if not lo <= v <= hi:
        raise RowError(key, f"{key!r} must be in [{lo}, {hi}], got {v}")
    return v


def _ms_field(obj: dict, key: str) -> float:
    """``obj[key]``: a finite number of milliseconds >= 0."""
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RowError(key, f"{key!r} must be a finite number, got {v!r}")
    if v < 0:
        raise RowError(key, f"{key!r} must be >= 0, got {v}")
    return float(v)


def _session_key(obj: dict) -> str | int | None:
    s = obj.get("session_id")
    if s is not None and (isinstance(s, bool) or not isinstance(s, (str, int))):
        raise RowError("session_id", f"'session_id' must be a string or an integer, got {s!r}")
    return s


def _int_list(v: Any, key: str, line: str) -> array:
    """A JSON list of non-negative ints below 2**63 as ``array('q')`` (bools refused)."""
    if not isinstance(v, list):
        raise RowError(key, f"{key!r} must be a list")
    try:
        a = array("q", v)
    except (TypeError, OverflowError):
        a = None
    # the text tells whether a negative id or a bool can be there at all (cheap on every row)
    negative = "-" in line and a is not None and a and min(a) < 0
    suspect = ("true" in line or "false" in line) and any(type(x) is bool for x in v)
    if a is None or suspect or negative:
        bad = next(x for x in v if type(x) is not int or not 0 <= x < 2**63)
        raise RowError(key, f"{key!r} must be non-negative ints below 2**63, got {bad!r}")
    return a


class MooncakeRows:
    """Mooncake / aiperf ``mooncake_trace`` rows (see the module docstring)."""

    def __init__(self, acc: Accumulator, *, strict: bool = False) -> None:
        self.acc, self.strict, self.last_ms = acc, strict, 0.0

    def _timestamp(self, obj: dict) -> float:
        if "timestamp" in obj:
            t = _ms_field(obj, "timestamp")
            if self.strict and t < self.last_ms:
                raise RowError(
                    "timestamp", f"'timestamp' {t:g} is before the previous {self.last_ms:g}"
                )
            return t
        if self.strict:
            raise RowError("timestamp", "missing field 'timestamp'")
        return self.last_ms + (_ms_field(obj, "delay") if "delay" in obj else 0.0)

    def __call__(self, line: str, lineno: int) -> None:
        obj = json_object(line)
        if type(obj) is not dict:
            raise RowError("JSON", "expected a JSON object")
        t = obj.get("timestamp")
        floor = self.last_ms if self.strict else 0.0
        if not ((type(t) is int or type(t) is float) and floor <= t < math.inf):
            t = self._timestamp(obj)  # absent, or a bad value: the checks with their messages
        if "input_length" not in obj and not self.strict:
            text = [k for k in TEXT_FIELDS if k in obj]
            if text:
                raise RowError(
                    "input_length",
                    f"rows with {text[0]!r} carry text, not lengths: only 'input_length' rows are "
                    "read (text goes in the conversations format)",
                )
        n_in = _int_field(obj, "input_length", 1, MAX_INPUT_TOKENS)
        n_out = _int_field(obj, "output_length", 0, MAX_OUTPUT_TOKENS, None if self.strict else 0)
        ids = None
        if "hash_ids" in obj:
            ids = self._hash_ids(obj["hash_ids"], n_in, line)
        elif self.strict:
            raise RowError("hash_ids", "missing field 'hash_ids'")
        session = -1 if "session_id" not in obj else self.acc.session(_session_key(obj))
        self.last_ms = t
        self.acc.add(lineno, t / 1000.0, n_in, n_out, ids, session)

    def _hash_ids(self, h: Any, n_in: int, line: str) -> array:
        if not isinstance(h, list):
            raise RowError("hash_ids", "'hash_ids' must be a list")
        b = self.acc.b
        want = -(-n_in // b)
        if len(h) != want:
            raise RowError(
                "hash_ids",
                f"'hash_ids' has {len(h)} ids, input_length {n_in} needs ceil({n_in}/{b}) = {want}",
            )
        return _int_list(h, "hash_ids", line)


class TokenIdRows:
    """Token-id rows (see the module docstring)."""

    def __init__(self, acc: Accumulator) -> None:
        self.acc, self.last_ms = acc, 0.0
        self.hasher = BlockHasher(acc.b)

    def __call__(self, line: str, lineno: int) -> None:
        obj = json_object(line)
        if isinstance(obj, list):
            obj = {"token_ids": obj}
        if not isinstance(obj, dict) or "token_ids" not in obj:
            raise RowError(
                "token_ids", "expected a JSON list of token ids or an object with 'token_ids'"
            )
        tokens = _int_list(obj["token_ids"], "token_ids", line)
        if not 1 <= len(tokens) <= MAX_INPUT_TOKENS:
            raise RowError(
                "token_ids", f"'token_ids' must hold 1 to {MAX_INPUT_TOKENS} ids, got {len(tokens)}"
            )
        t = _ms_field(obj, "timestamp") if "timestamp" in obj else self.last_ms
        n_out = _int_field(obj, "output_length", 0, MAX_OUTPUT_TOKENS, 0)
        session = self.acc.session(_session_key(obj))
        ids = self.hasher.ids(tokens.tobytes(), tokens.itemsize)
        self.last_ms = max(self.last_ms, t)
        self.acc.add(lineno, t / 1000.0, len(tokens), n_out, ids, session)
