"""Shared helpers of the plot tests: the scripts, quick data computed once, artists by gid."""

from __future__ import annotations

import importlib
from pathlib import Path

from plots import style
from plots.__main__ import SCRIPTS

REPO = Path(__file__).resolve().parents[1]
MODULES = {name: importlib.import_module(f"plots.{name}") for name in SCRIPTS}
DPI = 40  # small rasters keep the suite fast; the bytes still depend on every artist
MIN_BYTES = {"png": 4_000, "svg": 20_000}

_DATA: dict[str, object] = {}


def quick(name: str) -> object:
    """``compute(quick=True)`` of a script, computed once per test session."""
    if name not in _DATA:
        _DATA[name] = MODULES[name].compute(quick=True)
    return _DATA[name]


def figure(name: str, lang: str = "en"):  # noqa: ANN201
    with style.rc(DPI, lang):
        return MODULES[name].make_figure(quick(name), lang=lang)


def by_gid(fig, gid: str) -> list:  # noqa: ANN001
    found = fig.findobj(lambda a: a.get_gid() == gid)
    assert found, f"no artist with gid {gid!r}"
    return found


def line(fig, gid: str):  # noqa: ANN001, ANN201
    (art,) = by_gid(fig, gid)
    return art
