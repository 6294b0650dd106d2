"""Reject a bad input before the callback runs, so the page keeps its previous outputs.

Gradio's ``validator=`` (Gradio 6, ``gradio/queueing.py`` ``Queue.push`` runs it before the
event; ``process_validation_response`` collects ``gr.validate`` results): when an input is
invalid the main function never runs, the message is drawn once, on the offending input, and
no output gets an "Error" badge or loses its figure. A ``gradio_client`` caller gets a
``ValidationError`` naming the parameter.

    btn.click(run, [*inputs, page.radio], outputs, validator=guard.validator(
        lambda v: ui.check_int(MSG("f_seed"), v, 0, 2**31 - 1), None, ...))

``checks[i]`` validates ``inputs[i]`` (``None``: nothing to check; states, the language
switch); a check raises ``UserError`` (``apps.ui.catalog``), ``gr.Error`` or ``ValueError``.
The message is drawn in the page's language: the last input, when it is the header's switch;
a language the switch does not know (an API caller's) is refused on the switch itself, naming
the argument and its values.
``cross(*values)`` checks combinations after every single input passed and returns ``(input
index, message)`` or ``None``; its message may be a ``Msg``. The callbacks keep their own
checks (direct calls and the API still reject bad input); the validator only decides that the
page is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from apps.ui.catalog import (
    CODES,
    LANGS,
    Msg,
    UnknownLanguage,
    UserError,
    language_message,
    message_in,
)
from words.common import COMMON

Check = Callable[[Any], object] | None


def message_of(e: Exception, language: object = "en") -> str:
    """The plain message of an error in ``language`` (no repr quotes); a kda_core
    ``ValueError`` keeps its English sentence inside a translated one."""
    if isinstance(e, (UserError, gr.Error)):
        return message_in(e, language)
    if isinstance(e, ValueError):
        return COMMON("core_refused", message=str(e)).render(language)
    return str(e)


def validator(
    *checks: Check, cross: Callable[..., tuple[int, str | Msg] | None] | None = None
) -> Callable[..., list[dict[str, Any]]]:
    def validate(*values: Any) -> list[dict[str, Any]]:
        lang = values[-1] if values and values[-1] in (*LANGS, *CODES) else "en"
        out: list[dict[str, Any]] = []
        for i, v in enumerate(values):
            chk = checks[i] if i < len(checks) else None
            msg = language_message(v) if isinstance(v, UnknownLanguage) else ""
            if chk is not None and not msg:
                try:
                    chk(v)
                except (gr.Error, ValueError, TypeError) as e:
                    msg = message_of(e, lang) or COMMON("invalid").render(lang)
            out.append(gr.validate(not msg, msg))
        if cross is not None and all(o["is_valid"] for o in out):
            try:
                bad = cross(*values)
            except (gr.Error, ValueError, TypeError) as e:
                bad = (0, message_of(e, lang))
            if bad is not None:
                text = bad[1].render(lang) if isinstance(bad[1], Msg) else bad[1]
                out[bad[0]] = gr.validate(False, text)
        return out

    return validate


__all__ = ["Check", "message_of", "validator"]
