"""The frozen corpus: hashes, the split rule, the paragraph filter."""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import pytest

from kda_core.model import corpus as C


def test_frozen_files_match_the_manifest():
    m = C.manifest()
    assert m["python"].startswith("3.") and "PSF" in m["licence"]
    assert (C.CORPUS_DIR / "LICENSE-PSF.txt").read_text().count("PYTHON SOFTWARE FOUNDATION") >= 1
    for split in C.SPLITS:
        entry = m["files"][split]
        data = (C.CORPUS_DIR / entry["file"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert C.load(split).isascii()
    assert m["files"]["train"]["bytes"] > 10 * m["files"]["heldout"]["bytes"] > 200_000


def test_a_changed_file_is_refused(tmp_path: Path):
    for name in ("manifest.json", "train.txt", "heldout.txt"):
        (tmp_path / name).write_bytes((C.CORPUS_DIR / name).read_bytes())
    (tmp_path / "train.txt").write_text("tampered")
    with pytest.raises(ValueError, match="sha256"):
        C.load("train", tmp_path)
    with pytest.raises(ValueError, match="split"):
        C.load("test")


def test_heldout_documents_never_appear_in_training():
    train = C.load("train")
    held = C.documents(C.load("heldout"))
    assert len(held) >= 20
    for doc in held:
        for par in doc.split("\n")[:3]:
            assert par not in train


def test_split_rule_is_the_documented_hash():
    assert C.is_heldout("asynchat.py") == (hashlib.sha256(b"asynchat.py").digest()[0] < 26)
    names = [f"m{i}.py" for i in range(2000)]
    share = sum(map(C.is_heldout, names)) / len(names)
    assert 0.07 < share < 0.14  # 26 / 256 = 10.2 %


@pytest.mark.parametrize(
    ("para", "keep"),
    [
        ("Return the number of items in the queue, which is only approximately right.", True),
        (">>> x = 1  # a doctest prompt is code, not prose, even when it is long enough", False),
        ("Too short.", False),
        (
            "This paragraph is long enough but has no final punctuation at all so it is dropped",
            False,
        ),
        ("x = f(a, b) + g[c] * {d: e} - (h / i) ** j % k | l & m ^ n << o >> p; q += r.", False),
    ],
)
def test_paragraph_filter(para, keep):
    assert C.is_prose(para) is keep


def test_indented_blocks_are_dropped_whole():
    doc = "Summary line that is long enough to be kept as one prose paragraph.\n\n    code()\n"
    assert C.paragraphs(doc) == [doc.split("\n")[0]]


@pytest.mark.skipif(
    not (Path(sysconfig.get_paths()["stdlib"]) / "json").is_dir(), reason="no stdlib sources"
)
def test_extraction_is_deterministic_on_one_package(tmp_path: Path):
    """Re-extracting gives the same text (the full freeze ran once; its Python is recorded)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    a, b = C.extract(lib / "json"), C.extract(lib / "json")
    assert a == b and sum(len(d) for d in a["train"] + a["heldout"]) > 500
