"""Shared argument checks for the core modules (numpy only).

Argument checks raise ``ValueError`` whose message names the argument and the allowed range; the
messages are part of the modules' contracts (tests match on them), so they stay as they were
when each module kept its own copy. Left out: float checks (each module words its own).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]``: a Python or numpy integer, not a bool.

    Used by memory, sizing, pool (slot counts) and engine.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


def check_integral(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    """``value`` as an int ``>= lo`` (and ``<= hi`` unless None): any ``numbers.Integral``
    but a bool; a plain in-range ``int`` takes a fast path and is returned as is.

    Used by policy and radix (hot paths: called per request).
    """
    if type(value) is int and value >= lo and (hi is None or value <= hi):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be {rng}, got {v}")
    return v


def check_bool(value: Any, name: str) -> bool:
    """``value`` if it is a real ``bool`` (not 0/1, not a numpy bool)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


MAX_SEED: int = 2**63 - 1


def check_seed(value: object, name: str = "seed") -> int:
    """A random seed: an int in ``[0, 2**63 - 1]`` (numpy's ``default_rng`` takes any
    non-negative int; the cap only keeps the message finite)."""
    return check_int(name, value, 0, MAX_SEED)


def rel_error(a: np.ndarray, ref: np.ndarray) -> float:
    """``||a - ref||_F / ||ref||_F``; the absolute distance ``||a - ref||_F`` when ref is zero."""
    diff = float(np.linalg.norm(np.asarray(a) - np.asarray(ref)))
    den = float(np.linalg.norm(ref))
    return diff / den if den > 0 else diff
