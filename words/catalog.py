"""Catalogs of whole messages in English and 中文 (no UI library: apps and plots import it).

A message is a whole sentence, label or title with named placeholders, written in both
languages; nothing is ever translated by replacing words inside a finished sentence.

    MSG = Catalog("chunk_scan", {
        "t_agreement": ("Chunked vs recurrent: max abs difference ({source})",
                        "分块与逐步递推：最大绝对差（{source}）"),
        "f_seed": ("seed", "随机种子"),
    }, COMMON)
    t = MSG.lang("中文")                   # a lookup bound to one language
    t("t_agreement", source=...)           # the Chinese sentence, placeholders filled
    MSG("f_seed")                          # a Msg: rendered later, in the reader's language
    t.word("var", "int8 / key channel")    # a study's code in words (the code if none)

A placeholder's format spec (``{n:,}``, ``{x:.2e}``) is the same in both languages (checked
when the catalog is built), so a number is formatted once and never split; a placeholder's
value may itself be a ``Msg`` (rendered in the same language) and the reader's own text goes
in as a placeholder value, shown exactly as given. The apps' ``UserError`` (a ``gr.Error``
carrying its ``Msg``) lives in ``apps.ui.catalog``, which re-exports this module.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LANGS: tuple[str, str] = ("English", "中文")
CODES: tuple[str, str] = ("en", "zh")
_FMT = string.Formatter()


class UnknownLanguage(str):
    """A value of a page's language switch that is none of ``LANGS`` (the switch passes it on
    instead of refusing it, so the validator can name the argument; ``code`` refuses it with
    ``refusal()``, which a front end may give its own error type)."""

    def refusal(self) -> Exception:
        return ValueError(language_message(self))


def language_message(value: object) -> str:
    return f"language must be one of {list(LANGS)}, got {str(value)!r}"


def code(language: object) -> str:
    """ "en" or "zh" for the switch's value ("English" / "中文") or a code; English otherwise.
    A value the switch did not know (``UnknownLanguage``, from the API) is refused."""
    if isinstance(language, UnknownLanguage):
        raise language.refusal()
    return "zh" if language in (LANGS[1], CODES[1]) else "en"


def fields(template: str) -> dict[str, str]:
    """The named placeholders of ``template`` and their format specs."""
    out: dict[str, str] = {}
    for _lit, name, spec, conv in _FMT.parse(template):
        if name is not None:
            out[name] = f"{spec}!{conv}" if conv else spec
    return out


@dataclass(frozen=True, slots=True)
class Msg:
    """A message not yet rendered: its catalog, key and placeholder values."""

    catalog: Catalog
    key: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def render(self, language: object = "en") -> str:
        return self.catalog.text(language, self.key, **self.params)

    def __str__(self) -> str:
        return self.render("en")


def _rendered(value: Any, lang: str) -> Any:
    """A placeholder's value in ``lang``: a ``Msg`` rendered, a tuple of them listed."""
    if isinstance(value, Msg):
        return value.render(lang)
    if isinstance(value, tuple) and value and all(isinstance(v, Msg) for v in value):
        return ("、" if lang == "zh" else ", ").join(v.render(lang) for v in value)
    return value


class Catalog:
    """Messages ``key -> (English, 中文)``; ``bases`` are searched after this one's own."""

    def __init__(self, name: str, messages: Mapping[str, tuple[str, str]], *bases: Catalog) -> None:
        self.name = name
        self.own = dict(messages)
        self.bases = bases
        bad = problems(self.own)
        if bad:
            raise ValueError(f"catalog {name}: " + "; ".join(bad))

    def __call__(self, key: str, **params: Any) -> Msg:
        self.pair(key)  # a wrong key fails where it is written, not when drawn
        return Msg(self, key, params)

    def pair(self, key: str) -> tuple[str, str]:
        if key in self.own:
            return self.own[key]
        for b in self.bases:
            try:
                return b.pair(key)
            except KeyError:
                continue
        raise KeyError(f"{key!r} is in no catalog of {self.name}")

    def text(self, language: object, key: str, **params: Any) -> str:
        lang = code(language)
        template = self.pair(key)[CODES.index(lang)]
        return template.format(**{k: _rendered(v, lang) for k, v in params.items()})

    def lang(self, language: object) -> T:
        return T(self, code(language))

    def messages(self) -> dict[str, tuple[str, str]]:
        """Every message this catalog can render (bases first, own ones override)."""
        out: dict[str, tuple[str, str]] = {}
        for b in self.bases:
            out.update(b.messages())
        out.update(self.own)
        return out


@dataclass(frozen=True, slots=True)
class T:
    """A catalog bound to one language: ``t("key", **params)`` -> text."""

    catalog: Catalog
    code: str = "en"

    @property
    def zh(self) -> bool:
        return self.code == "zh"

    @property
    def language(self) -> str:
        return LANGS[CODES.index(self.code)]

    def __call__(self, key: str, **params: Any) -> str:
        return self.catalog.text(self.code, key, **params)

    def render(self, value: Any) -> Any:
        """A ``Msg`` in this language; anything else as it is."""
        return value.render(self.code) if isinstance(value, Msg) else value

    def join(self, items: Iterable[str]) -> str:
        """A list inside a sentence: "a, b, c" / "a、b、c"."""
        return ("、" if self.zh else ", ").join(items)

    def word(self, prefix: str, code: str, **params: Any) -> str:
        """A study's code in words: message ``prefix_code``, or the code itself when the
        catalog has none (a name or a notation such as "SGLang", "A->B", "8 GiB")."""
        key = f"{prefix}_{code}"
        try:
            self.catalog.pair(key)
        except KeyError:
            return code
        return self(key, **params)


def problems(messages: Mapping[str, tuple[str, str]]) -> list[str]:
    """Keys missing a language, or whose two texts have different placeholders / specs."""
    out = []
    for key, pair in messages.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(pair)):
            out.append(f"{key}: needs a non-empty English and 中文 text")
            continue
        try:
            en, zh = fields(pair[0]), fields(pair[1])
        except ValueError as e:
            out.append(f"{key}: {e}")
            continue
        if en != zh:
            out.append(f"{key}: placeholders differ, {en} vs {zh}")
    return out


__all__ = [
    "CODES",
    "LANGS",
    "Catalog",
    "Msg",
    "T",
    "code",
    "fields",
    "problems",
]
