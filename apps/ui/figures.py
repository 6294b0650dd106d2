"""One look for every plotly figure: ``style``, ``empty_figure``, log axes, labelled lines.

``style(fig, title, x_title, y_title)`` applies the white "kda" template, the served font
(``apps.ui.fonts``: KDA Sans), a title wrapped to fit ``TITLE_WIDTH`` in that font and the
bottom legend; ``top_margin`` makes room above the plot for subplot titles under a title of any
number of lines; ``log_axis`` gives decade ticks (or exactly the ``values`` drawn);
``vline`` / ``hline`` place their label by ``add_annotation`` because plotly's
``add_vline(annotation_text=...)`` misplaces it on a log axis (``log=True``: x is ``log10``).
No data is computed here: the apps pass what ``kda_core.studies`` returned.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from apps.ui import fonts
from kda_core.palette import COLORS, SERIES

FONT = ", ".join(fonts.STACK)
TITLE_SIZE = 15  # px
TITLE_LINE = 20  # px: one title line (plotly's 1.3 em line height, rounded up)
TITLE_PAD = 16  # px from the canvas top to the first title line (clear of the card border)
TITLE_WIDTH = 760  # px: the widest a title line may be (the app's figure column is ~820 px)


_AXIS = {"gridcolor": "#EBF0F8", "zerolinecolor": "#EBF0F8", "automargin": True}
# A small white template: plotly_white's look without its cost (assigning plotly_white deep-
# copies a large template, ~20 ms per figure; this one ~3 ms).
pio.templates["kda"] = go.layout.Template(
    layout={
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": list(SERIES),
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "hoverlabel": {"align": "left"},
    }
)


def style(
    fig: go.Figure,
    title: str,
    x_title: str,
    y_title: str,
    *,
    height: int = 400,
    legend: bool = True,
    title_width: float = TITLE_WIDTH,
) -> go.Figure:
    """Apply the suite's look; titles should carry units, e.g. ``"context (tokens)"``. A title
    wider than ``title_width`` px in KDA Sans is wrapped (at spaces, or between Han characters)
    and the top margin grows a line per extra line."""
    lines = fonts.wrap(title, TITLE_SIZE, title_width)
    fig.update_layout(
        template="kda",
        title={
            "text": "<br>".join(lines),
            "x": 0.01,
            "xanchor": "left",
            "y": 1.0,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": TITLE_PAD},
            "font": {"size": TITLE_SIZE},
        },
        font={"family": FONT, "size": 12},
        height=height,
        margin={"l": 64, "r": 24, "t": 0, "b": 112 if legend else 52},
        hovermode="closest",
        showlegend=legend,
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 0.0,
            "yanchor": "bottom",
            "x": 0.0,
            "xanchor": "left",
            "font": {"size": 11},
        },
    )
    fig.update_xaxes(title_text=x_title, showline=True, linecolor="#888", zeroline=False)
    fig.update_yaxes(title_text=y_title, showline=True, linecolor="#888", zeroline=False)
    return _fit_top(fig)


LABEL_ROOM = 24  # px between the title and the plot for a label set on the plot's top edge


def _title_room(fig: go.Figure) -> int:
    title = fig.layout.title.text or ""
    lines = len(re.split(r"<br\s*/?>", title)) if title else 0
    return TITLE_PAD + TITLE_LINE * lines


def _fit_top(fig: go.Figure) -> go.Figure:
    """At least the title's lines above the plot, plus ``LABEL_ROOM`` when a label (a subplot
    title, a line's label) sits on the plot's top edge; never less than already set."""
    above = any(
        a.yref == "paper" and a.y is not None and a.y >= 0.99 and a.yanchor == "bottom"
        for a in fig.layout.annotations
    )
    need = _title_room(fig) + (LABEL_ROOM if above else 8)
    fig.update_layout(margin={"t": max(need, fig.layout.margin.t or 0)})
    return fig


def top_margin(fig: go.Figure, below_title: int) -> go.Figure:
    """Top margin = the title's lines + ``below_title`` px (room for subplot titles, a legend
    or labels above the plot), whatever the number of lines the title wrapped to."""
    fig.update_layout(margin={"t": _title_room(fig) + below_title})
    return fig


def empty_figure(title: str, message: str = "no data") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    style(fig, title, "", "", legend=False)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def compact(v: float) -> str:
    """A tick label: 1k, 2.5M, 0.01, 1e-05 (compact, at most 3 significant digits)."""
    a = abs(v)
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            q = v / div
            return f"{q:.0f}{suf}" if q == round(q) else f"{q:.3g}{suf}"
    if a >= 1 or a == 0:
        return f"{v:.0f}" if v == round(v) else f"{v:.3g}"
    return f"{v:.0e}" if a < 1e-3 else f"{v:g}"


def log_axis(
    fig: go.Figure,
    axis: str = "x",
    values: Sequence[float] | np.ndarray | None = None,
    *,
    row: int | None = None,
    col: int | None = None,
    fmt: Callable[[float], str] | None = None,
) -> go.Figure:
    """Logarithmic ``axis`` ("x" or "y") with decade ticks only, or ticks at ``values``."""
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    f = fmt or compact
    kw: dict[str, Any] = {"type": "log", "minor": {"showgrid": False}}
    if values is not None:
        vals = [float(v) for v in np.unique(np.asarray(values, dtype=np.float64)) if v > 0]
        kw.update(tickmode="array", tickvals=vals, ticktext=[f(v) for v in vals])
    else:
        kw.update(dtick=1)
    upd = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if row is not None or col is not None:
        upd(row=row, col=col, **kw)
    else:
        upd(**kw)
    return fig


def log_ticks(lo: float, hi: float, at_least: int = 3) -> list[float]:
    """Tick values for a log axis over [lo, hi]: decades, or 1-2-5 steps when the range holds
    fewer than ``at_least`` decade ticks (a 3-20 ms axis gets 5, 10, 20, not one lone 10)."""
    if not (lo > 0 and hi >= lo and math.isfinite(hi)):
        raise ValueError(f"log_ticks needs 0 < lo <= hi < inf, got {lo!r}, {hi!r}")
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mults in ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)):
        ticks = [m * 10.0**e for e in range(e0, e1 + 1) for m in mults]
        inside = [t for t in ticks if lo <= t <= hi]
        if len(inside) >= at_least:
            return inside
    # a very narrow range: the two ends and the middle, rounded to 2 significant digits
    return sorted({float(f"{v:.2g}") for v in (lo, math.sqrt(lo * hi), hi)})


def vline(
    fig: go.Figure,
    x: float,
    text: str = "",
    *,
    log: bool = False,
    color: str = COLORS["neutral"],
    dash: str = "dot",
    width: float = 1.5,
    y: float = 1.0,
    xanchor: str = "left",
    row: int | None = None,
    col: int | None = None,
) -> go.Figure:
    """A vertical line at data ``x``; its label is an annotation at the line (see module doc)."""
    xv = float(x)
    if log and xv <= 0:
        raise ValueError(f"x must be > 0 on a log axis, got {xv!r}")
    kw: dict[str, Any] = {} if row is None and col is None else {"row": row, "col": col}
    fig.add_vline(x=xv, line={"color": color, "dash": dash, "width": width}, **kw)
    if text:
        xref = "x"
        if row is not None or col is not None:
            ref = fig.get_subplot(row or 1, col or 1)
            xref = ref.xaxis.plotly_name.replace("axis", "") if ref is not None else "x"
        fig.add_annotation(
            x=math.log10(xv) if log else xv,
            xref=xref,
            y=y,
            yref="paper",
            text=text,
            showarrow=False,
            xanchor=xanchor,
            yanchor="bottom" if y >= 1 else "top",
            xshift=3 if xanchor == "left" else (-3 if xanchor == "right" else 0),
            font={"size": 11, "color": color},
            bgcolor="rgba(255,255,255,0.8)",
        )
    return _fit_top(fig) if fig.layout.title.text else fig


def hline(
    fig: go.Figure,
    y: float,
    text: str = "",
    *,
    log: bool = False,
    color: str = COLORS["neutral"],
    dash: str = "dot",
    width: float = 1.5,
    x: float = 1.0,
    xanchor: str = "right",
    yanchor: str = "bottom",
    row: int | None = None,
    col: int | None = None,
) -> go.Figure:
    """A horizontal line at data ``y`` with its label as an annotation (see ``vline``)."""
    yv = float(y)
    if log and yv <= 0:
        raise ValueError(f"y must be > 0 on a log axis, got {yv!r}")
    kw: dict[str, Any] = {} if row is None and col is None else {"row": row, "col": col}
    fig.add_hline(y=yv, line={"color": color, "dash": dash, "width": width}, **kw)
    if text:
        yref = "y"
        if row is not None or col is not None:
            ref = fig.get_subplot(row or 1, col or 1)
            yref = ref.yaxis.plotly_name.replace("axis", "") if ref is not None else "y"
        fig.add_annotation(
            x=x,
            xref="paper",
            y=math.log10(yv) if log else yv,
            yref=yref,
            text=text,
            showarrow=False,
            xanchor=xanchor,
            yanchor=yanchor,
            font={"size": 11, "color": color},
            bgcolor="rgba(255,255,255,0.8)",
        )
    return fig
