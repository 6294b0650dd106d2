"""Reject a bad input before the callback runs, so the page keeps its previous outputs.

Gradio's ``validator=`` (Gradio 6, ``gradio/queueing.py`` ``Queue.push`` runs it before the
event; ``process_validation_response`` collects ``gr.validate`` results): when an input is
invalid the main function never runs, the message is drawn once, on the offending input, and
no output gets an "Error" badge or loses its figure. A ``gradio_client`` caller gets a
``ValidationError`` naming the parameter.

    btn.click(run, inputs, outputs, validator=guard.validator(
        lambda v: ui.check_int("seed", v, 0, 2**31 - 1), None, ...))

``checks[i]`` validates ``inputs[i]`` (``None``: nothing to check; states, the language
switch); a check raises ``gr.Error`` or ``ValueError`` with the message. ``cross(*values)``
checks combinations after every single input passed and returns ``(input index, message)`` or
``None``. The callbacks keep their own checks (direct calls and the API still reject bad
input); the validator only decides that the page is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

Check = Callable[[Any], object] | None


def message_of(e: Exception) -> str:
    """The plain message of a ``gr.Error`` / ``ValueError`` (no repr quotes)."""
    msg = getattr(e, "message", None)
    return str(msg if isinstance(msg, str) else e)


def validator(
    *checks: Check, cross: Callable[..., tuple[int, str] | None] | None = None
) -> Callable[..., list[dict[str, Any]]]:
    def validate(*values: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i, v in enumerate(values):
            chk = checks[i] if i < len(checks) else None
            msg = ""
            if chk is not None:
                try:
                    chk(v)
                except (gr.Error, ValueError, TypeError) as e:
                    msg = message_of(e) or "invalid value"
            out.append(gr.validate(not msg, msg))
        if cross is not None and all(o["is_valid"] for o in out):
            try:
                bad = cross(*values)
            except (gr.Error, ValueError, TypeError) as e:
                bad = (0, message_of(e))
            if bad is not None:
                out[bad[0]] = gr.validate(False, bad[1])
        return out

    return validate


__all__ = ["Check", "message_of", "validator"]
