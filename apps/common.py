"""Shared UI helpers for every KDA State Lab app (a stable API: every app builds on it).

Apps draw what ``kda_core.studies`` returns; this module holds only presentation glue.

Registry (the hub lists every entry; a module that does not exist yet is skipped)
    ``AppInfo(name, title, title_zh, blurb, blurb_zh)``; ``.thumbnail`` -> Path | None
    (``assets/screenshots/thumbs/<name>.png``, the first figure, else the full page
    ``assets/screenshots/<name>.png``, once ``python -m apps.screenshots`` ran).
    ``APPS: tuple[AppInfo, ...]`` (every app, hub order); ``app_info(name) -> AppInfo``;
    ``load_app(name) -> module | None`` (None plus a log line when ``apps/<name>.py`` is missing
    or fails to import).

Palette: ``COLORS`` (kv, state, conv, replay, prefill, decode, hit, free, checkpoint, neutral)
    and ``SERIES`` re-exported from ``kda_core.palette``.

Layout (call inside ``with gr.Blocks() as demo:``)
    ``header(name, title, en, zh) -> Lang``: the title, an English / 中文 switch
        (``elem_id=f"{name}-lang"``) and the plain-language explanation, shown in the chosen
        language. ``lang.labels({component: "中文标签", ...})`` at the end of ``build()`` makes
        the switch translate those components' labels as well (English = the label they were
        built with; buttons: their text; ``slot.csv: CSV_ZH`` for the download buttons).
        ``lang.radio`` is the switch.
    ``figure_slot(elem_id, label, value=None, *, csv_visible=True) -> FigureSlot(plot, csv)``:
        a ``gr.Plot`` (``elem_id``, optional initial figure) and a "Download CSV" button
        (``elem_id + "-csv"``; ``csv_visible=False`` hides it until there is data). A callback
        returns ``(figure, csv_path)`` into ``[slot.plot, slot.csv]``; ``slot.outputs`` is that
        list.

Figures
    ``style(fig, title, x_title, y_title, *, height=400, legend=True) -> go.Figure``: one look
        for every figure (a light white template "kda", pinned font, title, axis titles with
        units, hover mode, horizontal legend at the bottom under the x-axis title).
    ``empty_figure(title, message)``: a placeholder figure with a centred note.
    ``log_axis(fig, axis="x", values=None, *, row=None, col=None, fmt=None) -> go.Figure``: make
        an axis logarithmic with readable ticks: decade ticks only (1, 10, 100, ... shown as
        1, 10, 100, 1k, ...; no stray minor "2" / "5" labels that read like values), or, given
        ``values``, exactly those ticks (e.g. the chunk sizes drawn), labelled with ``fmt``
        (a callable, default: compact ``1k`` / ``1M`` style).
    ``vline(fig, x, text="", *, log=False, color=..., dash="dot", y=1.0, xanchor="left",
        row=None, col=None) -> go.Figure``: a vertical line with its label placed by
        ``fig.add_annotation`` at the line (plotly's ``add_vline(annotation_text=...)``
        misplaces the label on a log x axis; pass ``log=True`` for a log axis: the annotation
        x is then ``log10(x)``). ``y`` is in paper units (1 = top of the plot area).
    ``hline(fig, y, text="", *, log=False, color=..., dash="dot", x=1.0, xanchor="right",
        yanchor="bottom", row=None, col=None) -> go.Figure``: the same for a horizontal line
        (label at paper ``x``, at ``log10(y)`` on a log y axis).

Data behind each figure (CSV, written to a per-process temp dir, named by a content hash so
repeated calls do not pile up files)
    ``write_csv(stem, columns: Mapping[str, Sequence]) -> str`` (equal-length columns).
    ``series_csv(stem, series: Mapping[str, (x, y)], x_name, y_name) -> str`` (long format:
        series, x, y; for series of different lengths).

Validation (every message names the argument and the allowed range)
    ``check_int(name, value, lo, hi) -> int``, ``check_float(name, value, lo, hi) -> float``,
    ``check_choice(name, value, choices) -> str``: raise ``gr.Error``. Integer fields reject
    non-integers (3.5 -> error, 3.0 accepted).
    ``clip_text(value, n=40) -> str``: ``repr`` of a user value cut to ``n`` characters (with
        "… (N chars)"); every echoed value in an error message goes through it, so a 2000-value
        list never becomes a 10 KB toast.
    ``@study_errors``: a decorator turning ``ValueError`` (kda_core's bad-input error) into
    ``gr.Error`` with the same message (cut to 300 characters); keeps the wrapped signature
    (``gr.Progress`` works).

Launch
    ``THEME``, ``CSS``, ``LAUNCH_KWARGS`` (theme, css, footer_links, run_history: Gradio 6
    takes them in ``launch()`` / ``mount_gradio_app``), ``HOST`` = 127.0.0.1, ``PORT`` = 7860.
    ``main(build, argv=None)``: ``python -m apps.<name> [--host H] [--port P]`` for one app.
    ``launched(demo)``: context manager serving ``demo`` in-process (prevent_thread_lock) on
    127.0.0.1, yields the URL (tests, benchmarks).
    ``plot_from_client(value) -> dict``: a ``gradio_client`` plot output as a plotly figure
    dict with base64 typed arrays decoded to lists.

Testing helpers live in ``tests/e2e/conftest.py`` (browser fixtures ``app_url``, ``hub_url``,
``browser``, ``ui``; see its docstring).

Conventions every app follows: ``build() -> gr.Blocks``; elem_ids and api_names prefixed with
the app name (``memory_planner_plan``, ``memory_planner-sizes``); public main actions carry a
snake_case ``api_name``; UI plumbing (language switch, timers) uses ``api_visibility="private"``;
per-session data lives in ``gr.State``; the default renders on ``demo.load``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import functools
import hashlib
import importlib
import importlib.util
import io
import logging
import math
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from kda_core.palette import COLORS, SERIES

log = logging.getLogger("apps")

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
SCREENSHOTS = ASSETS / "screenshots"
HOST = "127.0.0.1"
PORT = 7860
FONT = "Liberation Sans, DejaVu Sans, WenQuanYi Zen Hei, Noto Sans CJK SC, Arial, sans-serif"

# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppInfo:
    """One hub card: ``name`` is the module (``apps/<name>.py``) and the URL path (``/<name>``)."""

    name: str
    title: str
    title_zh: str
    blurb: str
    blurb_zh: str

    @property
    def thumbnail(self) -> Path | None:
        """The card image: the first figure (``thumbs/<name>.png``), else the whole page."""
        for p in (SCREENSHOTS / "thumbs" / f"{self.name}.png", SCREENSHOTS / f"{self.name}.png"):
            if p.is_file():
                return p
        return None


APPS: tuple[AppInfo, ...] = (
    AppInfo(
        "prefix_replay",
        "Prefix replay",
        "前缀命中与重放",
        "Send requests through the KDA-aware cache and step through the replay to the match.",
        "把请求送进 KDA 感知的缓存，逐 token 观察从检查点重放到匹配点。",
    ),
    AppInfo(
        "int8_checkpoint",
        "INT8 checkpoints",
        "INT8 检查点",
        "Park a real state as INT8 / fp8 / bf16, restore it, and watch the error and divergence.",
        "把真实状态以 INT8 / fp8 / bf16 停放再恢复，观察误差与后续输出的偏离。",
    ),
    AppInfo(
        "checkpoint_density",
        "Checkpoint density",
        "检查点密度",
        "Checkpoint every K tokens: state memory ~1/K against replay per hit, on a real trace.",
        "每 K 个 token 存一个检查点：状态显存 ~1/K 与每次命中的重放量，在真实 trace 上权衡。",
    ),
    AppInfo(
        "unified_memory",
        "Unified memory",
        "统一显存池",
        "One byte buffer, MLA KV from one end and state slots from the other, vs static splits.",
        "一块显存，MLA KV 从一端增长、状态槽从另一端增长，对比静态划分。",
    ),
    AppInfo(
        "chunk_scan",
        "Chunk scan",
        "分块扫描",
        "Chunked equals recurrent; segment maps compose in any grouping but not in any order.",
        "分块计算等于逐步递推；段映射可任意结合，但不可交换顺序。",
    ),
    AppInfo(
        "speculative_replay",
        "Speculative replay",
        "投机解码重放",
        "Verify D draft tokens, accept a prefix, commit exactly by replaying from the ring.",
        "验证 D 个草稿 token，接受前缀，从环形缓冲精确重放提交。",
    ),
    AppInfo(
        "memory_planner",
        "Memory planner",
        "显存规划",
        "Real configs: state per request, MLA KV per token, slots, and max running requests.",
        "真实模型配置：每请求状态、每 token MLA KV、槽位与最大并发请求数。",
    ),
    AppInfo(
        "state_transfer",
        "State transfer",
        "跨实例状态传输",
        "Model-state objects across instances: prefill to decode, refusals, splices, tiers.",
        "跨实例的模型状态对象：prefill 到 decode、拒绝不匹配、拼接漂移、存储层级。",
    ),
    AppInfo(
        "context_parallel",
        "Context parallel",
        "上下文并行",
        "Split one sequence over P ranks: a prefix scan of affine maps, not a KV broadcast.",
        "把一条序列切到 P 个 rank 上：扫描仿射映射，而不是广播 KV。",
    ),
)


def app_info(name: str) -> AppInfo:
    for a in APPS:
        if a.name == name:
            return a
    raise KeyError(f"unknown app {name!r}; known: {[a.name for a in APPS]}")


def load_app(name: str) -> ModuleType | None:
    """Import ``apps.<name>``; None (and a log line) when it does not exist or fails to import."""
    mod = f"apps.{name}"
    if importlib.util.find_spec(mod) is None:
        log.warning("app %s skipped: %s.py does not exist yet", name, mod.replace(".", "/"))
        return None
    try:
        m = importlib.import_module(mod)
    except Exception:  # the hub must survive one broken app
        log.exception("app %s skipped: import failed", name)
        return None
    if not callable(getattr(m, "build", None)):
        log.warning("app %s skipped: no build()", name)
        return None
    return m


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------

LANGS: tuple[str, str] = ("English", "中文")


@dataclass(slots=True)
class Lang:
    """The language switch of one app (see ``header``)."""

    radio: gr.Radio
    text: gr.Markdown
    en: str
    zh: str
    _wired: bool = False
    _labels: dict[Any, tuple[str, str]] = field(default_factory=dict)

    def labels(self, mapping: Mapping[Any, str | None], tr: Any = None) -> None:
        """Also translate these components (component -> Chinese label). Call once, at the end
        of ``build()``, inside the Blocks context. A ``gr.Button`` switches its text
        (``value``); a ``gr.DownloadButton`` its ``label`` (its value is the file); a
        ``gr.Markdown`` its text; a ``gr.Accordion`` its title. With ``tr`` (an
        ``apps.i18n.Translator``): a ``None`` label and ``CSV_ZH`` are translated from the
        English one, and a Radio's / Dropdown's options show translated text (their values,
        what the callbacks receive, stay English)."""
        if self._wired:
            raise RuntimeError("Lang.labels may be called once per app")
        self._wired = True
        comps = list(mapping)
        self._labels = {c: (_text_of(c), _zh_of(c, zh, tr)) for c, zh in mapping.items()}
        labels = self._labels
        choices = {
            c: (list(c.choices), [(tr.text(str(d)), v) for d, v in c.choices])
            for c in comps
            if tr is not None and isinstance(c, (gr.Radio, gr.Dropdown)) and c.choices
        }

        def switch(lang: str) -> list[Any]:
            i = 1 if lang == LANGS[1] else 0
            out = []
            for c in comps:
                upd = _relabel(c, labels[c][i])
                if c in choices:
                    upd["choices"] = choices[c][i]
                out.append(upd)
            return out

        if comps:
            self.radio.change(
                switch, self.radio, comps, api_visibility="private", show_progress="hidden"
            )


def _zh_of(c: Any, zh: str | None, tr: Any) -> str:
    en = _text_of(c)
    if tr is None:
        return en if zh is None else zh
    if zh == CSV_ZH and en.startswith("Download CSV (") and en.endswith(")"):
        inner = en[len("Download CSV (") : -1]
        return f"{CSV_ZH}（{tr.text(inner[:1].upper() + inner[1:])}）"  # the figure's label
    return tr.text(en) if zh is None else zh


def _is_text_button(c: Any) -> bool:
    return isinstance(c, gr.Button) and not isinstance(c, gr.DownloadButton)


def _text_of(c: Any) -> str:
    if _is_text_button(c) or isinstance(c, gr.Markdown):
        return str(c.value)
    return str(c.label)


def _relabel(c: Any, text: str) -> Any:
    if _is_text_button(c) or isinstance(c, gr.Markdown):
        return gr.update(value=text)
    return gr.update(label=text)


CSV_ZH = "下载 CSV"
"""The Chinese text of every figure slot's "Download CSV" button (for ``Lang.labels``): the
button then reads "下载 CSV（<the figure's label, translated>）"."""


def csv_label(figure_label: str) -> str:
    """'Download CSV (token timeline)': one name per button in the API listing."""
    return f"Download CSV ({figure_label[:1].lower()}{figure_label[1:]})"


def header(name: str, title: str, en: str, zh: str) -> Lang:
    """Title + English/中文 switch + explanation (English first). Returns the ``Lang``."""
    with gr.Row(equal_height=True):
        gr.Markdown(f"# {title}", elem_id=f"{name}-title")
        radio = gr.Radio(
            list(LANGS),
            value=LANGS[0],
            show_label=False,
            container=False,
            elem_id=f"{name}-lang",
            scale=0,
            min_width=200,
        )
    text = gr.Markdown(en, elem_id=f"{name}-intro", elem_classes=["kda-intro"])
    lang = Lang(radio, text, en, zh)
    radio.change(
        lambda v: zh if v == LANGS[1] else en,
        radio,
        text,
        api_visibility="private",
        show_progress="hidden",
    )
    return lang


@dataclass(frozen=True, slots=True)
class FigureSlot:
    plot: gr.Plot
    csv: gr.DownloadButton

    @property
    def outputs(self) -> list[Any]:
        return [self.plot, self.csv]


def figure_slot(
    elem_id: str, label: str, value: go.Figure | None = None, *, csv_visible: bool = True
) -> FigureSlot:
    """A plot (optionally with an initial figure) and its "Download CSV" button (hidden with
    ``csv_visible=False`` until a callback returns ``gr.update(value=path, visible=True)``)."""
    plot = gr.Plot(value, label=label, elem_id=elem_id, show_label=False)
    btn = gr.DownloadButton(
        csv_label(label),
        elem_id=f"{elem_id}-csv",
        size="sm",
        variant="secondary",
        visible=csv_visible,
    )
    return FigureSlot(plot, btn)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


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
) -> go.Figure:
    """Apply the suite's look; titles should carry units, e.g. ``"context (tokens)"``."""
    fig.update_layout(
        template="kda",
        title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        font={"family": FONT, "size": 12},
        height=height,
        margin={"l": 64, "r": 24, "t": 44, "b": 112 if legend else 52},
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
    return fig


def empty_figure(title: str, message: str = "no data") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    style(fig, title, "", "", legend=False)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _compact(v: float) -> str:
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
    f = fmt or _compact
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
    return fig


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


# ---------------------------------------------------------------------------------------------
# CSV of the data behind a figure
# ---------------------------------------------------------------------------------------------

_CSV_DIR: Path | None = None


def _csv_dir() -> Path:
    global _CSV_DIR
    if _CSV_DIR is None or not _CSV_DIR.is_dir():
        _CSV_DIR = Path(tempfile.mkdtemp(prefix="kda-csv-"))
    return _CSV_DIR


def _cell(x: object) -> object:
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _write(stem: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([_cell(x) for x in r])
    text = buf.getvalue()
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in stem) or "data"
    path = _csv_dir() / f"{safe}-{digest}.csv"
    if not path.is_file():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return str(path)


def write_csv(stem: str, columns: Mapping[str, Sequence[object] | np.ndarray]) -> str:
    """Write equal-length columns as ``<stem>-<hash>.csv``; returns the path."""
    cols = {
        k: list(np.asarray(v).tolist()) if isinstance(v, np.ndarray) else list(v)
        for k, v in columns.items()
    }
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"write_csv: columns must have equal lengths, got {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    return _write(stem, list(cols), [[cols[k][i] for k in cols] for i in range(n)])


def series_csv(
    stem: str,
    series: Mapping[str, tuple[Sequence[object] | np.ndarray, Sequence[object] | np.ndarray]],
    x_name: str = "x",
    y_name: str = "y",
) -> str:
    """Long format (series, x, y) for several series of possibly different lengths."""
    rows: list[list[object]] = []
    for name, (x, y) in series.items():
        xs = np.asarray(x).tolist()
        ys = np.asarray(y).tolist()
        if len(xs) != len(ys):
            raise ValueError(f"series_csv: {name!r} has {len(xs)} x and {len(ys)} y values")
        rows.extend([name, a, b] for a, b in zip(xs, ys))
    return _write(stem, ["series", x_name, y_name], rows)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def clip_text(value: object, n: int = 40) -> str:
    """``repr(value)`` cut to ``n`` characters (for echoing user input in error messages)."""
    r = repr(value)
    if len(r) <= n:
        return r
    return f"{r[: max(n - 1, 1)]}… ({len(r):,} chars)"


def _err(message: str) -> gr.Error:
    return gr.Error(message, print_exception=False)


def _bound(v: float) -> str:
    """A range end as the reader would type it: 2147483647, not 2.14748e+09."""
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def _number(name: str, value: object, lo: float, hi: float, kind: str) -> float:
    try:
        if isinstance(value, bool) or value is None or (isinstance(value, str) and not value):
            raise TypeError
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _err(
            f"{name} must be {kind} in [{_bound(lo)}, {_bound(hi)}], got {clip_text(value)}"
        ) from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise _err(f"{name} must be {kind} in [{_bound(lo)}, {_bound(hi)}], got {clip_text(value)}")
    return v


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]`` (integral floats such as 3.0 are accepted)."""
    v = _number(name, value, lo, hi, "an integer")
    if v != int(v):
        raise _err(
            f"{name} must be an integer in [{_bound(lo)}, {_bound(hi)}], got {clip_text(value)}"
        )
    return int(v)


def check_float(name: str, value: object, lo: float, hi: float) -> float:
    return _number(name, value, lo, hi, "a number")


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise _err(f"{name} must be one of {list(choices)}, got {clip_text(value)}")
    return str(value)


def study_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ``ValueError`` from the studies into ``gr.Error`` (same message)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:  # already a reader-facing message (gr.Error is a ValueError too)
            raise
        except ValueError as e:
            msg = str(e)
            if len(msg) > 300:  # never a 10 KB toast, whatever a study echoed
                msg = msg[:299] + "…"
            raise gr.Error(msg, print_exception=False) from e

    return wrapper


# ---------------------------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------------------------

# System fonts only (no network, no bundled webfont): Gradio's default IBM Plex Sans SemiBold
# ships 55 glyphs, so bold "KDA" / "GiB" mixed two faces. Liberation Sans and DejaVu Sans have
# every Latin glyph in regular and bold; WenQuanYi Zen Hei / Noto CJK cover 中文.
FONT_STACK = ("Liberation Sans", "DejaVu Sans", "WenQuanYi Zen Hei", "Noto Sans CJK SC",
              "sans-serif")  # fmt: skip
MONO_STACK = ("DejaVu Sans Mono", "Liberation Mono", "WenQuanYi Zen Hei Mono", "monospace")
THEME = gr.themes.Default(
    primary_hue="indigo", secondary_hue="slate", font=FONT_STACK, font_mono=MONO_STACK
)
CSS = """
.gradio-container { max-width: 1280px !important; margin: auto; }
.kda-intro { font-size: 0.97rem; }
.kda-metrics table { font-size: 0.9rem; }
.kda-metrics th { word-break: normal !important; overflow-wrap: normal !important;
  hyphens: none; }
