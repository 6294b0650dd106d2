"""中文 done as whole messages: every app's outputs rendered in 中文 carry no English word of
the catalogs inside a Chinese sentence, the reader's own text comes back exactly as typed, and
every catalog message has both languages with the same placeholders.

Each app is rendered through its public callbacks with ``language="中文"`` (``i18n_apps.RENDER``;
figures: titles, axis titles, tick labels, legend names, annotations, hover templates,
colour-bar titles; markdown; option and label updates; validation messages of bad inputs).
A "word" is a run of
2+ Latin letters outside code spans, quoted values, HTML tags and plotly placeholders; it is
English when it occurs in the catalogs' English messages but in none of their Chinese ones
(names such as KDA, SGLang or token are written in both).
"""

from __future__ import annotations

import html
import re

import pytest
from i18n_apps import RENDER
from i18n_check import (
    CJK,
    USER,
    ZH,
    app_catalogs,
    english_inside_chinese,
    english_labels,
    english_vocabulary,
    figure_labels,
    strings,
)

from apps.ui import catalog as cat

_CACHE: dict[tuple[str, str], tuple[list[str], list[str]]] = {}


def _rendered(name: str, lang: str) -> tuple[list[str], list[str]]:
    if (name, lang) not in _CACHE:
        outs, errs = RENDER[name]
        out = outs(lang)
        _CACHE[name, lang] = list(strings(out)) + errs(lang), list(figure_labels(out))
    return _CACHE[name, lang]


def rendered_texts(name: str, lang: str) -> list[str]:
    return _rendered(name, lang)[0]


@pytest.mark.parametrize("name", sorted(RENDER))
def test_no_english_word_inside_a_chinese_sentence(name: str) -> None:
    vocab = english_vocabulary(app_catalogs())
    texts = rendered_texts(name, ZH)
    assert any(CJK.search(s) for s in texts), "nothing was drawn in 中文"
    assert english_inside_chinese(texts, vocab, (USER,)) == []


@pytest.mark.parametrize("name", sorted(RENDER))
def test_no_english_label_in_a_chinese_figure(name: str) -> None:
    """A legend name, bar or tick label left wholly in English (no Chinese sentence around it
    for the check above to catch)."""
    assert english_labels(_rendered(name, ZH)[1], (USER,)) == []


@pytest.mark.parametrize("name", sorted(RENDER))
def test_the_readers_text_is_never_changed(name: str) -> None:
    """Wherever the reader's text is shown (whole, or cut to its first N bytes), it reads as
    typed: not translated, not marked (character references unescaped)."""
    texts = [html.unescape(s) for s in rendered_texts(name, ZH)]
    shown = [s[s.index(USER[:20]) :] for s in texts if USER[:20] in s]
    if not shown:
        pytest.skip(f"{name} shows no free text of the reader")
    for s in shown:
        piece = re.split(r"[<|\n”\"]", s[: len(USER)])[0]  # up to the markup around it
        assert USER.startswith(piece), (piece, USER)


def test_every_message_has_both_languages_and_the_same_placeholders() -> None:
    for c in app_catalogs():
        assert cat.problems(c.messages()) == [], c.name


def test_the_checker_catches_mixed_sentences() -> None:
    vocab = english_vocabulary(app_catalogs())
    assert english_inside_chinese(["块大小 chunk size 太大"], vocab, ())  # a mixed sentence
    assert not english_inside_chinese(["块大小 `chunk size` 太大"], vocab, ())  # code span
    assert not english_inside_chinese(["chunk size only"], vocab, ())  # not Chinese
    assert not english_inside_chinese([f"你的文本：{USER}"], vocab, (USER,))  # the reader's own
    assert english_labels(["token by token", "逐 token"], ()) == ["token by token"]
    assert not english_labels(["max |ΔM|, max |Δb|", "radix_off", "kimi-k3 decode"], ())
    with pytest.raises(ValueError, match="placeholders differ"):
        cat.Catalog("x", {"k": ("{n:,} tokens", "{n} 个 token")})
    with pytest.raises(ValueError, match="needs a non-empty"):
        cat.Catalog("x", {"k": ("tokens", "")})
