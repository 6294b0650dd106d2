"""One app page and its language: the header (title, English / 中文 switch, explanation), the
labels of its components, and the outputs its events draw, redrawn on the switch.

Events compute once and draw per language: ``compute(*inputs)`` returns what the figures and
tables need (study results, the session), ``draw(view, t)`` turns it into the outputs in the
language of ``t`` (a ``catalog.T``). The switch redraws the last views in the new language
without computing anything again (per component, the latest event that wrote it wins; a
``gr.skip()`` is no write).

    page = Page(NAME, MSG)                              # inside ``with gr.Blocks()``
    seed = page.label(gr.Number(0), "f_seed")           # English now, 中文 on the switch
    slot = page.figure_slot(f"{NAME}-cost", "n_cost")   # plot + its named CSV button
    fn, outs = page.event(compute, draw, outputs)       # fn takes the inputs + the switch
    btn.click(fn, [*inputs, page.radio], outs, api_name=..., validator=...)
    page.finish()                                       # after every event: wires the switch

``rendered(compute, draw, catalog)`` is the same callback without the page (tests, the API
shape): ``compute``'s parameters plus ``language``, returning ``draw``'s outputs.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from apps.ui.catalog import LANGS, Catalog, Msg, T, UnknownLanguage, UserError, code
from words.common import COMMON

Draw = Callable[[Any, T], tuple]
_REDRAWN = (gr.Plot, gr.Markdown, gr.HTML, gr.Dataframe, gr.Code)
_STAMP = itertools.count(1)  # orders the kept views of different events (no clocks)


def _signature(compute: Callable[..., Any]) -> inspect.Signature:
    """``compute``'s parameters, then ``language`` (unless ``compute`` takes it itself, e.g.
    for its progress text), then any ``gr.Progress`` parameter."""
    params = list(inspect.signature(compute).parameters.values())
    special = [p for p in params if isinstance(p.default, gr.Progress)]
    plain = [p for p in params if p not in special and p.name != "language"]
    lang = inspect.Parameter(
        "language", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=LANGS[0], annotation=str
    )
    return inspect.Signature([*plain, lang, *special])


def _call(compute: Callable[..., Any], sig: inspect.Signature, args: tuple, kwargs: dict):  # noqa: ANN202
    """(language code, view): ``compute`` called with the arguments (``language`` only if it
    takes it); its errors re-raised as ``gr.Error`` in that language."""
    arguments = dict(sig.bind(*args, **kwargs).arguments)
    lang = code(arguments.pop("language", LANGS[0]))
    if "language" in inspect.signature(compute).parameters:
        arguments["language"] = lang
    try:
        return lang, compute(**arguments)
    except UserError as e:
        raise gr.Error(e.render(lang), print_exception=False) from e
    except gr.Error:
        raise
    except ValueError as e:  # a study refused the input: its sentence inside ours
        msg = str(e) if len(str(e)) <= 300 else str(e)[:299] + "…"
        text = COMMON("core_refused", message=msg).render(lang)
        raise gr.Error(text, print_exception=False) from e


def rendered(compute: Callable[..., Any], draw: Draw, catalog: Catalog) -> Callable[..., tuple]:
    """``compute`` then ``draw`` in the call's ``language`` (see module doc)."""
    sig = _signature(compute)

    @functools.wraps(compute)
    def fn(*args: Any, **kwargs: Any) -> tuple:
        lang, view = _call(compute, sig, args, kwargs)
        return draw(view, catalog.lang(lang))

    fn.__signature__ = sig  # type: ignore[attr-defined]
    del fn.__wrapped__  # Gradio must see the new signature, not compute's
    return fn


def _text_of(c: Any, t: T, value: Msg) -> dict[str, Any]:
    """The update that shows ``value`` on ``c``: a button's or markdown's text, else its
    label (a download button's value is its file)."""
    text = t.render(value)
    if isinstance(c, (gr.Markdown, gr.Button)) and not isinstance(c, gr.DownloadButton):
        return {"value": text}
    return {"label": text}


def _set_value(c: Any, value: Any) -> None:
    """``c`` shows ``value`` as if it had been built with it (Gradio postprocesses a value
    given to the constructor: a figure becomes its JSON)."""
    v = c.postprocess(value)
    c.value = v.model_dump() if hasattr(v, "model_dump") else v


def _skipped(v: Any) -> bool:
    """``v`` is ``gr.skip()``: an update that changes nothing (not a value to redraw)."""
    return isinstance(v, dict) and v == gr.skip()


@dataclass(frozen=True, slots=True)
class FigureSlot:
    plot: gr.Plot
    csv: gr.DownloadButton

    @property
    def outputs(self) -> list[Any]:
        return [self.plot, self.csv]


def lenient(component: gr.Radio | gr.Dropdown, mark: type[str] = str) -> None:
    """``component`` passes a value outside its choices on (as ``mark(value)``) instead of
    refusing it: Gradio's own refusal comes before the event's validator, which a
    ``gradio_client`` caller sees as a bare HTTP 400; the validator (or the callback's own
    check) then names the argument and the allowed values."""
    strict = component.preprocess

    def preprocess(payload: Any) -> Any:
        try:
            return strict(payload)
        except gr.Error:
            return mark(payload) if isinstance(payload, str) else payload

    component.preprocess = preprocess  # type: ignore[method-assign]