/* tables: numbers never wrap mid-digit; a wide table scrolls inside its column instead of
   overflowing it; escaped byte strings (code) may break anywhere */
.prose table { display: block; max-width: 100%; overflow-x: auto; }
.prose td, .prose th { word-break: normal !important; overflow-wrap: normal !important; }
.prose td code { word-break: break-all !important; white-space: normal !important; }
.gradio-container strong, .gradio-container b, .prose strong { font-weight: 600 !important; }
"""
LAUNCH_KWARGS: dict[str, Any] = {
    "theme": THEME,
    "css": CSS,
    "footer_links": ["api"],
    "run_history": False,
}


def free_port(host: str = HOST) -> int:
    """A port the kernel just handed out on ``host`` (bind to 0). Gradio's own search walks up
    from 7860, so two test runs on one machine would race for the same ports; ephemeral ports
    from the kernel do not collide."""
    return next_free_port(host, 0)[0]


def launch_on_free_port(demo: gr.Blocks, attempts: int = 5) -> str:
    """``demo.launch`` in-process on 127.0.0.1 at a free port (retried if another process took
    it between the probe and the bind); returns the URL."""
    for attempt in range(attempts):
        try:
            _, url, _ = demo.launch(
                prevent_thread_lock=True,
                server_name=HOST,
                server_port=free_port(),
                quiet=True,
                **LAUNCH_KWARGS,
            )
            return url
        except OSError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def launched(demo: gr.Blocks) -> Iterator[str]:
    """Serve ``demo`` in-process on 127.0.0.1 (a free port) for tests and benchmarks; yields
    its URL and closes the server afterwards."""
    url = launch_on_free_port(demo)
    try:
        yield url
    finally:
        demo.close()


def _decode_typed(x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) >= {"dtype", "bdata"}:
            arr = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
            if "shape" in x:
                shape = [int(n) for n in str(x["shape"]).split(",")]
                arr = arr.reshape(shape)
            return arr.tolist()
        return {k: _decode_typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode_typed(v) for v in x]
    return x


def plot_from_client(value: Any) -> dict[str, Any]:
    """A ``gr.Plot`` value as ``gradio_client`` returns it -> the plotly figure dict, with
    plotly's base64 typed arrays (``{"dtype", "bdata"}``) decoded to lists."""
    import json

    if isinstance(value, dict) and "plot" in value:
        value = value["plot"]
    fig = json.loads(value) if isinstance(value, str) else value
    return _decode_typed(fig)


