"""The byte tokenizer of TinyHybrid, and how byte tokens are shown as text.

Tokens are UTF-8 bytes (vocab 256), so any text, Chinese included, is a token sequence and a
token is often a piece of a character (a Chinese character is three tokens). `encode` /
`decode` / `check_tokens` are the tokenizer; `display` decodes a token sequence for people:
valid UTF-8 becomes its characters, and only bytes that are not part of valid UTF-8 become
``\\xNN``; invisible characters are made visible (newline ⏎, tab ⇥, other control characters
``\\xNN`` / ``\\uNNNN``) so a one-line display never breaks or hides bytes. `pieces` gives one
label per token whose concatenation is `display`'s text: a multi-byte character is shown on its
first byte and its other bytes get "" (they belong to that character).

Left out: any learned vocabulary (BPE), special tokens (there is no BOS / EOS).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

VOCAB = 256
_TOKENIZER_NAME = "utf8-bytes-v1"
TOKENIZER_FINGERPRINT = hashlib.sha256(f"{_TOKENIZER_NAME}:{VOCAB}".encode()).hexdigest()[:16]
MAX_TOKENS = 16384  # per request: keeps MLA attention and memory bounded
_NEWLINE = "⏎"
_TAB = "⇥"


def encode(text: str) -> list[int]:
    """UTF-8 bytes. Example: encode("hi") -> [104, 105]."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return list(text.encode("utf-8"))


def decode(ids) -> str:
    """Inverse of `encode`; partial multi-byte characters become U+FFFD."""
    return bytes(check_tokens(ids, allow_empty=True)).decode("utf-8", errors="replace")


def check_tokens(tokens, *, name: str = "tokens", allow_empty: bool = False) -> list[int]:
    """Integer ids in [0, VOCAB); bools, floats and strings are refused, not truncated."""
    if isinstance(tokens, (str, bytes)):
        raise ValueError(
            f"{name} must be a sequence of integer token ids, got {type(tokens).__name__}"
        )
    try:
        ids = list(tokens)
    except TypeError as e:
        raise ValueError(f"{name} must be a sequence of integer token ids") from e
    for t in ids:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise ValueError(f"{name} must be integer token ids, got {t!r}")
    ids = [int(t) for t in ids]
    if not ids and not allow_empty:
        raise ValueError(f"{name} must not be empty")
    if len(ids) > MAX_TOKENS:
        raise ValueError(f"{name}: at most {MAX_TOKENS} tokens, got {len(ids)}")
    bad = [t for t in ids if not 0 <= t < VOCAB]
    if bad:
        raise ValueError(f"{name} must be ids in [0, {VOCAB - 1}], got {bad[0]}")
    return ids


def _visible(ch: str, newline: str) -> str:
    if ch == "\n":
        return newline
    if ch == "\t":
        return _TAB
    if ch.isprintable():
        return ch
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def _chars(ids: list[int]) -> list[tuple[int, int, str | None]]:
    """Split bytes into (start, length, char or None for an invalid byte), left to right."""
    data = bytes(ids)
    out = []
    i = 0
    while i < len(data):
        b = data[i]
        n = 1 if b < 0x80 else 2 if 0xC2 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4
        if b >= 0x80 and not 0xC2 <= b < 0xF5:
            n = 0  # a continuation byte without a lead, or a byte never valid in UTF-8
        ch = None
        if n:
            try:
                ch = data[i : i + n].decode("utf-8")
            except UnicodeDecodeError:
                ch = None
        if ch is None:
            out.append((i, 1, None))
            i += 1
        else:
            out.append((i, n, ch))
            i += n
    return out


def pieces(tokens: Sequence[int], *, newline: str = _NEWLINE) -> list[str]:
    """One label per token; ``"".join(pieces(t)) == display(t)``."""
    ids = check_tokens(tokens, allow_empty=True)
    labels = [""] * len(ids)
    for start, _, ch in _chars(ids):
        labels[start] = f"\\x{ids[start]:02x}" if ch is None else _visible(ch, newline)
    return labels


def display(tokens: Sequence[int], *, newline: str = _NEWLINE) -> str:
    """Byte tokens as one line of text (see the module docstring). display(encode("前a")) == "前a";
    display([0xE5, 0x89]) == "\\xe5\\x89" (an incomplete character)."""
    return "".join(pieces(tokens, newline=newline))


def token_labels(tokens: Sequence[int], *, newline: str = _NEWLINE) -> list[str]:
    """One self-contained label per token for hovers and tables: the character the byte belongs
    to, with its byte position when the character spans several tokens ("前 1/3", "前 2/3", ...);
    a byte outside valid UTF-8 is ``\\xNN``."""
    ids = check_tokens(tokens, allow_empty=True)
    labels = [""] * len(ids)
    for start, n, ch in _chars(ids):
        if ch is None:
            labels[start] = f"\\x{ids[start]:02x}"
            continue
        shown = _visible(ch, newline)
        for j in range(n):
            labels[start + j] = shown if n == 1 else f"{shown} {j + 1}/{n}"
    return labels
