"""Validate once: the public API checks user-facing arguments with a ValueError; inside,
invariants are asserts (docs/architecture.md, "Validate once").

An AST scan over every file of ``kda_core`` lists ``raise ValueError`` inside private code: a
function whose name starts with ``_`` (dunders excluded) or any function nested in another.
Validators named ``_check*`` / ``_validate*`` / ``_require*`` / ``_parse*`` are where checks
live (called from a public entry, or where outside data is read) and may raise. The scan runs
in CI so the rule holds for new code. The public entry points themselves are exercised in
tests/test_validation_entries.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "kda_core"
VALIDATOR_PREFIXES = ("_check", "_validate", "_require", "_parse")

# Every room: the scan must find nothing there. "." = the top-level modules
# (kda_core/*.py: the facades, _checks, palette).
ROOMS = (
    ".",
    "cache",
    "fleet",
    "kda",
    "memory",
    "model",
    "plan",
    "serve",
    "sim",
    "sizing",
    "studies",
    "transfer",
    "workloads",
)

# Exceptions that stay, as "path::Qualified.name": why. A stale entry (no longer a hit) fails
# test_allow_list_is_not_stale, so the list only ever shrinks to what is really left.
ALLOWED: dict[str, str] = {}


def private_raises(source: str, path: str = "<string>") -> list[str]:
    """``path::qualname`` of each ``raise ValueError`` in private code of ``source``."""
    hits: list[str] = []

    def visit(node: ast.AST, stack: list[str], funcs: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, [*stack, child.name], funcs + 1)
                continue
            if isinstance(child, ast.ClassDef):
                visit(child, [*stack, child.name], funcs)
                continue
            if isinstance(child, ast.Raise) and funcs and _is_value_error(child.exc):
                fn = stack[-1]
                private = (fn.startswith("_") and not fn.startswith("__")) or funcs > 1
                if private and not fn.startswith(VALIDATOR_PREFIXES):
                    hits.append(f"{path}::{'.'.join(stack)}")
            visit(child, stack, funcs)

    visit(ast.parse(source), [], 0)
    return hits


def _is_value_error(exc: ast.expr | None) -> bool:
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "ValueError"


def _room_files(room: str) -> list[Path]:
    if room == ".":
        return sorted(CORE.glob("*.py"))
    return sorted((CORE / room).rglob("*.py"))


def _room_hits(room: str) -> list[str]:
    hits = []
    for p in _room_files(room):
        hits += private_raises(p.read_text(encoding="utf-8"), str(p.relative_to(REPO)))
    return hits


def test_every_room_is_scanned() -> None:
    subpackages = {p.parent.name for p in CORE.glob("*/__init__.py")}
    assert subpackages == set(ROOMS[1:])


@pytest.mark.parametrize("room", ROOMS)
def test_private_code_raises_no_value_error(room: str) -> None:
    assert [h for h in _room_hits(room) if h not in ALLOWED] == []


def test_allow_list_is_not_stale() -> None:
    every = {h for r in ROOMS for h in _room_hits(r)}
    assert set(ALLOWED) - every == set()


PLANTED = """
def public(x):
    if x < 0:
        raise ValueError("x must be >= 0")  # allowed: a public entry point

def _check_x(x):
    raise ValueError("x")  # allowed: a validator

def _parse_line(line):
    raise ValueError("line 1: bad")  # allowed: reading outside data

def _helper(x):
    raise ValueError("x")  # VIOLATION 1

def outer(x):
    def inner():
        raise ValueError("x")  # VIOLATION 2: a nested closure is private
    return inner

class Pool:
    def __init__(self, n):
        raise ValueError("n")  # allowed: the constructor is public

    def alloc(self, n):
        raise ValueError("n")  # allowed: a public method

    def _side(self, side):
        raise ValueError  # VIOLATION 3: bare class, private method

    def _check_side(self, side):
        raise ValueError(side)  # allowed

def _other(x):
    raise TypeError("x")  # not a ValueError: out of this rule
    assert x, "an invariant is an assert"
"""


def test_scanner_finds_the_planted_violations() -> None:
    assert private_raises(PLANTED, "m.py") == [
        "m.py::_helper",
        "m.py::outer.inner",
        "m.py::Pool._side",
    ]


def test_scanner_fails_a_room_with_a_violation() -> None:
    # a clean source passes, the same source with one private raise added does not
    clean = "def f(x):\n    if x:\n        raise ValueError('x')\n"
    assert private_raises(clean) == []
    assert private_raises(clean + "\ndef _g():\n    raise ValueError('y')\n") == ["<string>::_g"]
