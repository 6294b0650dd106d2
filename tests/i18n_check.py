"""The checks behind tests/test_i18n.py: which texts a callback's outputs show, which of
them are Chinese sentences holding an English catalog word, and which figure labels were left
wholly in English. The reader's own text (``USER``, whole or cut) is taken out first."""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Iterator
from typing import Any

import plotly.graph_objects as go

from apps.ui import catalog as cat

ZH = cat.LANGS[1]
USER = "My own words: fixed-size state per request, keep it 原样"  # catalog words inside
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")
_STRIP = re.compile(
    r"`[^`]*`|'[^']*'|\"[^\"]*\"|“[^”]*”|%\{[^}]*\}|<[^>]*>|\$[^$]*\$|\bhttps?://\S+"
)
_WORD = re.compile(r"(?<![\w./-])[A-Za-z][a-z]+(?:[-'][a-z]+)*(?![\w/-])")


def app_catalogs() -> list[cat.Catalog]:
    """Every page's catalog (an app's ``MSG``) and every catalog of ``words/`` (the figures'
    words too)."""
    import pkgutil

    import words
    from apps.ui.registry import APPS

    out = [importlib.import_module(f"apps.{a.name}").MSG for a in APPS]
    for m in pkgutil.iter_modules(words.__path__):
        mod = importlib.import_module(f"words.{m.name}")
        out += [v for v in vars(mod).values() if isinstance(v, cat.Catalog)]
    return out


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(_STRIP.sub(" ", text))}


def english_vocabulary(catalogs: list[cat.Catalog]) -> set[str]:
    en: set[str] = set()
    zh: set[str] = set()
    for c in catalogs:
        for e, z in c.messages().values():
            en |= _words(re.sub(r"\{[^}]*\}", " ", e))
            zh |= _words(re.sub(r"\{[^}]*\}", " ", z))
    return {w for w in en - zh if len(w) > 2}


def strings(v: Any) -> Iterator[str]:
    """Every text a reader can see in a callback output (figures, markdown, updates)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, go.Figure):
        yield from _figure_texts(v.to_plotly_json())
    elif isinstance(v, dict):
        if v.get("__type__") == "update":
            for k in ("value", "label", "info", "placeholder"):
                if k in v:
                    yield from strings(v[k])
            for c in v.get("choices") or []:
                yield str(c[0]) if isinstance(c, (list, tuple)) else str(c)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from strings(x)


_TEXT_KEYS = {"text", "title", "name", "hovertemplate", "ticktext", "texttemplate"}
_DATA_KEYS = {"x", "y", "z", "customdata", "hovertext", "ids", "labels", "meta"}


def _figure_texts(node: Any, key: str | None = None) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in _DATA_KEYS:
                yield from _figure_texts(v, k)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from _figure_texts(v, key)
    elif isinstance(node, str) and key in _TEXT_KEYS:
        yield node


def figure_labels(v: Any) -> Iterator[str]:
    """The words a figure shows on its own: titles, legend names, tick and bar labels (a
    category axis shows its string x / y values), annotations."""
    if isinstance(v, go.Figure):
        yield from _labels(v.to_plotly_json())
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from figure_labels(x)


def _labels(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("x", "y") and isinstance(v, (list, tuple)) and v:
                yield from (a for a in v if isinstance(a, str))
            elif k in _TEXT_KEYS and isinstance(v, str):
                yield v
            elif k not in _DATA_KEYS:
                yield from _labels(v)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from _labels(v)


_LOWER = re.compile(r"(?<![\w-])[a-z]{3,}(?![\w-])")  # not a flag, an identifier or a model
_NOTATION = {"max", "min"}  # "max |ΔM|"


def english_labels(labels: list[str], user: tuple[str, ...]) -> list[str]:
    """Labels with no Chinese at all that read as English: two or more lowercase words."""
    bad = []
    for s in labels:
        for u in user:
            s = _without(s, u)
        for part in re.split(r"<br>|\n", s):
            part = re.sub(r"<[^>]*>|%\{[^}]*\}", " ", part)
            words = [w for w in _LOWER.findall(part) if w not in _NOTATION]
            if not CJK.search(part) and len(words) >= 2:
                bad.append(part.strip())
    return sorted(set(bad))


def _without(s: str, user: str, least: int = 8) -> str:
    """``s`` without any piece of ``user`` of ``least`` or more characters (the reader's text
    is often shown cut: "…r request, keep it 原样")."""
    while True:
        m = difflib.SequenceMatcher(None, s, user, autojunk=False).find_longest_match(
            0, len(s), 0, len(user)
        )
        if m.size < least:
            return s
        s = s[: m.a] + " " + s[m.a + m.size :]


def english_inside_chinese(texts: list[str], vocab: set[str], user: tuple[str, ...]) -> list:
    bad = []
    for s in texts:
        for u in user:
            s = _without(s, u)
        for part in re.split(r"<br>|\n|\|", s):  # a table cell is a sentence of its own
            if not CJK.search(part):
                continue  # not a Chinese sentence (a number, a name, a log line)
            hits = sorted(_words(part) & vocab)
            if hits:
                bad.append((hits, part[:120]))
    return bad
