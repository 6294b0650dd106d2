"""The blog figures name their fonts: DejaVu Sans from matplotlib's own folder and WenQuanYi
Zen Hei for Chinese, whatever else the machine holds, so a Chinese figure drawn with a fresh
font cache (another machine's) is the same bytes as this one's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest
from matplotlib import font_manager
from matplotlib.font_manager import FontProperties

from plots import style

REPO = Path(__file__).resolve().parents[1]


def test_latin_is_matplotlibs_own_dejavu_sans() -> None:
    for weight in ("normal", "bold"):
        path = font_manager.findfont(FontProperties(family="DejaVu Sans", weight=weight))
        assert Path(path).parent == Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@pytest.mark.skipif(style.cjk_font() is None, reason="no CJK font installed")
def test_chinese_uses_the_named_font_first() -> None:
    assert style.CJK_FAMILIES[0] == "WenQuanYi Zen Hei"
    fams = style.rc_params(lang="zh")["font.family"]
    assert fams[0] == "DejaVu Sans" and fams[1] == style.cjk_font()
    if style.cjk_font() == style.CJK_FAMILIES[0]:
        path = font_manager.findfont(FontProperties(family=fams[1]), fallback_to_default=False)
        assert Path(path).name == "wqy-zenhei.ttc"


@pytest.mark.skipif(style.cjk_font() is None, reason="no CJK font installed")
def test_a_fresh_font_cache_draws_the_same_bytes(tmp_path: Path) -> None:
    """Another MPLCONFIGDIR: matplotlib scans the fonts again, as on a new machine."""
    args = ["--format", "png", "--dpi", "60", "--lang", "zh"]
    mod = "plots.plot_k3_memory_vs_context"
    for where in ("a", "b"):
        env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / f"mpl-{where}"))
        subprocess.run(
            [sys.executable, "-m", mod, "--out", str(tmp_path / where), *args],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
    (a,) = (tmp_path / "a").glob("*_zh.png")
    assert a.read_bytes() == (tmp_path / "b" / a.name).read_bytes()
