"""The blog figures: every plots/plot_*.py runs, writes non-trivial byte-identical files in a
fresh process too, leaves rcParams alone, and the runner reports progress and bad flags."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from xml.etree import ElementTree

import matplotlib
import pytest
from plot_helpers import DPI, MIN_BYTES, MODULES, REPO, quick

from plots import style
from plots.__main__ import SCRIPTS
from plots.__main__ import main as run_all

# ---------------------------------------------------------------------------------------------
# every script: files, determinism, Chinese labels


@pytest.mark.slow  # ~1-4 s per script (three renders); all nine take ~20 s on a busy machine
@pytest.mark.parametrize("name", SCRIPTS)
def test_script_writes_identical_nontrivial_files(name: str, tmp_path: Path) -> None:
    mod = MODULES[name]
    a, b = tmp_path / "a", tmp_path / "b"
    paths = mod.main(["--out", str(a), "--format", "both", "--dpi", str(DPI), "--quick"])
    assert sorted(p.name for p in paths) == [f"{mod.NAME}.png", f"{mod.NAME}.svg"]
    for p in paths:
        assert p.stat().st_size > MIN_BYTES[p.suffix[1:]], p
    assert (a / f"{mod.NAME}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (a / f"{mod.NAME}.svg").read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg  # no date, no version
    ElementTree.fromstring(svg)  # still well-formed after the clip ids are renumbered
    assert 'clip-path="url(#clip0)"' in svg
    # a second run from freshly computed data
    style.render(mod.NAME, mod.compute(quick=True), mod.make_figure, b, ("png", "svg"), DPI)
    for p in paths:
        assert (b / p.name).read_bytes() == p.read_bytes(), f"{p.name} differs between runs"
    if style.cjk_font():  # the Chinese version draws every glyph (no tofu warnings)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "Glyph ... missing from font(s)"
            (zh,) = style.render(mod.NAME, quick(name), mod.make_figure, b, ("png",), DPI, ("zh",))
        assert zh.name == f"{mod.NAME}_zh.png" and zh.stat().st_size > MIN_BYTES["png"]


def test_identical_bytes_in_a_fresh_process(tmp_path: Path) -> None:
    """Another interpreter (another hash seed) writes the same bytes as this one."""
    mod = MODULES["plot_k3_memory_vs_context"]
    here = mod.main(["--out", str(tmp_path / "here"), "--format", "both", "--dpi", str(DPI)])
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run(
        [sys.executable, "-m", "plots.plot_k3_memory_vs_context", "--out", str(tmp_path / "there"),
         "--format", "both", "--dpi", str(DPI)],
        cwd=REPO, env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    for p in here:
        assert (tmp_path / "there" / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_word_from_the_one_catalog(name: str) -> None:
    """A figure's words are in ``words/`` (the catalog its app page uses too): the script
    holds no Chinese and no translation table of its own, and imports its catalog."""
    src = (REPO / "plots" / f"{name}.py").read_text()
    assert not re.search(r"[\u3400-\u9fff]", src), "Chinese text in the script"
    assert "TEXT = {" not in src and "style.translations" not in src
    assert re.search(r"^from words\.\w+ import MSG$", src, re.M), "no words catalog imported"


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_import_only_studies_from_the_core(name: str) -> None:
    """plots/ draws; kda_core.studies computes. The only other core imports allowed: the
    palette and the bundled trace loader (an input to a study)."""
    tree = ast.parse((REPO / "plots" / f"{name}.py").read_text())
    allowed = ("kda_core.studies", "kda_core.palette", "kda_core.workloads")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kda_core"):
            assert node.module.startswith(allowed), node.module
        if isinstance(node, ast.Import):
            for a in node.names:
                assert not a.name.startswith("kda_core") or a.name.startswith(allowed), a.name


# ---------------------------------------------------------------------------------------------
# the data drawn is the study's


def test_format_bytes() -> None:
    assert style.format_bytes(1 << 30) == "1 GiB"
    assert style.format_bytes(29_039_616) == "27.7 MiB"
    assert style.format_bytes(512) == "512 B"


def test_rendering_leaves_global_rcparams_alone(tmp_path: Path) -> None:
    before = dict(matplotlib.rcParams)
    mod = MODULES["plot_speculative_memory"]
    style.render(mod.NAME, quick("plot_speculative_memory"), mod.make_figure, tmp_path,
                 ("svg",), DPI, ("en",))  # fmt: skip
    assert dict(matplotlib.rcParams) == before


def test_zh_without_a_cjk_font_degrades_to_english(monkeypatch, capsys, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setattr(style, "cjk_font", lambda: None)
    assert style.resolve_lang("zh") == "en"
    assert "apt-get install fonts-wqy-zenhei" in capsys.readouterr().err
    paths = MODULES["plot_speculative_memory"].main(
        ["--out", str(tmp_path), "--lang", "zh", "--dpi", str(DPI)]
    )
    assert [p.name for p in paths] == ["speculative_memory.png"]
    with pytest.raises(ValueError, match="lang"):
        style.resolve_lang("fr")


def test_runner_renders_a_selection_with_progress(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    argv = ["--out", str(tmp_path), "--dpi", str(DPI), "--quick", "--lang", "en"]
    assert run_all([*argv, "--only", "k3_memory_vs_context", "speculative_memory"]) == 0
    out = capsys.readouterr().out
    # Contract: ``[i/n]`` counts completed figures, so the counters run 1..n in print order while
    # the names come in whatever order the parallel jobs finish (never assert that order).
    progress = [line.split() for line in out.splitlines() if line.startswith("[")]
    assert [row[0] for row in progress] == ["[1/2]", "[2/2]"]
    assert sorted(row[1] for row in progress) == ["k3_memory_vs_context", "speculative_memory"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "k3_memory_vs_context.png",
        "speculative_memory.png",
    ]
    assert run_all([*argv, "--only", "nope"]) == 2
    assert run_all(["--list"]) == 0
    assert capsys.readouterr().out.split() == [s.removeprefix("plot_") for s in SCRIPTS]


def test_bad_flags_exit_with_a_usage_error(capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit) as e:
        MODULES["plot_k3_memory_vs_context"].main(["--dpi", "5"])
    assert e.value.code == 2 and "--dpi must be in [30, 600]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_all(["--jobs", "0"])


# ---------------------------------------------------------------------------------------------
# checkpoint_density, k3_memory_vs_context, unified_memory (footers, one analytic curve, markers)


def test_default_output_folder_is_ignored_by_git() -> None:
    """``make figures`` must not rewrite committed files: its default folder is git-ignored
    (the committed README figures are rewritten only by ``make readme-figures``)."""
    import shutil

    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    probe = style.DEFAULT_OUT / "k3_memory_vs_context.png"
    assert not probe.resolve().is_relative_to((REPO / "assets").resolve())
    r = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=REPO, check=False)
    assert r.returncode == 0, f"{probe} is not ignored by git"
