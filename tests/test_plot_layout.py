"""Every blog figure, in English and in 中文: nothing is clipped at the canvas edge and nothing
crosses another panel's title or axis labels (matplotlib's own window extents after a draw)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from plot_helpers import MODULES, quick

from plots import style
from plots.__main__ import SCRIPTS

DPI = style.DEFAULT_DPI  # measured at the resolution the PNG is written at: hinted text
# grows a little with the dpi, so a title that fits at 100 dpi can cross the edge at 200


def _drawn(name: str, lang: str):  # noqa: ANN202
    with style.rc(DPI, lang):
        fig = MODULES[name].make_figure(quick(name), lang=lang)
        fig.set_dpi(DPI)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()  # the constrained layout is solved as for the saved file
    return fig, canvas.get_renderer()


def _texts(fig) -> list[Text]:  # noqa: ANN001
    return [
        t for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.figure is not None
    ]  # fmt: skip


def _inside(inner: Bbox, outer: Bbox, tol: float = 1.0) -> bool:
    return (
        inner.x0 >= outer.x0 - tol and inner.x1 <= outer.x1 + tol
        and inner.y0 >= outer.y0 - tol and inner.y1 <= outer.y1 + tol
    )  # fmt: skip


def _cross(a: Bbox, b: Bbox, tol: float = 1.0) -> bool:
    return a.x0 < b.x1 - tol and b.x0 < a.x1 - tol and a.y0 < b.y1 - tol and b.y0 < a.y1 - tol


def clipped(fig, r) -> list[str]:  # noqa: ANN001
    """Panels (with their titles, labels, tick labels, texts and legends: matplotlib's tight
    box), figure texts and figure legends that reach past the canvas."""
    canvas = fig.bbox
    out = [f"panel {ax.get_title()[:40]!r}" for ax in fig.axes
           if ax.get_visible() and not _inside(ax.get_tightbbox(r), canvas)]  # fmt: skip
    texts = [*fig.texts, *([fig._suptitle] if fig._suptitle is not None else [])]
    out += [f"text {t.get_text()[:40]!r}" for t in texts
            if t.get_visible() and t.get_text().strip()
            and not _inside(t.get_window_extent(r), canvas)]  # fmt: skip
    out += [f"legend of {len(lg.texts)} entries" for lg in fig.legends
            if not _inside(lg.get_window_extent(r), canvas)]  # fmt: skip
    return out


def _labels(ax: Axes) -> list[Text]:
    return [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text().strip()]


def crossings(fig, r) -> list[str]:  # noqa: ANN001
    """A panel, its colour bar, a free text or a legend drawn over another panel's title or
    axis label."""
    axes = [a for a in fig.axes if a.get_visible() and a.axison]
    hits = []
    for ax in axes:
        labels = [(t, t.get_window_extent(r)) for t in _labels(ax)]
        others = [(f"panel {o.get_label() or o.get_title()[:30]!r}", o.bbox) for o in axes
                  if o is not ax]  # fmt: skip
        others += [(f"text {t.get_text()[:30]!r}", t.get_window_extent(r)) for t in _texts(fig)
                   if t not in _labels(ax) and t.axes is not ax and t not in _tick_texts(fig)
                   and not any(t in _labels(o) for o in axes)]  # fmt: skip
        others += [("legend", lg.get_window_extent(r)) for lg in fig.findobj(Legend)
                   if lg.axes is not ax]  # fmt: skip
        for t, box in labels:
            for what, ob in others:
                if _cross(box, ob):
                    hits.append(f"{what} crosses {t.get_text()[:30]!r}")
    return hits


def _tick_texts(fig) -> set[Text]:  # noqa: ANN001
    out: set[Text] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            out.update(t.label1 for t in axis.get_major_ticks() + axis.get_minor_ticks())
            out.update(t.label2 for t in axis.get_major_ticks() + axis.get_minor_ticks())
            out.add(axis.get_offset_text())
    return out


def texts_over_texts(fig, r) -> list[str]:  # noqa: ANN001
    """Two text boxes (free texts, annotations, legends, the title) drawn over each other."""
    boxes = [(f"text {t.get_text()[:30]!r}", t.get_window_extent(r))
             for t in dict.fromkeys([*fig.texts, *([fig._suptitle] if fig._suptitle else [])])
             if t.get_visible() and t.get_text().strip()]  # fmt: skip
    boxes += [("figure legend", lg.get_window_extent(r)) for lg in fig.legends]
    for ax in fig.axes:
        boxes += [(f"text {t.get_text()[:30]!r}", t.get_window_extent(r)) for t in ax.texts
                  if t.get_visible() and t.get_text().strip()]  # fmt: skip
        if ax.get_legend() is not None and ax.get_legend().get_visible():
            boxes.append(("legend", ax.get_legend().get_window_extent(r)))
    return [f"{a} ~ {b}" for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1 :]
            if _cross(ba, bb)]  # fmt: skip


@pytest.mark.parametrize("lang", style.LANGS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_nothing_clipped_or_crossing_a_title(name: str, lang: str) -> None:
    if lang == "zh" and not style.cjk_font():
        pytest.skip("no CJK font")
    fig, r = _drawn(name, lang)
    assert clipped(fig, r) == []
    assert crossings(fig, r) == []
    assert texts_over_texts(fig, r) == []


def _line_points(line, n: int = 24) -> np.ndarray:  # noqa: ANN001
    """A drawn line's vertices in display pixels, with ``n`` points on every segment."""
    xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
    xy = xy[np.isfinite(xy).all(axis=1)]
    if line.get_linestyle() in ("None", "", " ") or len(xy) < 2:
        return xy
    t = np.linspace(0, 1, n, endpoint=False)[:, None, None]
    seg = xy[:-1][None] + t * (xy[1:] - xy[:-1])[None]
    return np.vstack([seg.reshape(-1, 2), xy[-1:]])


def texts_over_data(fig, r) -> list[str]:  # noqa: ANN001
    """A text, annotation or legend inside a panel that a drawn line passes through."""
    hits = []
    for ax in fig.axes:
        boxes = [(f"text {t.get_text()[:30]!r}", t.get_window_extent(r)) for t in ax.texts
                 if t.get_visible() and t.get_text().strip()]  # fmt: skip
        lg = ax.get_legend()
        if lg is not None and lg.get_visible():
            boxes.append(("legend", lg.get_window_extent(r)))
        for line in ax.get_lines():
            if not line.get_visible():
                continue
            pts = _line_points(line)
            for what, b in boxes:
                inside = (pts[:, 0] > b.x0 + 1) & (pts[:, 0] < b.x1 - 1)
                inside &= (pts[:, 1] > b.y0 + 1) & (pts[:, 1] < b.y1 - 1)
                if inside.any():
                    hits.append(f"{what} ~ line {line.get_label()!r}")
    return hits


@pytest.mark.parametrize("lang", style.LANGS)
@pytest.mark.parametrize("name", SCRIPTS)
def test_no_line_through_a_text(name: str, lang: str) -> None:
    if lang == "zh" and not style.cjk_font():
        pytest.skip("no CJK font")
    fig, r = _drawn(name, lang)
    assert texts_over_data(fig, r) == []
