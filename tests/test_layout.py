"""The layout rules: files <= 400 lines, functions <= 80, module docstrings of the core <= 30
lines, the core and the message catalog (``words``) import no UI library, and the public
API's entry modules (docs/architecture.md) resolve to the code in the subpackages."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE = ("kda_core", "words", "apps", "plots", "bench")
MAX_FILE, MAX_FUNC, MAX_DOC = 400, 80, 30
UI = ("gradio", "plotly", "matplotlib")


def _files(*roots: str) -> list[Path]:
    return sorted(p for r in roots for p in (REPO / r).rglob("*.py"))


def _long_functions(tree: ast.AST) -> list[str]:
    return [
        f"function {n.name}"
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.end_lineno - n.lineno + 1 > MAX_FUNC
    ]


def _violations(path: Path) -> list[str]:
    src = path.read_text(encoding="utf-8")
    out = ["file"] if src.count("\n") > MAX_FILE else []
    return out + _long_functions(ast.parse(src))


def test_source_files_and_functions_are_short() -> None:
    bad = {str(p.relative_to(REPO)): v for p in _files(*SOURCE) if (v := _violations(p))}
    assert bad == {}


def test_test_files_are_short_too() -> None:
    bad = {str(p.relative_to(REPO)): v for p in _files("tests") if (v := _violations(p))}
    assert bad == {}


def test_core_module_docstrings_are_short() -> None:
    long = {}
    for p in _files("kda_core"):
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")), clean=False)
        if doc and doc.count("\n") + 1 > MAX_DOC:
            long[str(p.relative_to(REPO))] = doc.count("\n") + 1
    assert long == {}


@pytest.mark.parametrize("root", ["kda_core", "words"])  # words: apps and plots import it
def test_core_and_catalog_import_no_ui_library(root: str) -> None:
    hits = []
    for p in _files(root):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = []
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                names = [n.module]
            hits += [f"{p.relative_to(REPO)}: {m}" for m in names if m.split(".")[0] in UI]
    assert hits == []


@pytest.mark.parametrize(
    ("facade", "name", "home"),
    [
        ("kda_core.kda", "chunked", "kda_core.kda.chunkwise"),
        ("kda_core.conv", "short_conv", "kda_core.kda.conv"),
        ("kda_core.cp", "context_parallel", "kda_core.kda.cp"),
        ("kda_core.quant", "quantize_int8", "kda_core.kda.quant"),
        ("kda_core.policy", "make", "kda_core.cache.policy"),
        ("kda_core.engine", "Engine", "kda_core.serve.engine"),
        ("kda_core.engine", "Request", "kda_core.serve.engine"),
        ("kda_core.sim", "simulate", "kda_core.sim.simulator"),
        ("kda_core.workloads", "load_mooncake", "kda_core.workloads.mooncake"),
        ("kda_core.model", "bits_per_byte", "kda_core.model.tiny"),
        ("kda_core.sizing", "max_running_requests", "kda_core.sizing.slots"),
    ],
)
def test_contract_paths_are_the_subpackage_code(facade: str, name: str, home: str) -> None:
    obj = getattr(importlib.import_module(facade), name)
    assert obj is getattr(importlib.import_module(home), name)
