"""The apps' side of the one message catalog (``words.catalog``, re-exported here unchanged)
plus what only a Gradio page needs: ``UserError``, a ``gr.Error`` that carries its ``Msg``, so
a validator or callback that knows the page's language re-renders it; ``message_in``; an
``UnknownLanguage`` refused as a ``gr.Error``; ``verbatim`` for the reader's own text.
"""

from __future__ import annotations

import gradio as gr

from words import catalog as _words
from words.catalog import CODES, LANGS, Catalog, Msg, T, code, fields, language_message, problems


class UnknownLanguage(_words.UnknownLanguage):
    """``words.catalog.UnknownLanguage`` refused as a ``gr.Error`` (the page shows its text)."""

    def refusal(self) -> Exception:
        return gr.Error(language_message(self), print_exception=False)


class UserError(gr.Error):
    """A reader-facing error whose text is a ``Msg`` (English until re-rendered)."""

    def __init__(self, msg: Msg) -> None:
        super().__init__(msg.render("en"), print_exception=False)
        self.msg = msg

    def render(self, language: object) -> str:
        return self.msg.render(language)


# every ASCII character Markdown, GFM (autolinks, tables, strikethrough), HTML or Gradio's
# LaTeX delimiters could read as syntax
_MARKUP = frozenset("\\`*_{}[]()#+-.!|~$:<>&\"'=")


def verbatim(text: str) -> str:
    """``text`` as characters a Markdown cell shows exactly as typed: each character that
    could be markup becomes a numeric character reference (``[a](http://x)`` stays text, no
    link; backticks no code span), a newline becomes ⏎ (one line)."""
    out = [f"&#{ord(c)};" if c in _MARKUP else c for c in text.replace("\n", "⏎")]
    return "".join(out)


def message_in(e: BaseException, language: object) -> str:
    """The text of an error in ``language``: a ``UserError`` re-rendered, else its text."""
    if isinstance(e, UserError):
        return e.render(language)
    msg = getattr(e, "message", None)
    return str(msg if isinstance(msg, str) else e)


__all__ = [
    "CODES",
    "LANGS",
    "Catalog",
    "Msg",
    "T",
    "UnknownLanguage",
    "UserError",
    "code",
    "fields",
    "language_message",
    "message_in",
    "problems",
    "verbatim",
]