class Page:
    """The header and the language of one app page (see module doc)."""

    def __init__(self, name: str, catalog: Catalog) -> None:
        self.name = name
        self.catalog = catalog
        self.en = catalog.lang(LANGS[0])
        self._labels: dict[Any, Msg] = {}
        self._choices: dict[Any, list[tuple[Msg, Any]]] = {}
        self._events: list[tuple[list[Any], gr.State, Draw]] = []
        self._initial: dict[int, tuple[Any, Callable[[T], Any]]] = {}
        with gr.Row(equal_height=True):
            title = gr.Markdown(f"# {self.en('title')}", elem_id=f"{name}-title")
            self.radio = gr.Radio(
                list(LANGS),
                value=LANGS[0],
                label="language",  # the API's name for it (hidden on the page)
                show_label=False,
                container=False,
                elem_id=f"{name}-lang",
                scale=0,
                min_width=200,
            )
        lenient(self.radio, UnknownLanguage)
        intro = gr.Markdown(self.en("intro"), elem_id=f"{name}-intro", elem_classes=["kda-intro"])
        self._labels[title] = COMMON("h1", title=catalog("title"))
        self._labels[intro] = Msg(catalog, "intro")

    def msg(self, key: str, **params: Any) -> Msg:
        return self.catalog(key, **params)

    def label(self, component: Any, key: str | Msg, **params: Any) -> Any:
        """Show message ``key`` on ``component`` (label, button text or markdown) in the
        page's language; returns the component."""
        m = key if isinstance(key, Msg) else self.catalog(key, **params)
        self._labels[component] = m
        if isinstance(component, (gr.Radio, gr.Dropdown)):
            lenient(component)
        for k, v in _text_of(component, self.en, m).items():
            if k == "value":
                _set_value(component, v)
            else:
                setattr(component, k, v)
        return component

    def choices(self, component: Any, options: list[tuple[str | Msg, Any]]) -> Any:
        """Radio / dropdown options: (message key, value); the values never change."""
        opts = [(o if isinstance(o, Msg) else self.catalog(o), v) for o, v in options]
        self._choices[component] = opts
        component.choices = [(self.en.render(m), v) for m, v in opts]
        return component

    def figure_slot(
        self, elem_id: str, name_key: str, value: go.Figure | None = None, *, csv: bool = True
    ) -> FigureSlot:
        """A plot and its CSV button, which names the figure (``name_key``: a short noun
        phrase, e.g. "token timeline"); the button hides with ``csv=False`` until a callback
        returns ``gr.update(value=path, visible=True)``."""
        name = self.catalog(name_key)
        plot = gr.Plot(value, label=self.en.render(name), elem_id=elem_id, show_label=False)
        btn = gr.DownloadButton(
            "", elem_id=f"{elem_id}-csv", size="sm", variant="secondary", visible=csv
        )
        self.label(btn, COMMON("csv", figure=name))
        return FigureSlot(plot, btn)

    def event(
        self, compute: Callable[..., Any], draw: Draw, outputs: list[Any]
    ) -> tuple[Callable[..., tuple], list[Any]]:
        """The callback (inputs + the switch) and its outputs (+ a kept view for redraws)."""
        kept = gr.State(None)
        sig = _signature(compute)
        catalog = self.catalog

        def callback(*args: Any, **kwargs: Any) -> tuple:
            lang, view = _call(compute, sig, args, kwargs)
            return (*draw(view, catalog.lang(lang)), (next(_STAMP), view))

        functools.update_wrapper(callback, compute)
        callback.__signature__ = sig  # type: ignore[attr-defined]
        del callback.__wrapped__
        self._events.append((list(outputs), kept, draw))
        return callback, [*outputs, kept]

    def initial(self, component: Any, draw: Callable[[T], Any]) -> None:
        """``component`` shows ``draw(t)`` until an event writes it (a placeholder)."""
        self._initial[id(component)] = (component, draw)
        _set_value(component, draw(self.en))

    def finish(self) -> None:
        """Wire the switch: labels, options and the kept views, in the chosen language."""
        redrawn: list[Any] = [c for c, _ in self._initial.values()]
        for outs, _, _ in self._events:
            redrawn += [c for c in outs if isinstance(c, _REDRAWN) and c not in redrawn]
        relabelled = [c for c in (*self._labels, *self._choices) if c not in redrawn]
        comps = list(dict.fromkeys(relabelled)) + redrawn
        events, labels, choices = list(self._events), dict(self._labels), dict(self._choices)
        initial, catalog = dict(self._initial), self.catalog

        def switch(language: str, *kept: Any) -> list[Any]:
            t = catalog.lang(language)
            latest: dict[int, tuple[int, Any]] = {}
            for (outs, _, draw), k in zip(events, kept):
                if k:
                    stamp, view = k
                    for c, v in zip(outs, draw(view, t)):
                        if _skipped(v):  # the event left ``c`` alone: an earlier view stands
                            continue
                        if id(c) not in latest or latest[id(c)][0] < stamp:
                            latest[id(c)] = (stamp, v)
            res = []
            for c in comps:
                upd: dict[str, Any] = {}
                if c in labels:
                    upd.update(_text_of(c, t, labels[c]))
                if c in choices:
                    upd["choices"] = [(t.render(m), v) for m, v in choices[c]]
                if id(c) in latest:
                    v = latest[id(c)][1]
                    upd = {**upd, **(v if isinstance(v, dict) else {"value": v})}
                elif id(c) in initial:
                    upd["value"] = initial[id(c)][1](t)
                res.append(gr.update(**upd) if upd else gr.skip())
            return res

        kept = [self.radio, *(k for _, k, _ in events)]
        quiet = {"api_visibility": "private", "show_progress": "hidden"}
        self.radio.change(switch, kept, comps, **quiet)


__all__ = ["FigureSlot", "Page", "lenient", "rendered"]
