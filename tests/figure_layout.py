"""Layout checks of a plotly figure from its own layout (no browser): colour bars against the
other panels' y-axis titles, labels and titles against the canvas edges. Pixel sizes are for
the apps' figure column (``WIDTH``); the browser tests measure the drawn page as well."""

from __future__ import annotations

import plotly.graph_objects as go

WIDTH = 820  # px: the figure column of an app at the 1366 px wide test viewport
Y_AXIS_ROOM = 58  # px left of a panel: its tick labels and title
CB_LABELS = 44  # px right of a colour bar: its tick labels


def _axes(fig: go.Figure, letter: str) -> dict[str, object]:
    lay = fig.layout
    return {k: lay[k] for k in lay if k.startswith(f"{letter}axis")}


def colorbar_crossings(fig: go.Figure, width: int = WIDTH) -> list[str]:
    """Colour bars whose bar + tick labels reach into the room a panel's y axis needs."""
    lay = fig.layout
    m = lay.margin
    left = m.l if m.l is not None else 80
    right = m.r if m.r is not None else 80
    pw = width - left - right
    bars = []
    for tr in fig.data:
        if getattr(tr, "showscale", None) is False or not hasattr(tr, "colorbar"):
            continue
        if tr.type not in ("heatmap", "contour", "histogram2d") and not getattr(
            getattr(tr, "marker", None), "showscale", False
        ):
            continue
        cb = tr.colorbar
        x = 1.02 if cb.x is None else cb.x
        thick = 30 if cb.thickness is None else cb.thickness
        x0 = left + x * pw if (cb.xanchor or "left") == "left" else left + x * pw - thick
        bars.append((tr.name or tr.type, x0, x0 + thick + CB_LABELS))
    hits = []
    for key, ax in _axes(fig, "y").items():
        name = "xaxis" + key[5:]
        xa = fig.layout[name] if name in fig.layout else None  # noqa: SIM401 (no .get)
        if xa is None or xa.domain is None or ax.showticklabels is False:
            continue
        d0 = left + xa.domain[0] * pw
        room = Y_AXIS_ROOM if (ax.title and ax.title.text) else Y_AXIS_ROOM - 20
        for name, a, b in bars:
            if a < d0 and b > d0 - room and a > d0 - room - 200:
                hits.append(f"colour bar of {name} ~ {key} ({a:.0f}-{b:.0f} px vs {d0 - room:.0f})")
    return hits
