"""Input validation for the apps: every message names the argument and the allowed range.

``check_int`` / ``check_float`` / ``check_choice`` raise ``gr.Error`` (integer fields reject
3.5 and accept 3.0); ``clip_text`` cuts an echoed user value to 40 characters; the
``@study_errors`` decorator turns kda_core's ``ValueError`` into ``gr.Error`` (cut to 300
characters) and keeps the wrapped signature. Rejecting before the callback runs (so the page
keeps its outputs) is ``apps.ui.guard``'s job.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr


def clip_text(value: object, n: int = 40) -> str:
    """``repr(value)`` cut to ``n`` characters (for echoing user input in error messages)."""
    r = repr(value)
    if len(r) <= n:
        return r
    return f"{r[: max(n - 1, 1)]}… ({len(r):,} chars)"


def _err(message: str) -> gr.Error:
    return gr.Error(message, print_exception=False)


def _bound(v: float) -> str:
    """A range end as the reader would type it: 2147483647, not 2.14748e+09."""
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def _got(value: object) -> str:
    """How an error message echoes a value: a cleared number field arrives as None or ''."""
    empty = value is None or (isinstance(value, str) and not value)
    return "an empty field" if empty else clip_text(value)


def _number(name: str, value: object, lo: float, hi: float, kind: str) -> float:
    try:
        if isinstance(value, bool) or value is None or (isinstance(value, str) and not value):
            raise TypeError
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _err(
            f"{name} must be {kind} in [{_bound(lo)}, {_bound(hi)}], got {_got(value)}"
        ) from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise _err(f"{name} must be {kind} in [{_bound(lo)}, {_bound(hi)}], got {clip_text(value)}")
    return v


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]`` (integral floats such as 3.0 are accepted)."""
    v = _number(name, value, lo, hi, "an integer")
    if v != int(v):
        raise _err(
            f"{name} must be an integer in [{_bound(lo)}, {_bound(hi)}], got {clip_text(value)}"
        )
    return int(v)


def check_float(name: str, value: object, lo: float, hi: float) -> float:
    return _number(name, value, lo, hi, "a number")


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise _err(f"{name} must be one of {list(choices)}, got {clip_text(value)}")
    return str(value)


def study_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ``ValueError`` from the studies into ``gr.Error`` (same message)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:  # already a reader-facing message (gr.Error is a ValueError too)
            raise
        except ValueError as e:
            msg = str(e)
            if len(msg) > 300:  # never a 10 KB toast, whatever a study echoed
                msg = msg[:299] + "…"
            raise gr.Error(msg, print_exception=False) from e

    return wrapper
