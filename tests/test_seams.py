"""Module seams of the source tree: no import cycle in ``kda_core``, no import of another
module's ``_private`` name, a package's private modules (``_name.py``) imported by that package
only, and a ceiling on ``kda_core``'s public names.

The public names are counted from the code itself (``ast``), over the public modules (no
component of the module's path starts with an underscore): every module-level function, class
and constant whose name has no leading underscore, plus the public methods and properties of
those classes (inherited ones too, from base classes defined in ``kda_core``), and every name a
public module exports (``__all__``) from a private module, counted the same way. ``python -m
tests.test_seams`` prints the figures.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = ("kda_core", "words", "apps", "plots", "bench")
PUBLIC_NAMES_CEILING = 639  # lowered as names go; see the module docstring for the count


@cache
def _modules(root: str) -> dict[str, Path]:
    out = {}
    for p in sorted((REPO / root).rglob("*.py")):
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imported(module: str, path: Path, tree: ast.AST) -> list[tuple[str, str]]:
    """(module imported from, name) for every import in the file, relative ones resolved;
    ``import a.b`` gives ("a.b", "")."""
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out += [(a.name, "") for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                parts = pkg.split(".")
                parts = parts[: len(parts) - (n.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            out += [(base, a.name) for a in n.names]
    return out


def import_graph() -> dict[str, set[str]]:
    """kda_core module -> the kda_core modules it imports (any import: top level, inside a
    function or under ``TYPE_CHECKING``; a name that is a submodule counts as that module)."""
    mods = _modules("kda_core")

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for base, name in _imported(m, p, ast.parse(p.read_text(encoding="utf-8"))):
            full = f"{base}.{name}" if name else base
            target = owner(full if full in mods else base)
            if target is not None and target != m:
                graph[m].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def private_imports() -> list[str]:
    """Every ``from <project module> import _name`` in the source (not tests)."""
    hits = []
    for root in SOURCE:
        for m, p in _modules(root).items():
            tree = ast.parse(p.read_text(encoding="utf-8"))
            for base, name in _imported(m, p, tree):
                private = name.startswith("_") and not name.startswith("__")
                own = f"{base}.{name}" in _modules(base.split(".")[0]) and m.startswith(base + ".")
                if base.split(".")[0] in SOURCE and private and not own:
                    hits.append(f"{p.relative_to(REPO)}: from {base} import {name}")
    return hits


def _classes() -> dict[tuple[str, str], tuple[list[str], list[tuple[str, str]]]]:
    """(module, class) -> (its public methods and properties, its kda_core base classes)."""
    mods = _modules("kda_core")
    out = {}
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        imported = {
            a.asname or a.name: (n.module, a.name)
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
            for a in n.names
        }
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = []
            for b in node.bases:
                if isinstance(b, ast.Name) and b.id in local:
                    bases.append((m, b.id))
                elif isinstance(b, ast.Name) and b.id in imported:
                    bases.append(imported[b.id])
            methods = [
                b.name
                for b in node.body
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not b.name.startswith("_")
            ]
            out[(m, node.name)] = (methods, bases)
    return out


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _defined(tree: ast.Module) -> dict[str, ast.stmt]:
    """Public top-level name -> its definition."""
    out: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update({t.id: node for t in targets if isinstance(t, ast.Name)})
    return {k: v for k, v in out.items() if not k.startswith("_")}


def _exports(tree: ast.Module) -> set[str]:
    """The names a module's ``__all__`` lists."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return set()


def public_names() -> list[str]:
    """``kda_core``'s public names (see the module docstring)."""
    classes = _classes()
    mods = _modules("kda_core")
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in mods.items()}

    def members(key: tuple[str, str], seen: set) -> set[str]:
        if key not in classes or key in seen:
            return set()
        seen.add(key)
        methods, bases = classes[key]
        return set(methods).union(*(members(b, seen) for b in bases))

    def names(m: str, name: str, node: ast.stmt) -> list[str]:
        out = [f"{m}.{name}"]
        if isinstance(node, ast.ClassDef):
            out += [f"{m}.{name}.{x}" for x in sorted(members((m, name), set()))]
        return out

    out: list[str] = []
    for m, tree in trees.items():
        if _private(m):
            continue
        for name, node in _defined(tree).items():
            out += names(m, name, node)
        exported = _exports(tree)
        for base, name in _imported(m, mods[m], tree):
            home = _defined(trees[base]) if base in trees and _private(base) else {}
            if name in exported and name in home:  # a private module's name, exported here
                out += names(base, name, home[name])
    return sorted(set(out))


def private_module_imports() -> list[str]:
    """Imports of a private module (``pkg._x`` or below) from outside the package ``pkg``."""
    hits = []
    for root in SOURCE:
        for m, p in _modules(root).items():
            for base, name in _imported(m, p, ast.parse(p.read_text(encoding="utf-8"))):
                full = f"{base}.{name}" if name else base
                parts = full.split(".")
                known = _modules(parts[0]) if parts[0] in SOURCE else {}
                for i, part in enumerate(parts):
                    private = part.startswith("_") and not part.startswith("__")
                    if private and ".".join(parts[: i + 1]) in known:  # a private module
                        pkg = ".".join(parts[:i])
                        if not (m == pkg or m.startswith(pkg + ".")):
                            hits.append(f"{p.relative_to(REPO)}: {full}")
                        break
    return hits


def test_private_modules_stay_in_their_package() -> None:
    assert private_module_imports() == []


def test_no_import_cycle_in_kda_core() -> None:
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_of_another_modules_private_name() -> None:
    assert private_imports() == []


def test_public_names_stay_under_the_ceiling() -> None:
    names = public_names()
    assert len(names) == len(set(names))
    assert len(names) <= PUBLIC_NAMES_CEILING


if __name__ == "__main__":
    names = public_names()
    lines = sum(p.read_text(encoding="utf-8").count("\n") for p in _modules("kda_core").values())
    print(f"kda_core: {len(names)} public names, {lines} lines")
    print(f"import cycles: {cycles(import_graph())}")
    print(f"private imports: {len(private_imports())}")
