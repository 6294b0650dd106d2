"""The training corpus: the docstrings of CPython's standard library and of permissively licensed
Python packages, whole (prose, parameter sections, markup, doctest examples), frozen once.

`python -m kda_core.model.corpus freeze` parses (never imports) every ``.py`` file of the
running interpreter's standard library and of the packages named in ``TRAIN_PACKAGES`` and
``OUT_OF_STYLE_PACKAGES`` (looked up with ``importlib.metadata``), and writes
``assets/corpus/``: ``train.txt``, ``heldout.txt``, ``out_of_style.txt``, ``manifest.json``
(interpreter and package versions, licences, sizes and sha256) and each source's licence under
``licences/``. The files are committed, so training and the tests never depend on the
interpreter or packages that run them; `load` checks the hash.

Docstrings: module, class and function docstrings in source order, cleaned as ``inspect.cleandoc``
does, tabs expanded, trailing spaces cut, runs of blank lines cut to one; kept when they are at
least ``MIN_CHARS`` characters of printable ASCII (newlines included). A docstring seen before
(same text, anywhere, in freeze order) is kept once. One document per module: its docstrings
separated by a blank line; documents are separated by two blank lines (``DOC_SEPARATOR``; no
document holds one). Skipped: ``test``/``tests``/``testing`` directories, ``test_*.py``,
``conftest.py``, vendored code, ``idlelib``, ``lib2to3``, ``site-packages``.

Splits: a module of the standard library or of a training package is held out (``heldout``,
in-domain) when the first byte of ``sha256(its path)`` is below 26 (about 1 in 10), with all its
docstrings; the packages of ``OUT_OF_STYLE_PACKAGES`` are never trained on: their API references
(parameter sections, code examples, other markup conventions) are the ``out_of_style`` split,
``OUT_OF_STYLE_BYTES`` per package from modules in sha256 order, each document cut after the
docstring that takes it past ``OUT_OF_STYLE_DOC_BYTES``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata as metadata
import inspect
import json
import re
import sys
import sysconfig
from pathlib import Path

from kda_core.model._weights import sha256_file

_CORPUS_DIR = Path(__file__).resolve().parents[2] / "assets" / "corpus"
_SPLITS: tuple[str, ...] = ("train", "heldout", "out_of_style")
_DOC_SEPARATOR = "\n\n\n"
_HELDOUT_BYTE_BELOW = 26  # first sha256 byte < 26 of 256: ~10 % of modules held out
_MIN_CHARS = 40
_EXCLUDED_DIRS = frozenset(
    {"test", "tests", "testing", "idlelib", "lib2to3", "site-packages", "__pycache__", "_vendor"}
    | {"vendor", "vendored", "externals"}
)
# distribution -> (import directories, SPDX licence of its own text). Only PSF, BSD and MIT.
_TRAIN_PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "numpy": (("numpy",), "BSD-3-Clause"),
    "pandas": (("pandas",), "BSD-3-Clause"),
    "mpmath": (("mpmath",), "BSD-3-Clause"),
    "click": (("click",), "BSD-3-Clause"),
    "pygments": (("pygments",), "BSD-2-Clause"),
    "attrs": (("attr", "attrs"), "MIT"),
    "rich": (("rich",), "MIT"),
    "pytest": (("_pytest", "pytest"), "MIT"),
    "pyparsing": (("pyparsing",), "MIT"),
    "narwhals": (("narwhals",), "MIT"),
    "anyio": (("anyio",), "MIT"),
    "httpx": (("httpx",), "BSD-3-Clause"),
    "typer": (("typer",), "MIT"),
}
# API references in four conventions: numpy-style sections (networkx, matplotlib), Sphinx
# fields (jinja2), Google-style sections with Markdown code fences (pydantic).
_OUT_OF_STYLE_PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "networkx": (("networkx",), "BSD-3-Clause"),
    "matplotlib": (("matplotlib", "mpl_toolkits"), "Matplotlib License (PSF-based)"),
    "jinja2": (("jinja2",), "BSD-3-Clause"),
    "pydantic": (("pydantic",), "MIT"),
}
# the greedy samples docs/model.md shows (64 bytes each, checked by `first_repeat`)
SAMPLE_PROMPTS: tuple[str, ...] = (
    "Return the number of",
    "This module provides",
    "If the timeout is",
)
_OUT_OF_STYLE_BYTES = 32_768
# a greedy continuation loops when a byte 12-gram comes back. A strict test: 7.4 % of the 64-byte
# windows of held-out text hold such a repeat too (indentation runs, tables, doctest output)
_LOOP_NGRAM = 12
_OUT_OF_STYLE_DOC_BYTES = 6_144
_BLANK_RUN = re.compile(r"\n{3,}")


def _clean(doc: str) -> str | None:
    """A docstring as the corpus keeps it (module docstring), or None when it is not kept."""
    lines = [ln.rstrip() for ln in inspect.cleandoc(doc).expandtabs(8).split("\n")]
    text = _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip("\n")
    if len(text) < _MIN_CHARS or not text.isascii():
        return None
    if not all(c.isprintable() or c == "\n" for c in text):
        return None
    return text


def _docstrings(source: str) -> list[str]:
    """Module, class and function docstrings of one file, in source order, cleaned."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    nodes = [tree] + sorted(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        ),
        key=lambda n: (n.lineno, n.col_offset),
    )
    out = []
    for n in nodes:
        doc = ast.get_docstring(n, clean=False)
        text = _clean(doc) if doc else None
        if text:
            out.append(text)
    return out


