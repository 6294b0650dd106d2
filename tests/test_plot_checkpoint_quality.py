"""plots/plot_checkpoint_quality.py draws exactly the quality study's numbers, in en and zh.

(The generic checks of tests/test_plots.py, deterministic bytes and translated keys, cover
this script too through plots.__main__.SCRIPTS.)"""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

from plots import plot_checkpoint_quality as P
from plots import style

DPI = 40


@pytest.fixture(scope="module")
def data():
    return P.compute(quick=True)


def _fig(data, lang="en"):
    with style.rc(DPI, lang):
        return P.make_figure(data, lang=lang)


def test_lines_are_the_deltas_and_bars_the_bits_per_byte(data):
    fig = _fig(data)
    for i in range(len(data.labels)):
        (ln,) = fig.findobj(lambda a, i=i: a.get_gid() == f"delta_{i}")
        np.testing.assert_array_equal(ln.get_ydata(), data.delta[i])
        assert matplotlib.colors.to_hex(ln.get_color()) == style.SERIES[i].lower()
    bars = [r.get_width() for r in fig.findobj(lambda a: a.get_gid() == "bpb")]
    want = [data.delta[0, -1], *(data.inconsistent_bpb - data.exact_bpb)]
    np.testing.assert_allclose(bars, want, rtol=0, atol=0)


def test_footer_and_chinese_labels(data):
    for lang, start in (("en", "Data: "), ("zh", "数据：")):
        fig = _fig(data, lang)
        (foot,) = [t for t in fig.texts if t.get_position()[1] < 0.02]
        assert foot.get_text().startswith(start) and "kda_core" not in foot.get_text()
    if not style.cjk_font():
        return  # zh degrades to English without a CJK font (style.resolve_lang)
    zh = _fig(data, "zh")
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh.axes[0].get_title())


def test_writes_deterministic_png(tmp_path, data):
    a = style.render(P.NAME, data, P.make_figure, tmp_path / "a", ("png",), DPI, ("en", "zh"))
    b = style.render(P.NAME, data, P.make_figure, tmp_path / "b", ("png",), DPI, ("en", "zh"))
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert len(a) == (2 if style.cjk_font() else 1)
