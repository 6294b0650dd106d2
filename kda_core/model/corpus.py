"""The training corpus: English prose from CPython's standard-library docstrings, frozen once.

`python -m kda_core.model.corpus freeze` parses (never imports) every ``.py`` file of the running
interpreter's standard library, keeps the prose paragraphs of module / class / function
docstrings and writes them to ``assets/corpus/`` (``train.txt``, ``heldout.txt``,
``manifest.json`` with the Python version, sizes and sha256). The files are committed, so
training and the tests never depend on the interpreter that runs them; `load` checks the hash.

Paragraph filter (why: the model should see running English, not code or tables): a paragraph
is the text between blank lines of a cleaned docstring (`inspect.cleandoc`), its lines joined by
single spaces; it is kept when it is at least 60 characters of printable ASCII, at least 80 % of
its characters are letters or spaces, it holds no doctest prompt (``>>>``), no reST directive or
table rule (``..``, ``::``, ``===``, ``---``), no indented (code) line, and it ends with ``.``,
``?`` or ``!``. Duplicates (same paragraph in several places) are kept once, first occurrence in
sorted path order. Left out: ``test``/``tests``/``idlelib``/``lib2to3``/``site-packages``
(test fixtures and vendored code).

Split rule: a module goes to the held-out file when the first byte of
``sha256(module path relative to the stdlib)`` is below 26 (about 1 in 10 modules); all its
paragraphs go with it, so held-out text is never seen in training, not even in part.
Documents are separated by one blank line; paragraphs by a newline.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import sys
import sysconfig
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parents[2] / "assets" / "corpus"
SPLITS: tuple[str, ...] = ("train", "heldout")
HELDOUT_BYTE_BELOW = 26  # first sha256 byte < 26 of 256: ~10 % of modules held out
MIN_CHARS = 60
MIN_LETTER_SHARE = 0.8
EXCLUDED_DIRS = frozenset({"test", "tests", "idlelib", "lib2to3", "site-packages", "__pycache__"})
BANNED = (">>>", "..", "::", "===", "---", "`", "http")


def _docstrings(source: str) -> list[str]:
    """Module, class and function docstrings of one file, in source order."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    nodes = [tree] + [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    out = []
    for n in nodes:
        doc = ast.get_docstring(n, clean=False)
        if doc:
            out.append(inspect.cleandoc(doc))
    return out


def is_prose(paragraph: str) -> bool:
    """The paragraph filter of the module docstring (on the joined, single-line paragraph)."""
    p = paragraph
    if len(p) < MIN_CHARS or not p.isascii() or not p.isprintable():
        return False
    if any(b in p for b in BANNED) or p[-1] not in ".?!":
        return False
    letters = sum(c.isalpha() or c == " " for c in p)
    return letters >= MIN_LETTER_SHARE * len(p)


def paragraphs(doc: str) -> list[str]:
    """Prose paragraphs of one cleaned docstring (indented blocks dropped whole)."""
    out = []
    for block in doc.split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines or any(ln[:1].isspace() for ln in lines):
            continue
        p = " ".join(ln.strip() for ln in lines)
        if is_prose(p):
            out.append(p)
    return out


def is_heldout(module: str) -> bool:
    """The split rule: first byte of sha256(module path) below HELDOUT_BYTE_BELOW."""
    return hashlib.sha256(module.encode()).digest()[0] < HELDOUT_BYTE_BELOW


def extract(stdlib: Path) -> dict[str, list[str]]:
    """{split: [document text per module]} for the stdlib at ``stdlib`` (sorted paths)."""
    seen: set[str] = set()
    docs: dict[str, list[str]] = {s: [] for s in SPLITS}
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if EXCLUDED_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        kept = []
        for doc in _docstrings(path.read_text(encoding="utf-8", errors="replace")):
            for p in paragraphs(doc):
                if p not in seen:
                    seen.add(p)
                    kept.append(p)
        if kept:
            docs["heldout" if is_heldout(rel.as_posix()) else "train"].append("\n".join(kept))
    return docs


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def freeze(out_dir: Path = CORPUS_DIR, stdlib: Path | None = None) -> dict:
    """Extract and write the corpus files and manifest; returns the manifest."""
    stdlib = Path(stdlib or sysconfig.get_paths()["stdlib"])
    docs = extract(stdlib)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for split in SPLITS:
        path = out_dir / f"{split}.txt"
        path.write_text("\n\n".join(docs[split]) + "\n", encoding="utf-8")
        files[split] = {
            "file": path.name,
            "documents": len(docs[split]),
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    manifest = {
        "source": "docstrings of CPython's standard library (*.py), parsed with ast",
        "python": sys.version.split()[0],
        "implementation": sys.implementation.name,
        "licence": "PSF-2.0 (Python Software Foundation License Version 2), see LICENSE-PSF.txt",
        "split_rule": f"held out when sha256(module path)[0] < {HELDOUT_BYTE_BELOW}",
        "files": files,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    licence = stdlib / "LICENSE.txt"
    if licence.exists():
        (out_dir / "LICENSE-PSF.txt").write_bytes(licence.read_bytes())
    return manifest


def manifest(corpus_dir: Path = CORPUS_DIR) -> dict:
    return json.loads((corpus_dir / "manifest.json").read_text())


def load(split: str = "train", corpus_dir: Path = CORPUS_DIR) -> str:
    """The frozen text of one split, checked against the manifest's sha256."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    entry = manifest(corpus_dir)["files"][split]
    data = (corpus_dir / entry["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise ValueError(f"{entry['file']}: sha256 {digest} does not match the manifest")
    return data.decode("utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m kda_core.model.corpus", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("command", choices=("freeze", "show"))
    ap.add_argument("--out", type=Path, default=CORPUS_DIR)
    args = ap.parse_args(argv)
    m = freeze(args.out) if args.command == "freeze" else manifest(args.out)
    print(json.dumps(m, indent=2))


if __name__ == "__main__":
    main()


def documents(text: str) -> list[str]:
    """The documents of a corpus file (one per module, separated by a blank line)."""
    return [d for d in text.split("\n\n") if len(d.encode()) >= 2]


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