def _is_heldout(module: str) -> bool:
    """The split rule: first byte of sha256(module path) below HELDOUT_BYTE_BELOW."""
    return hashlib.sha256(module.encode()).digest()[0] < _HELDOUT_BYTE_BELOW


def _modules(root: Path, prefix: str = "") -> list[tuple[str, Path]]:
    """(module path as the split rule hashes it, file) for the sources under ``root``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if _EXCLUDED_DIRS.intersection(rel.parts[:-1]):
            continue
        if rel.name.startswith("test_") or rel.name == "conftest.py":
            continue
        out.append((prefix + rel.as_posix(), path))
    return out


def _module_document(path: Path, seen: set[str], cap: int | None = None) -> str:
    """One module's new docstrings joined by blank lines (added to ``seen``); with ``cap``,
    cut after the docstring that takes the document past ``cap`` bytes."""
    kept: list[str] = []
    size = 0
    for doc in _docstrings(path.read_text(encoding="utf-8", errors="replace")):
        if doc in seen:
            continue
        seen.add(doc)
        kept.append(doc)
        size += len(doc) + 2
        if cap is not None and size >= cap:
            break
    return "\n\n".join(kept)


def _package_roots(dist: str, dirs: tuple[str, ...]) -> list[tuple[str, Path]]:
    """(import directory name, path) of an installed distribution's packages."""
    d = metadata.distribution(dist)
    roots = [(name, Path(str(d.locate_file(name)))) for name in dirs]
    return [(name, p) for name, p in roots if p.is_dir()]


def _extract(
    stdlib: Path, packages: tuple[str, ...] = tuple(_TRAIN_PACKAGES), seen: set[str] | None = None
) -> dict[str, list[str]]:
    """{split: [document per module]} of the stdlib at ``stdlib`` and the training packages
    (``heldout`` by the split rule; ``out_of_style`` empty). Deterministic; the docstrings kept
    are added to ``seen``."""
    seen = set() if seen is None else seen
    docs: dict[str, list[str]] = {s: [] for s in _SPLITS}
    sources = [("", stdlib)]
    for dist in packages:
        sources += [(name + "/", p) for name, p in _package_roots(dist, _TRAIN_PACKAGES[dist][0])]
    for prefix, root in sources:
        for module, path in _modules(root, prefix):
            text = _module_document(path, seen)
            if text:
                docs["heldout" if _is_heldout(module) else "train"].append(text)
    return docs


def _extract_out_of_style(seen: set[str]) -> dict[str, list[str]]:
    """The out_of_style documents by package: modules in sha256 order until
    OUT_OF_STYLE_BYTES, docstrings already in ``seen`` (training text) left out."""
    by_package: dict[str, list[str]] = {}
    for dist, (dirs, _) in _OUT_OF_STYLE_PACKAGES.items():
        out = by_package[dist] = []
        mods = [m for name, root in _package_roots(dist, dirs) for m in _modules(root, name + "/")]
        mods.sort(key=lambda m: hashlib.sha256(m[0].encode()).digest())
        size = 0
        for _, path in mods:
            text = _module_document(path, seen, _OUT_OF_STYLE_DOC_BYTES)
            if text:
                out.append(text)
                size += len(text) + len(_DOC_SEPARATOR)
            if size >= _OUT_OF_STYLE_BYTES:
                break
    return by_package