PORT_TRIES = 20


def bind_port(host: str, port: int, tries: int = PORT_TRIES) -> tuple[socket.socket, str]:
    """A listening socket on ``host:port``, or on the next free port above it (``tries``
    ports at most); returns it and a line for the reader (empty when ``port`` itself was
    free). Raises ``OSError`` naming the range and the ``--port`` option when none is free."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in [0, 65535], got {port}")
    last: OSError | None = None
    for p in range(port, min(port + tries, 65536)) if port else [0]:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            sock.bind((host, p))
            sock.listen(128)
        except OSError as e:
            sock.close()
            last = e
            continue
        got = sock.getsockname()[1]
        note = "" if p == port or not port else (
            f"port {port} is in use; serving on {got}, the next free port "
            f"(choose one with --port P, or make demo PORT=P)"
        )  # fmt: skip
        return sock, note
    raise OSError(
        f"ports {port}-{port + tries - 1} on {host} are all in use ({last}); choose another "
        "with --port P (make demo PORT=P)"
    )


def next_free_port(host: str, port: int) -> tuple[int, str]:
    """Like ``bind_port`` but returns the port number (the socket is closed again; for
    ``Blocks.launch``, which binds by itself)."""
    sock, note = bind_port(host, port)
    got = int(sock.getsockname()[1])
    sock.close()
    return got, note


def main(build: Callable[[], gr.Blocks], argv: Sequence[str] | None = None) -> None:
    """``python -m apps.<name> [--host H] [--port P]``: serve one app (blocking); a port in
    use moves to the next free one, said on stderr."""
    ap = argparse.ArgumentParser(description="Serve one KDA State Lab app")
    ap.add_argument("--host", default=HOST)
    ap.add_argument("--port", type=int, default=PORT)
    args = ap.parse_args(argv)
    port, note = next_free_port(args.host, args.port)
    if note:
        log.warning(note)
    build().launch(server_name=args.host, server_port=port, **LAUNCH_KWARGS)


__all__ = [
    "APPS",
    "AppInfo",
    "COLORS",
    "CSS",
    "CSV_ZH",
    "FigureSlot",
    "HOST",
    "LANGS",
    "LAUNCH_KWARGS",
    "Lang",
    "PORT",
    "SERIES",
    "THEME",
    "app_info",
    "check_choice",
    "check_float",
    "check_int",
    "clip_text",
    "empty_figure",
    "figure_slot",
    "header",
    "hline",
    "load_app",
    "free_port",
    "launch_on_free_port",
    "launched",
    "next_free_port",
    "log_axis",
    "log_ticks",
    "main",
    "plot_from_client",
    "series_csv",
    "study_errors",
    "style",
    "vline",
    "write_csv",
    "bind_port",
    "csv_label",
    "free_port",
]
