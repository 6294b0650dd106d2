"""The look every blog figure shares, deterministic saving, and the command line of each script.

* Sizes: a blog column is 7 in wide (700 px at 100 dpi; the default 200 dpi gives 1400 px, sharp
  on high-density screens). Fonts are named, never "whatever is installed": DejaVu Sans from
  matplotlib's own font folder at 10.5 pt, readable at column width, and WenQuanYi Zen Hei
  (``fonts-wqy-zenhei``, which ``make test`` installs) as the per-glyph fallback for Chinese
  labels (``--lang zh``) and Chinese text inside the data.
* Colours: ``kda_core.palette`` (the apps use the same hex strings): ``COLORS`` for concepts
  (kv, state, conv, replay, prefill, decode, hit, free, checkpoint), ``SERIES`` for comparisons.
* Determinism: a fixed ``svg.hashsalt``, glyphs stored as paths in SVG, no date / creator /
  software metadata in SVG or PNG. Two runs give identical bytes, on one machine or on two
  with the same matplotlib release (its wheels carry their own FreeType) and the named fonts;
  a figure of measured data (timings, rounding errors) differs where the data do.
* CLI: every ``plots/plot_<topic>.py`` calls ``main(argv)`` = ``parser()`` + ``render()``:
  ``--out DIR`` (default build/figures/, ignored by git), ``--format png|svg|both``, ``--dpi``,
  ``--lang en|zh`` and ``--quick`` (small study parameters, for tests).

A script module exposes ``NAME``, ``compute(quick=False)`` (calls ``kda_core.studies`` only),
``make_figure(data, lang="en") -> Figure`` (draws only what ``data`` holds, in the words of
its catalog: ``words.<concept>.MSG.lang(lang)``, the same catalog its app page uses) and
``main``.
Left out: PDF output (its bytes embed a creation date unless SOURCE_DATE_EPOCH is set).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from cycler import cycler
from matplotlib import font_manager, ticker
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from kda_core.palette import COLORS, SERIES

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "build" / "figures"
"""Where figures go unless ``--out`` says otherwise: an ignored folder, so regenerating never
dirties the work tree. A figure is byte-identical across runs, and across machines with the
same matplotlib release and the named fonts (module docstring)."""
DEFAULT_DPI = 200
FORMATS: dict[str, tuple[str, ...]] = {"png": ("png",), "svg": ("svg",), "both": ("png", "svg")}
LANGS: tuple[str, ...] = ("en", "zh")
HASHSALT = "kda-state-lab"

COLUMN_WIDTH = 7.0  # inches
SIZES: dict[str, tuple[float, float]] = {
    "single": (COLUMN_WIDTH, 4.2),
    "double": (COLUMN_WIDTH, 3.6),  # two panels side by side
    "grid": (COLUMN_WIDTH, 6.2),  # 2 x 2 panels
    "tall": (COLUMN_WIDTH, 7.4),  # three rows
}
SOURCE_COLOR = "#6b6b6b"
GRID_COLOR = "#e6e6e6"

# CJK fallback: the font is named, not "whatever is installed": WenQuanYi Zen Hei (Debian's
# fonts-wqy-zenhei, which `make test` installs) comes first, so two machines that both have it
# draw the same glyphs even when one also has Noto CJK. The others are used, in this order, only
# where it is missing (the figure then differs from the committed one, and a note says why).
CJK_FAMILIES: tuple[str, ...] = (
    "WenQuanYi Zen Hei",
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
)
CJK_FILES: tuple[str, ...] = (  # checked when matplotlib's font cache predates the install
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
)
CJK_APT_PACKAGE = "fonts-wqy-zenhei"


# ---------------------------------------------------------------------------------------------
# fonts and rcParams


class _WeightNoise(logging.Filter):
    """Drop matplotlib's "findfont: Failed to find font weight ..." notes: CJK fonts ship one
    medium weight, which matplotlib then uses for every weight (what we want)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("findfont: Failed to find font weight")


