"""The served font and the title fitting (apps/ui/fonts.py, apps/ui/figures.py): widths read
from the font file agree with matplotlib's own layout of the same file, wrapped titles stay
inside their width, and the top margin follows the number of title lines."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from apps import ui
from apps.ui import fonts
from apps.ui.figures import LABEL_ROOM, TITLE_LINE, TITLE_PAD, TITLE_SIZE, TITLE_WIDTH

LONG = (
    "Decoding 16 tokens after the restore (int8 / key channel); same greedy token: "
    "park once 16/16, every step 16/16"
)


@pytest.mark.parametrize("text", ["Hello", "iiii", "WWWW", LONG, "max |logit − exact logit|"])
def test_width_matches_matplotlib_layout_of_the_same_file(text: str) -> None:
    """A second reader of the same font: matplotlib's text layout (which applies kerning, so
    it may come out narrower by a few px per line, never wider)."""
    prop = FontProperties(fname=str(fonts.FILES[400]), size=15)
    w_mpl, _, _ = TextToPath().get_text_width_height_descent(text, prop, ismath=False)
    w = fonts.text_width(text, 15 * 72 / 72)
    # matplotlib counts sizes in points at 72 dpi: 15 pt = 15 px here
    assert w_mpl - 0.5 <= w <= w_mpl + 0.02 * w_mpl + 1.0


def test_han_characters_count_one_em() -> None:
    assert fonts.text_width("中文标题", 15) == pytest.approx(60.0)
    assert fonts.text_width("<b>a</b>&amp;", 10) == pytest.approx(fonts.text_width("a&", 10))


def test_wrap_keeps_every_line_inside_and_every_word() -> None:
    for width in (120, 300, 760):
        lines = fonts.wrap(LONG, TITLE_SIZE, width)
        assert " ".join(lines) == LONG
        assert all(fonts.text_width(line, TITLE_SIZE) <= width for line in lines)
    assert fonts.wrap("short", TITLE_SIZE, 760) == ["short"]
    assert fonts.wrap("a<br>b", TITLE_SIZE, 760) == ["a", "b"]
    # a word longer than the width stays whole
    assert fonts.wrap("x" * 200, TITLE_SIZE, 50) == ["x" * 200]


def test_wrap_breaks_between_han_characters() -> None:
    zh = "解码恢复后的十六个词元：停放时量化一次与每步都量化的贪心输出相同" * 2
    lines = fonts.wrap(zh, TITLE_SIZE, 300)
    assert "".join(lines) == zh and len(lines) == 4  # 64 characters of 15 px, 20 a line
    assert all(fonts.text_width(line, TITLE_SIZE) <= 300 for line in lines)


def test_style_wraps_a_long_title_and_makes_room_for_it() -> None:
    one = ui.style(go.Figure(), "short", "", "")
    two = ui.style(go.Figure(), LONG, "", "")
    assert one.layout.title.text == "short"
    assert two.layout.title.text.count("<br>") == 1
    assert two.layout.title.text.replace("<br>", " ") == LONG
    assert two.layout.margin.t - one.layout.margin.t == TITLE_LINE
    assert one.layout.margin.t == TITLE_PAD + TITLE_LINE + 8
    first, second = two.layout.title.text.split("<br>")
    assert fonts.text_width(first, TITLE_SIZE) <= TITLE_WIDTH
    assert fonts.text_width(first + " " + second.split()[0], TITLE_SIZE) > TITLE_WIDTH


def test_labels_on_the_plot_top_get_room_under_the_title() -> None:
    fig = ui.style(go.Figure(), LONG, "", "")
    bare = fig.layout.margin.t
    ui.vline(fig, 1.0, "this commit")
    assert fig.layout.margin.t == TITLE_PAD + 2 * TITLE_LINE + LABEL_ROOM > bare
    ui.top_margin(fig, 56)
    assert fig.layout.margin.t == TITLE_PAD + 2 * TITLE_LINE + 56
