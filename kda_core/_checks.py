"""Shared argument checks for the core modules (numpy only).

Every check takes the argument's name first, then its value, and raises ``ValueError`` whose
message names the argument and the allowed range (tests match on the messages). Left out:
float checks (each module words its own).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def check_int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]`` (``>= lo`` when ``hi`` is None): any
    ``numbers.Integral`` (Python or numpy) but a bool. A plain in-range ``int`` takes a fast
    path and is returned as is (the radix cache and the policies call this per request)."""
    if type(value) is int and value >= lo and (hi is None or value <= hi):
        return value
    span = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {span}, got {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"{name} must be {span}, got {v}")
    return v


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is a real ``bool`` (not 0/1, not a numpy bool)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


MAX_SEED: int = 2**63 - 1


def check_seed(name: str, value: object) -> int:
    """A random seed: an int in ``[0, 2**63 - 1]`` (numpy's ``default_rng`` takes any
    non-negative int; the cap only keeps the message finite)."""
    return check_int(name, value, 0, MAX_SEED)


MAX_BUDGET_BYTES: int = 1 << 60


def check_budget(name: str, value: Any) -> int | None:
    """A byte budget: None (unlimited) or a real number of bytes in ``[0, 2**60]``, as an int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be None or a number of bytes in [0, 2**60], got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0 <= v <= MAX_BUDGET_BYTES):
        raise ValueError(f"{name} must be None or a number of bytes in [0, 2**60], got {value!r}")
    return int(v)


def rel_error(a: np.ndarray, ref: np.ndarray) -> float:
    """``||a - ref||_F / ||ref||_F``; the absolute distance ``||a - ref||_F`` when ref is zero."""
    diff = float(np.linalg.norm(np.asarray(a) - np.asarray(ref)))
    den = float(np.linalg.norm(ref))
    return diff / den if den > 0 else diff