logging.getLogger("matplotlib.font_manager").addFilter(_WeightNoise())


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The named CJK family (``CJK_FAMILIES[0]``) when installed, else the first other one
    installed, else None. Known font files are registered first, so a font installed after
    matplotlib built its cache still counts, and the named one wins over a cached other."""
    names = {f.name for f in font_manager.fontManager.ttflist}
    if CJK_FAMILIES[0] not in names:
        for path in CJK_FILES:
            if os.path.exists(path):
                with contextlib.suppress(OSError, RuntimeError, ValueError):
                    font_manager.fontManager.addfont(path)
        names = {f.name for f in font_manager.fontManager.ttflist}
    return next((fam for fam in CJK_FAMILIES if fam in names), None)


def resolve_lang(lang: str) -> str:
    """``lang`` if it can be drawn; "zh" without a CJK font degrades to "en" with a message."""
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {list(LANGS)}, got {lang!r}")
    if lang == "zh" and cjk_font() is None:
        print(
            "plots: --lang zh needs a CJK font and none is installed "
            f"(looked for {', '.join(CJK_FAMILIES[:5])}, ...). Install one, e.g. "
            f"`apt-get install {CJK_APT_PACKAGE}` (or fonts-noto-cjk), then delete "
            "~/.cache/matplotlib. Drawing English labels instead.",
            file=sys.stderr,
        )
        return "en"
    if lang == "zh" and cjk_font() != CJK_FAMILIES[0]:
        print(
            f"plots: {CJK_FAMILIES[0]} is not installed; drawing Chinese with {cjk_font()}, so "
            f"these figures differ from the committed ones (apt-get install {CJK_APT_PACKAGE}).",
            file=sys.stderr,
        )
    return lang


def rc_params(dpi: int = DEFAULT_DPI, lang: str = "en") -> dict[str, Any]:
    """The shared rcParams (fonts, sizes, grid, palette cycle, determinism). Chinese titles use
    the regular weight: CJK fonts ship one weight, so bold Latin next to them looks patchy."""
    cjk = cjk_font()
    weight = "normal" if lang == "zh" else "bold"
    return {
        "font.family": ["DejaVu Sans"] + ([cjk] if cjk else []),
        "font.size": 10.5,
        "axes.titlesize": 11,
        "axes.titleweight": weight,
        "axes.titlelocation": "left",
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 8.5,
        "legend.frameon": False,
        "figure.titlesize": 12.5,
        "figure.titleweight": weight,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.edgecolor": "#444444",
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": GRID_COLOR,
        "grid.linewidth": 0.8,
        "axes.prop_cycle": cycler(color=list(SERIES)),
        "lines.linewidth": 2.0,
        "lines.markersize": 5,
        "image.cmap": "viridis",
        "figure.dpi": 100,
        "savefig.dpi": dpi,
        "savefig.facecolor": "white",
        "svg.hashsalt": HASHSALT,
        "svg.fonttype": "path",
        "axes.unicode_minus": False,  # the ASCII hyphen exists in every fallback font
    }


@contextlib.contextmanager
def rc(dpi: int = DEFAULT_DPI, lang: str = "en") -> Iterator[None]:
    """Temporarily apply ``rc_params`` (never leaks into the caller's matplotlib state)."""
    with matplotlib.rc_context(rc_params(dpi, lang)):
        yield


# ---------------------------------------------------------------------------------------------
# figure helpers (presentation only: no study arithmetic)


def new_figure(size: str | tuple[float, float] = "single", source: str | None = None) -> Figure:
    """A pyplot-free Figure with constrained layout; ``source`` is printed small at the bottom:
    where the data comes from, in the reader's words and language (no function names)."""
    figsize = SIZES[size] if isinstance(size, str) else size
    bottom = 0.035 if source else 0.0
    fig = Figure(
        figsize=figsize,
        layout=ConstrainedLayoutEngine(h_pad=0.06, w_pad=0.06, rect=(0, bottom, 1, 1 - bottom)),
    )
    if source:
        fig.text(0.008, 0.006, source, fontsize=7, color=SOURCE_COLOR, ha="left", va="bottom")
    return fig


_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def _unit(x: float) -> tuple[int, str]:
    for u, name in _UNITS:
        if abs(x) >= u:
            return u, name
    return 1, "B"


def format_bytes(x: float, digits: int = 3) -> str:
    """1073741824 -> '1 GiB', 29039616 -> '27.7 MiB' (binary units)."""
    u, name = _unit(x)
    return f"{x / u:.{digits}g} {name}"


class ByteLocator(ticker.Locator):
    """Linear-axis ticks at round numbers of the unit (KiB/MiB/GiB) that fits the view."""

    def __init__(self, nbins: int = 6) -> None:
        self._inner = ticker.MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10])

    def __call__(self) -> Sequence[float]:
        lo, hi = self.axis.get_view_interval()
        return self.tick_values(lo, hi)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        u, _ = _unit(max(abs(vmin), abs(vmax)))
        return np.asarray(self._inner.tick_values(vmin / u, vmax / u)) * u


def bytes_axis(axis: Any, log: bool = False, subs: Sequence[float] = (1.0, 32.0)) -> None:
    """Label a bytes axis in binary units; log axes tick at ``subs`` x 1024^k."""
    axis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: format_bytes(x)))
    if log:
        axis.set_major_locator(ticker.LogLocator(base=1024.0, subs=tuple(subs)))
        axis.set_minor_locator(ticker.NullLocator())
    else:
        axis.set_major_locator(ByteLocator())


