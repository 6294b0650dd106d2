"""Input validation for the apps: every message names the argument and the allowed range.

``check_int`` / ``check_float`` / ``check_choice`` raise ``UserError`` (a ``gr.Error`` whose
text is a catalog message, so a validator or callback re-renders it in the page's language;
integer fields reject 3.5 and accept 3.0). ``name`` is the field's own message (``Msg``) from
the app's catalog. ``clip_text`` cuts an echoed user value to 40 characters; ``@study_errors``
turns a ``UserError`` into the page's language and kda_core's ``ValueError`` into a
``gr.Error`` that keeps the core's English sentence inside a translated one (cut to 300
characters). Rejecting before the callback runs is ``apps.ui.guard``'s job.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr

from apps.ui.catalog import Msg, UserError, code
from words.common import COMMON


def clip_text(value: object, n: int = 40) -> str:
    """``repr(value)`` cut to ``n`` characters (for echoing user input in error messages)."""
    r = repr(value)
    if len(r) <= n:
        return r
    return f"{r[: max(n - 1, 1)]}… ({len(r):,} chars)"


def _bound(v: float) -> str:
    """A range end as the reader would type it: 2147483647, not 2.14748e+09."""
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def _got(value: object) -> Msg | str:
    """How an error message echoes a value: a cleared number field arrives as None or ''."""
    empty = value is None or (isinstance(value, str) and not value)
    return COMMON("empty_field") if empty else clip_text(value)


def fail(key: str, catalog: Any = COMMON, **params: Any) -> UserError:
    """The error for message ``key`` of ``catalog`` (raise it)."""
    return UserError(catalog(key, **params))


def _number(name: Msg | str, value: object, lo: float, hi: float, key: str) -> float:
    rng = {"name": name, "lo": _bound(lo), "hi": _bound(hi)}
    try:
        if isinstance(value, bool) or value is None or (isinstance(value, str) and not value):
            raise TypeError
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise fail(key, **rng, got=_got(value)) from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise fail(key, **rng, got=clip_text(value))
    return v


def check_int(name: Msg | str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]`` (integral floats such as 3.0 are accepted)."""
    v = _number(name, value, lo, hi, "must_int")
    if v != int(v):
        raise fail("must_int", name=name, lo=_bound(lo), hi=_bound(hi), got=clip_text(value))
    return int(v)


def check_float(name: Msg | str, value: object, lo: float, hi: float) -> float:
    return _number(name, value, lo, hi, "must_number")


def check_choice(name: Msg | str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise fail("must_choice", name=name, choices=repr(list(choices)), got=clip_text(value))
    return str(value)


def language_of(fn: Callable[..., Any], args: tuple, kwargs: dict) -> str:
    """The ``language`` argument of a call of ``fn`` ("en" when it has none)."""
    if "language" in kwargs:
        return code(kwargs["language"])
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except TypeError:
        return "en"
    return code(bound.arguments.get("language", "en"))


def study_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Errors of ``fn`` as the reader sees them, in the call's ``language``: a ``UserError``
    re-rendered; a ``ValueError`` from the studies inside ``core_refused`` (cut to 300)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            raise gr.Error(e.render(language_of(fn, args, kwargs)), print_exception=False) from e
        except gr.Error:  # already a reader-facing message (gr.Error is a ValueError too)
            raise
        except ValueError as e:
            msg = str(e)
            if len(msg) > 300:  # never a 10 KB toast, whatever a study echoed
                msg = msg[:299] + "…"
            text = COMMON("core_refused", message=msg).render(language_of(fn, args, kwargs))
            raise gr.Error(text, print_exception=False) from e

    return wrapper