def _check_licences(out_dir: Path, stdlib: Path) -> dict[str, dict]:
    """Copy every source's licence files to ``licences/``; -> the manifest's sources entry."""
    lic_dir = out_dir / "licences"
    lic_dir.mkdir(parents=True, exist_ok=True)
    (lic_dir / "python-LICENSE.txt").write_bytes((stdlib / "LICENSE.txt").read_bytes())
    sources = {
        "python": {
            "version": sys.version.split()[0],
            "licence": "PSF-2.0",
            "licence_files": ["licences/python-LICENSE.txt"],
            "role": "train / heldout",
        }
    }
    for dist, (_, spdx) in {**_TRAIN_PACKAGES, **_OUT_OF_STYLE_PACKAGES}.items():
        d = metadata.distribution(dist)
        files = []
        for f in d.files or []:  # the project's own licence: top level of the dist-info
            parts = Path(str(f)).parts
            name = parts[-1]
            top = len(parts) == 2 or (len(parts) == 3 and parts[1] == "licenses")
            if top and parts[0].endswith(".dist-info") and name.upper().startswith("LICEN"):
                dest = f"licences/{dist}-{name}"
                (out_dir / dest).write_bytes(Path(str(d.locate_file(f))).read_bytes())
                files.append(dest)
        if not files:
            raise ValueError(f"{dist}: no licence file found in its dist-info")
        role = "out_of_style" if dist in _OUT_OF_STYLE_PACKAGES else "train / heldout"
        sources[dist] = {
            "version": d.version,
            "licence": spdx,
            "licence_files": sorted(files),
            "role": role,
        }
    return sources