def count_axis(axis: Any) -> None:
    """Thousands separators on a count axis (1,000,000)."""
    axis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: f"{x:,.0f}"))


def annotate_end(ax: Any, x: float, y: float, text: str, color: str, dy: float = 0) -> None:
    """A small coloured label just right of a line's last point."""
    ax.annotate(
        text,
        (x, y),
        xytext=(4, dy),
        textcoords="offset points",
        color=color,
        fontsize=8.5,
        va="center",
        ha="left",
    )


# ---------------------------------------------------------------------------------------------
# saving and the command line


def file_name(name: str, lang: str, fmt: str) -> str:
    return f"{name}.{fmt}" if lang == "en" else f"{name}_{lang}.{fmt}"


def save(
    fig: Figure, out: Path, name: str, lang: str, formats: Sequence[str], dpi: int
) -> list[Path]:
    """Write ``fig`` once per format with no time-dependent metadata; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    # Solve the constrained layout once and freeze it. Otherwise every savefig re-solves it from
    # the previous draw's positions at its own dpi: an SVG saved after a PNG moved by ~0.1 pt,
    # and `--format png` and `--format both` wrote different PNGs. Costs one extra draw.
    fig.set_dpi(dpi)  # solved at the resolution it is written at: hinted text grows with dpi
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    paths = []
    for fmt in formats:
        path = out / file_name(name, lang, fmt)
        if fmt == "svg":
            buf = io.BytesIO()
            fig.savefig(buf, format="svg", dpi=dpi, metadata={"Date": None, "Creator": None})
            path.write_bytes(_renumber_clip_ids(buf.getvalue()))
        else:
            fig.savefig(path, format=fmt, dpi=dpi, metadata={"Software": None})
        paths.append(path)
    return paths


_CLIP_ID = re.compile(rb'<clipPath id="(p[0-9a-f]{10})"')


def _renumber_clip_ids(svg: bytes) -> bytes:
    """Name clip paths clip0, clip1, ... in document order. matplotlib hashes a clip rectangle's
    full-precision floats into its id, and those last digits depend on what the process drew
    before (the same figure saved after another one got other ids); the coordinates written in
    the file (6 decimals) were identical."""
    ids = {old: f"clip{i}".encode() for i, old in enumerate(dict.fromkeys(_CLIP_ID.findall(svg)))}
    if not ids:
        return svg
    pattern = re.compile(rb'(?<=id=")(p[0-9a-f]{10})(?=")|(?<=url\(#)(p[0-9a-f]{10})(?=\))')
    return pattern.sub(lambda m: ids.get(m.group(0), m.group(0)), svg)


def render(
    name: str,
    data: Any,
    make_figure: Callable[..., Figure],
    out: Path | str = DEFAULT_OUT,
    formats: Sequence[str] = ("png",),
    dpi: int = DEFAULT_DPI,
    langs: Sequence[str] = ("en",),
) -> list[Path]:
    """Draw ``data`` once per language under the shared style and save every format."""
    paths: list[Path] = []
    for lang in dict.fromkeys(resolve_lang(x) for x in langs):
        with rc(dpi, lang):
            fig = make_figure(data, lang=lang)
            paths += save(fig, Path(out), name, lang, formats, dpi)
    return paths


def parser(description: str | None) -> argparse.ArgumentParser:
    """The flags every plot script takes."""
    p = argparse.ArgumentParser(
        description=(description or "").strip().splitlines()[0] if description else None
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    p.add_argument("--format", choices=tuple(FORMATS), default="png")
    p.add_argument("--dpi", type=int, default=DEFAULT_DPI, help="raster resolution (PNG)")
    p.add_argument("--lang", choices=LANGS, default="en", help="label language")
    p.add_argument("--quick", action="store_true", help="small study parameters (tests)")
    return p


def main_for(module: Any, argv: Sequence[str] | None = None) -> list[Path]:
    """The body of every script's ``main``: parse flags, compute the study, render, report."""
    p = parser(module.__doc__)
    args = p.parse_args(argv)
    dpi = args.dpi
    if not 30 <= dpi <= 600:
        p.error(f"--dpi must be in [30, 600], got {dpi}")
    data = module.compute(quick=args.quick)
    paths = render(
        module.NAME, data, module.make_figure, args.out, FORMATS[args.format], dpi, (args.lang,)
    )
    for p in paths:
        print(p)
    return paths


__all__ = [
    "COLORS",
    "SERIES",
    "DEFAULT_OUT",
    "SIZES",
    "cjk_font",
    "resolve_lang",
    "rc_params",
    "rc",
    "new_figure",
    "format_bytes",
    "bytes_axis",
    "count_axis",
    "annotate_end",
    "save",
    "render",
    "parser",
    "main_for",
]
