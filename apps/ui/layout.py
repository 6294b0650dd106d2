"""The page shell every app shares: title + English / 中文 switch + explanation, figure slots.

``header(name, title, en, zh) -> Lang`` (call inside ``with gr.Blocks()``); ``lang.labels({...})``
at the end of ``build()`` makes the switch translate those components' labels too.
``figure_slot(elem_id, label)`` is a ``gr.Plot`` with its "Download CSV" button; a callback
returns ``(figure, csv_path)`` into ``slot.outputs``. Figure styling lives in
``apps.ui.figures``, translation tables in ``apps.ui.i18n``; see docs/apps.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
import plotly.graph_objects as go

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
        ``apps.ui.i18n.Translator``): a ``None`` label and ``CSV_ZH`` are translated from the
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
