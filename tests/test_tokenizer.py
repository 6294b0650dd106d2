"""kda_core.model.tokenizer: decoded text, with escapes only for bytes that are not valid UTF-8."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from kda_core.model import encode
from kda_core.model import tokenizer as T


def test_valid_text_decodes_whole_characters():
    assert T.display(encode("前缀 hit")) == "前缀 hit"
    assert T.pieces(encode("前a")) == ["前", "", "", "a"]
    assert T.display(encode("a\nb\tc")) == "a⏎b⇥c"
    assert T.display(encode("a\nb"), newline="\n") == "a\nb"


@pytest.mark.parametrize(
    ("ids", "want"),
    [
        ([0xE5, 0x89], "\\xe5\\x89"),  # an incomplete character
        ([0x89, 0x61], "\\x89a"),  # a continuation byte without its lead
        ([0xC0, 0xAF], "\\xc0\\xaf"),  # an overlong encoding
        ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),  # a UTF-16 surrogate
        ([0xFF, 0xE5, 0x89, 0x8D], "\\xff前"),
        ([0x01], "\\x01"),  # valid but invisible: made visible
    ],
)
def test_only_invalid_or_invisible_bytes_are_escaped(ids, want):
    assert T.display(ids) == want


@given(hs.text(max_size=40))
def test_display_of_any_text_has_no_byte_escapes(text):
    printable = "".join(c for c in text if c.isprintable() and c not in "\\")
    assert T.display(encode(printable)) == printable


@given(hs.lists(hs.integers(0, 255), max_size=40))
def test_pieces_concatenate_to_display_and_match_python(ids):
    labels = T.pieces(ids)
    assert len(labels) == len(ids) and "".join(labels) == T.display(ids)
    # the characters are exactly Python's strict decoding of the valid runs
    ref = bytes(ids).decode("utf-8", errors="backslashreplace")
    if all(c.isprintable() and c != "\\" for c in ref):
        assert T.display(ids) == ref


def test_bad_tokens_are_refused():
    with pytest.raises(ValueError):
        T.display([256])
    with pytest.raises(ValueError):
        T.pieces("abc")


def test_token_labels_name_the_character_of_every_byte():
    assert T.token_labels(encode("前a\n")) == ["前 1/3", "前 2/3", "前 3/3", "a", "⏎"]
    assert T.token_labels([0xE5, 0x61]) == ["\\xe5", "a"]
