"""The frozen corpus: hashes, licences, the split rule, the docstring cleaning."""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import pytest

from kda_core.model import corpus as C


def test_frozen_files_match_the_manifest():
    m = C.manifest()
    assert m["sources"]["python"]["version"].startswith("3.")
    for split in C._SPLITS:
        entry = m["files"][split]
        data = (C._CORPUS_DIR / entry["file"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert C.load(split).isascii()
        assert len(C.documents(C.load(split))) == entry["documents"]
    assert m["files"]["train"]["bytes"] > 5 * m["files"]["heldout"]["bytes"] > 2_000_000
    assert m["files"]["out_of_style"]["bytes"] > 100_000


def test_every_source_is_psf_bsd_or_mit_with_its_notice_shipped():
    sources = C.manifest()["sources"]
    assert set(sources) == {"python", *C._TRAIN_PACKAGES, *C._OUT_OF_STYLE_PACKAGES}
    for name, src in sources.items():
        assert src["licence"].startswith(("PSF", "BSD", "MIT", "Matplotlib")), name
        for f in src["licence_files"]:
            text = (C._CORPUS_DIR / f).read_text(errors="replace")
            assert "copyright" in text.lower() or "license" in text.lower(), f
    assert (
        "PYTHON SOFTWARE FOUNDATION" in (C._CORPUS_DIR / "licences/python-LICENSE.txt").read_text()
    )


def test_a_changed_file_is_refused(tmp_path: Path):
    for name in ("manifest.json", "train.txt", "heldout.txt"):
        (tmp_path / name).write_bytes((C._CORPUS_DIR / name).read_bytes())
    (tmp_path / "train.txt").write_text("tampered")
    with pytest.raises(ValueError, match="sha256"):
        C.load("train", tmp_path)
    with pytest.raises(ValueError, match="split"):
        C.load("test")


@pytest.fixture(scope="module")
def train_docstrings() -> set[str]:
    return {d for doc in C.documents(C.load("train")) for d in doc.split("\n\n")}


@pytest.mark.parametrize("split", ["heldout", "out_of_style"])
def test_evaluation_text_never_appears_in_training(split, train_docstrings):
    """Docstrings are kept once over all splits: no held-out or out-of-style docstring (a
    blank-line-separated block of at least 80 characters) is in the training text."""
    held = C.documents(C.load(split))
    assert len(held) >= 40
    train = C.load("train")
    blocks = [b for doc in held for b in doc.split("\n\n") if len(b) >= 80][:400]
    assert len(blocks) >= 100
    assert sum(b in train for b in blocks) <= len(blocks) // 50  # a stock phrase may recur


def test_training_text_has_the_styles_of_api_references():
    """Not only prose: parameter sections, doctest examples and reST markup are kept."""
    train = C.load("train")
    for marker in ("Parameters\n----------\n", "\n>>> ", ":param ", "Args:\n", ".. versionadded::"):
        assert train.count(marker) >= 20, marker


def test_split_rule_is_the_documented_hash():
    assert C._is_heldout("asynchat.py") == (hashlib.sha256(b"asynchat.py").digest()[0] < 26)
    names = [f"m{i}.py" for i in range(2000)]
    share = sum(map(C._is_heldout, names)) / len(names)
    assert 0.07 < share < 0.14  # 26 / 256 = 10.2 %


@pytest.mark.parametrize(
    ("doc", "kept"),
    [
        (
            "Return the number of items.\n\n\n\n    >>> len(q)\n    3\t\n",
            "Return the number of items.\n\n>>> len(q)\n3",
        ),
        ("Too short.", None),
        ("Unicode is left out of the corpus: caf\u00e9, na\u00efve, and so on and so on.", None),
        ("A control character \x07 makes the docstring unusable for the corpus text.", None),
    ],
)
def test_docstring_cleaning(doc, kept):
    assert C._clean(doc) == kept


def test_documents_never_hold_the_separator():
    for split in C._SPLITS:
        for doc in C.documents(C.load(split))[:200]:
            assert C._DOC_SEPARATOR not in doc and doc == doc.strip("\n")


@pytest.mark.skipif(
    not (Path(sysconfig.get_paths()["stdlib"]) / "json").is_dir(), reason="no stdlib sources"
)
def test_extraction_is_deterministic_on_one_package():
    """Re-extracting gives the same text (the full freeze ran once; its versions are recorded)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    a, b = C._extract(lib / "json", packages=()), C._extract(lib / "json", packages=())
    assert a == b and sum(len(d) for d in a["train"] + a["heldout"]) > 2000
    assert "\n>>> " in "".join(a["train"] + a["heldout"])  # the doctest examples are kept


def test_out_of_style_text_splits_by_package_in_freeze_order():
    parts = C._out_of_style_by_package()
    assert list(parts) == list(C._OUT_OF_STYLE_PACKAGES)
    assert C._DOC_SEPARATOR.join(parts.values()) + "\n" == C.load("out_of_style")
    assert all(C._OUT_OF_STYLE_BYTES <= len(t) < 2 * C._OUT_OF_STYLE_BYTES for t in parts.values())
    assert "Parameters\n----------" in parts["networkx"] and ":param " in parts["jinja2"]


# the likelihood-trained base's greedy continuations of SAMPLE_PROMPTS (the shipped record keeps
# them under "base", checked in test_weights.py): loops
_LOOPING = {
    " the string of the string is\nthe string is the string of the str": (0, 14),
    " the string is a string of the string is the string in the strin": (0, 26),
    " a string of the string is the string is the string is\nthe strin": (12, 26),
}


@pytest.mark.parametrize(("text", "want"), list(_LOOPING.items()))
def test_first_repeat_finds_the_loops_greedy_decoding_fell_into(text, want):
    first, second = C.first_repeat(text.encode())
    assert (first, second) == want
    assert text[first : first + 12] == text[second : second + 12]
    assert " the string " in text[first : second + 12]


@pytest.mark.parametrize(
    ("text", "n", "want"),
    [
        ("Return the number of bytes in the buffer, or -1 once it is closed.", 12, None),
        ("hello world, hello worlds", 12, None),  # 11 bytes come back, not 12
        ("hello world, hello worlds", 11, (0, 13)),
        ("ab" * 10, 12, (0, 2)),  # a period shorter than n: the occurrences overlap
        ("=" * 13, 12, (0, 1)),
        ("=" * 12, 12, None),
        ("abcXabcYabc", 3, (0, 4)),  # the earliest second occurrence wins
        ("", 12, None),
    ],
)
def test_first_repeat_on_hand_made_strings(text, n, want):
    assert C.first_repeat(text.encode(), n) == want


def test_first_repeat_equals_the_pairwise_search(rng):
    def naive(data: bytes, n: int) -> tuple[int, int] | None:
        for j in range(len(data) - n + 1):
            for i in range(j):
                if data[i : i + n] == data[j : j + n]:
                    return i, j
        return None

    for _ in range(200):
        data = bytes(rng.integers(97, 100, int(rng.integers(0, 40))).tolist())
        n = int(rng.integers(1, 8))
        assert C.first_repeat(data, n) == naive(data, n)
    with pytest.raises(ValueError, match=r"n must be in \[1, 4096\]"):
        C.first_repeat(b"abc", 0)
