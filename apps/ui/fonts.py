"""The one font every page and figure uses, served by the lab itself, and text widths in it.

Figures used to name system fonts (Liberation Sans first): on a machine whose only sans-serif
font is DejaVu Sans, wider, long titles ran outside their canvas. Now every page loads
**KDA Sans** = DejaVu Sans from matplotlib's own font folder (a runtime dependency, so the file
is there wherever the lab is installed), served by Gradio from that folder (no CDN, no font in
the repository). DejaVu Sans is also among the widest common sans-serif fonts, so a layout
sized for it fits a browser that falls back to Liberation Sans, Arial or Helvetica. Chinese
falls back to a system CJK font; those draw every Han character one em wide, which is how
``text_width`` counts any character DejaVu Sans lacks.

``text_width`` reads the advance widths from the same file (fontTools, a matplotlib
dependency); kerning is left out (DejaVu's pairs only narrow a line), and ``wrap`` breaks at
spaces, or between Han characters, so a title never needs more than the width it is given.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

import matplotlib

FAMILY = "KDA Sans"
FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
FILES = {400: FONT_DIR / "DejaVuSans.ttf", 700: FONT_DIR / "DejaVuSans-Bold.ttf"}
CJK_FAMILIES = ("WenQuanYi Zen Hei", "Noto Sans CJK SC", "Source Han Sans SC", "Microsoft YaHei")
STACK = (FAMILY, "DejaVu Sans", *CJK_FAMILIES, "sans-serif")
"""What the theme and every figure name, in order."""

_TAG = re.compile(r"<[^>]*>")
_HAN = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")


def font_face_css(url_prefix: str = "gradio_api/file=") -> str:
    """``@font-face`` rules for KDA Sans: relative URLs, so a page mounted at ``/<app>/`` asks
    its own mount for the file."""
    return "".join(
        f"@font-face {{ font-family: '{FAMILY}'; font-weight: {w}; font-style: normal; "
        f"font-display: block; src: url('{url_prefix}{p}') format('truetype'); }}\n"
        for w, p in FILES.items()
    )


def preload_head(url_prefix: str = "gradio_api/file=") -> str:
    """``<link rel=preload>`` tags so the font is there before the first figure is measured."""
    return "".join(
        f'<link rel="preload" href="{url_prefix}{p}" as="font" type="font/ttf" crossorigin>'
        for p in FILES.values()
    )


@functools.lru_cache(maxsize=2)
def _advances(weight: int = 400) -> tuple[dict[int, int], int]:
    from fontTools.ttLib import TTFont

    font = TTFont(str(FILES[weight]), lazy=True)
    hmtx = font["hmtx"]
    widths = {code: hmtx[glyph][0] for code, glyph in font.getBestCmap().items()}
    return widths, int(font["head"].unitsPerEm)


def plain(text: str) -> str:
    """What a plotly text shows: tags dropped, entities decoded."""
    return html.unescape(_TAG.sub("", text))


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """Width in px of one line of ``text`` at ``size`` px in KDA Sans (a character the font
    lacks, such as a Han character, counts one em: the CJK fallback's width)."""
    widths, upm = _advances(700 if bold else 400)
    return sum(widths.get(ord(c), upm) for c in plain(text)) * size / upm


def _pieces(line: str) -> list[str]:
    """Break opportunities: after a space, and on both sides of a Han character."""
    out: list[str] = []
    for word in re.split(r"(?<= )", line):
        out.extend(p for p in re.split(f"({_HAN.pattern})", word) if p)
    return out


def wrap(text: str, size: float, width: float) -> list[str]:
    """``text`` (``<br>`` already marks forced breaks) as lines no wider than ``width`` px; a
    single word longer than that stays whole on its own line."""
    lines: list[str] = []
    for forced in re.split(r"<br\s*/?>", text):
        cur = ""
        for piece in _pieces(forced):
            if cur and text_width((cur + piece).rstrip(), size) > width:
                lines.append(cur.rstrip())
                cur = piece.lstrip()
            else:
                cur += piece
        lines.append(cur.rstrip())
    return lines
