"""Multi-turn conversations (JSONL, one conversation a line) as requests sharing their history,
and the block ids of token sequences.

A line is ``{"messages": [{"role": ..., "content": ...}, ...]}`` (OpenAI chat) or
``{"conversations": [{"from": ..., "value": ...}, ...]}`` (ShareGPT: ``human`` -> user, ``gpt``
-> assistant); optional ``timestamp`` (ms, the first turn's arrival; default the previous
line's), ``session_id`` (else the line number) and, on any message, ``timestamp`` (ms, the
arrival of the turn it opens). Content is a string or a list of ``{"type": "text", "text": ...}``
parts. Each message is rendered as ``<|role|>`` + content (the lab's plain template; a model's
own chat template adds other marker tokens, which shifts lengths a little but not the sharing)
and tokenised with the lab's byte tokenizer (``kda_core.model.tokenizer.encode``). Every
assistant message is one request: its prompt is every message before it, its output the
assistant message; a conversation ending on other messages adds a last request with output 0.
So turn k+1's prompt starts with turn k's prompt + answer, token for token, and its blocks hit.
Turns without a timestamp arrive ``TURN_GAP_S`` after the previous turn. Output blocks are
recorded (``Trace.out_blocks``) so a state saved after decoding can be hit by the next turn.

:class:`BlockHasher` gives chained ids: block j's digest is BLAKE2b-128 of its tokens keyed by
block j-1's digest, and ids are numbered by first appearance, so two sequences share id ``h``
at position j iff they agree on every token up to the end of block j (the partial last block
included). Left out: images and tool calls (refused), a model's real chat template.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from kda_core.workloads._accumulator import Accumulator
from kda_core.workloads._caps import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from kda_core.workloads._rows import json_object
from kda_core.workloads.ingest import RowError

_TURN_GAP_S = 10.0
_SHAREGPT_ROLES = {"human": "user", "gpt": "assistant", "chatgpt": "assistant"}


class BlockHasher:
    """Chained block digests -> dense ids (see the module docstring)."""

    __slots__ = ("b", "table")

    def __init__(self, block_size: int) -> None:
        self.b = int(block_size)
        self.table: dict[bytes, int] = {}

    def _id(self, digest: bytes) -> int:
        return self.table.setdefault(digest, len(self.table))

    def extend(self, data: bytes | memoryview, width: int, digests: list[bytes]) -> None:
        """Append to ``digests`` (those of the first full blocks of ``data``, already hashed)
        the digests of the remaining full blocks (``width`` bytes a token)."""
        step = self.b * width
        for j in range(len(digests), len(data) // step):
            key = digests[-1] if digests else b""
            digests.append(
                hashlib.blake2b(data[j * step : (j + 1) * step], digest_size=16, key=key).digest()
            )

    def ids(
        self, data: bytes | memoryview, width: int, digests: list[bytes] | None = None
    ) -> list[int]:
        """Ids of every block of ``data`` (the partial last one included); ``digests`` caches
        the full blocks' digests between calls on growing sequences."""
        digests = [] if digests is None else digests
        self.extend(data, width, digests)
        step = self.b * width
        full = len(data) // step
        out = [self._id(d) for d in digests[:full]]
        if len(data) % step:
            key = digests[full - 1] if full else b""
            tail = hashlib.blake2b(data[full * step :], digest_size=16, key=key, person=b"partial")
            out.append(self._id(tail.digest()))
        return out

    def _full_ids(self, digests: list[bytes], lo: int, hi: int) -> list[int]:
        return [self._id(d) for d in digests[lo:hi]]


def _content(v: Any, where: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in v
    ):
        return "".join(p["text"] for p in v)
    raise RowError(where, f"{where} must be a string or a list of text parts")


def _messages(obj: Any) -> tuple[list[tuple[str, str, Any]], str]:
    """[(role, text, timestamp or None)] of a conversation line, and its field name."""
    if not isinstance(obj, dict):
        raise RowError("JSON", "expected a JSON object")
    key = "messages" if "messages" in obj else "conversations"
    msgs = obj.get(key)
    if not isinstance(msgs, list) or not msgs:
        raise RowError(key, "expected a non-empty list in 'messages' or 'conversations'")
    role_key, text_key = ("role", "content") if key == "messages" else ("from", "value")
    out = []
    for k, m in enumerate(msgs):
        where = f"{key}[{k}]"
        if not isinstance(m, dict) or not isinstance(m.get(role_key), str) or text_key not in m:
            raise RowError(where, f"{where} must be an object with {role_key!r} and {text_key!r}")
        role = m[role_key].lower()
        role = _SHAREGPT_ROLES.get(role, role) if key == "conversations" else role
        out.append((role, _content(m[text_key], f"{where}.{text_key}"), m.get("timestamp")))
    return out, key


def _ms(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise RowError(where, f"{where} must be a finite number of ms >= 0, got {v!r}")
    return float(v)


class ConversationRows:
    """Conversation lines -> requests (see the module docstring)."""

    def __init__(self, acc: Accumulator) -> None:
        from kda_core.model.tokenizer import encode  # the lab's byte tokenizer (read-only use)

        self.acc, self.encode, self.last_ms = acc, encode, 0.0
        self.hasher = BlockHasher(acc.b)

    def _turns(self, obj: Any) -> tuple[bytes, list[tuple[float, int, int]]]:
        """The conversation's tokens and, per request, (arrival ms, prompt end, output end)."""
        msgs, key = _messages(obj)
        t = _ms(obj["timestamp"], "timestamp") if "timestamp" in obj else self.last_ms
        floor = t  # a turn never arrives before the previous one
        data = bytearray()
        turns: list[tuple[float, int, int]] = []
        for k, (role, text, ts) in enumerate(msgs):
            where = f"{key}[{k}]"
            if ts is not None and role != "assistant":
                t = _ms(ts, f"{where}.timestamp")
                if t < floor:
                    raise RowError(f"{where}.timestamp", f"{t:g} is before the previous turn")
            start = len(data)
            data += bytes(self.encode(f"<|{role}|>{text}"))
            if role != "assistant":
                continue
            if not start:
                raise RowError(where, "a conversation must not open with an assistant message")
            if len(data) - start > MAX_OUTPUT_TOKENS:
                raise RowError(where, f"an answer over {MAX_OUTPUT_TOKENS} tokens")
            turns.append((t, start, len(data)))
            floor, t = t, t + _TURN_GAP_S * 1000.0
        if not turns or turns[-1][2] < len(data):
            turns.append((t, len(data), len(data)))
        if len(data) > MAX_INPUT_TOKENS:
            raise RowError(key, f"{len(data)} tokens; the cap is {MAX_INPUT_TOKENS}")
        return bytes(data), turns

    def __call__(self, line: str, lineno: int) -> None:
        obj = json_object(line)
        data, turns = self._turns(obj)
        sid = obj.get("session_id", f"line {lineno}")
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            raise RowError(
                "session_id", f"'session_id' must be a string or an integer, got {sid!r}"
            )
        session, b, digests = self.acc.session(sid), self.acc.b, []
        view = memoryview(data)
        for t, p_end, o_end in turns:
            if self.acc.full:
                break
            ids = self.hasher.ids(view[:p_end], 1, digests)
            self.hasher.extend(view[:o_end], 1, digests)
            out = self.hasher._full_ids(digests, p_end // b, o_end // b)
            self.acc.add(lineno, t / 1000.0, p_end, o_end - p_end, ids, session, 0, out)
        self.last_ms = turns[0][0]
