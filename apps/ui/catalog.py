"""The apps' side of the one message catalog (``words.catalog``, re-exported here unchanged)
plus what only a Gradio page needs: ``UserError``, a ``gr.Error`` that carries its ``Msg``, so
a validator or callback that knows the page's language re-renders it, and ``message_in``.
"""

from __future__ import annotations

import gradio as gr

from words.catalog import CODES, LANGS, Catalog, Msg, T, code, fields, problems


class UserError(gr.Error):
    """A reader-facing error whose text is a ``Msg`` (English until re-rendered)."""

    def __init__(self, msg: Msg) -> None:
        super().__init__(msg.render("en"), print_exception=False)
        self.msg = msg

    def render(self, language: object) -> str:
        return self.msg.render(language)


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
    "UserError",
    "code",
    "fields",
    "message_in",
    "problems",
]