def _freeze(out_dir: Path = _CORPUS_DIR, stdlib: Path | None = None) -> dict:
    """Extract and write the corpus files, licences and manifest; returns the manifest."""
    stdlib = Path(stdlib or sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    docs = _extract(stdlib, seen=seen)
    by_package = _extract_out_of_style(seen)
    docs["out_of_style"] = [d for package in by_package.values() for d in package]
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in _SPLITS:
        path = out_dir / f"{split}.txt"
        path.write_text(_DOC_SEPARATOR.join(docs[split]) + "\n", encoding="utf-8")
        files[split] = {
            "file": path.name,
            "documents": len(docs[split]),
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    manifest = {
        "source": "docstrings of CPython's standard library and of permissively licensed "
        "packages (*.py), parsed with ast",
        "implementation": sys.implementation.name,
        "sources": _check_licences(out_dir, stdlib),
        "split_rule": f"held out when sha256(module path)[0] < {_HELDOUT_BYTE_BELOW}; "
        f"out_of_style: {', '.join(_OUT_OF_STYLE_PACKAGES)} (never trained on)",
        "files": files,
        "out_of_style_documents": {k: len(v) for k, v in by_package.items()},
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def manifest(corpus_dir: Path = _CORPUS_DIR) -> dict:
    return json.loads((corpus_dir / "manifest.json").read_text())


def load(split: str = "train", corpus_dir: Path = _CORPUS_DIR) -> str:
    """The frozen text of one split, checked against the manifest's sha256."""
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    entry = manifest(corpus_dir)["files"][split]
    data = (corpus_dir / entry["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise ValueError(f"{entry['file']}: sha256 {digest} does not match the manifest")
    return data.decode("utf-8")


def documents(text: str) -> list[str]:
    """The documents of a corpus file (one per module, separated by DOC_SEPARATOR)."""
    return [d.strip("\n") for d in text.split(_DOC_SEPARATOR) if len(d.strip("\n").encode()) >= 2]


def _out_of_style_by_package(corpus_dir: Path = _CORPUS_DIR) -> dict[str, str]:
    """The out_of_style text split by the package it came from (the manifest's counts)."""
    docs = documents(load("out_of_style", corpus_dir))
    out, start = {}, 0
    for package, n in manifest(corpus_dir)["out_of_style_documents"].items():
        out[package] = _DOC_SEPARATOR.join(docs[start : start + n])
        start += n
    return out


def scores(model, heldout_bytes: int = 65536) -> dict:
    """What docs/model.md reports: bits per byte in-domain (the first ``heldout_bytes`` of the
    held-out documents) and out of style (all of it, and per package), the greedy
    continuations (64 bytes) of SAMPLE_PROMPTS and how often greedy output loops."""
    from kda_core.model.tokenizer import decode, encode

    out = {
        "heldout": corpus_bits_per_byte(model, load("heldout"), heldout_bytes),
        "out_of_style": corpus_bits_per_byte(model, load("out_of_style")),
    }
    for package, text in _out_of_style_by_package().items():
        out[f"out_of_style:{package}"] = corpus_bits_per_byte(model, text)
    greedy = {p: model.generate(encode(p), 64)[0] for p in SAMPLE_PROMPTS}
    out["greedy"] = {p: decode(ids) for p, ids in greedy.items()}
    out["greedy_first_repeat"] = {p: first_repeat(bytes(ids)) for p, ids in greedy.items()}
    for split in ("heldout", "out_of_style"):  # how often real text "loops" by that definition
        docs = [d.encode() for d in documents(load(split))]
        windows = [d[i : i + 64] for d in docs for i in range(0, len(d) - 64, 64)]
        repeats = sum(first_repeat(w) is not None for w in windows)
        out[f"{split}_64_byte_windows_with_a_repeat"] = repeats / len(windows)
        # and how often the model loops from text it never saw: greedy 64 bytes after the first
        # 20 bytes of every document of 200 bytes or more
        prompts = [list(d[:20]) for d in docs if len(d) >= 200]
        loops = sum(first_repeat(bytes(model.generate(q, 64)[0])) is not None for q in prompts)
        out[f"{split}_prompts_greedy_loop_share"] = loops / len(prompts)
    return out


def first_repeat(data: bytes, n: int = _LOOP_NGRAM) -> tuple[int, int] | None:
    """Where ``data`` starts to loop: ``(first, second)``, the two starts of the byte n-gram whose
    second occurrence starts earliest (``second - first`` is the loop's period; occurrences may
    overlap, so a period shorter than n counts), or None when no n-gram occurs twice."""
    if not 1 <= n <= 4096:
        raise ValueError(f"n must be in [1, 4096], got {n}")
    seen: dict[bytes, int] = {}
    for i in range(len(data) - n + 1):
        first = seen.setdefault(data[i : i + n], i)
        if first != i:
            return first, i
    return None


def corpus_bits_per_byte(model, text: str, max_bytes: int | None = None) -> float:
    """Bits per byte over the documents of ``text``, each scored from a fresh state (total bits
    / total predictions, so long documents weigh by their length); the documents are taken in
    order until ``max_bytes`` (None: all; a longer document is cut at the MAX_TOKENS cap)."""
    from kda_core.model.tiny import bits_per_byte
    from kda_core.model.tokenizer import MAX_TOKENS

    bits = count = 0.0
    for doc in documents(text):
        data = doc.encode()[:MAX_TOKENS]
        if max_bytes is not None:
            data = data[: max(0, max_bytes - int(count))]
        if len(data) < 2:
            break
        piece = data.decode("utf-8", errors="ignore")  # the corpus is ASCII: a no-op
        n = len(piece.encode()) - 1
        bits += bits_per_byte(model, piece) * n
        count += n
    if count == 0:
        raise ValueError("text must hold at least one document of 2 or more bytes")
    return bits / count


def _main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m kda_core.model.corpus", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("command", choices=("freeze", "show", "score"))
    ap.add_argument("--out", type=Path, default=_CORPUS_DIR)
    args = ap.parse_args(argv)
    if args.command == "score":  # the shipped model (or KDA_LAB_CHECKPOINT's)
        from kda_core.model.tiny import TinyHybrid

        print(json.dumps(scores(TinyHybrid()), indent=2))
        return
    m = _freeze(args.out) if args.command == "freeze" else manifest(args.out)
    print(json.dumps(m, indent=2))


if __name__ == "__main__":
    _main()
