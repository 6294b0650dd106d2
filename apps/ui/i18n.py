"""中文 for everything an app draws: figures, tables, step text, radio options, accordions.

The studies return data and the apps build English figures and text from it; this module
translates the *finished* outputs with a phrase table (English phrase -> Chinese), so a figure
maker stays one function and a translation is one table entry.

    TR = Translator(COMMON, {"Token timeline": "Token 时间线", ...})   # per app
    TR.text("Pools after each request")      -> "每个请求之后的池"
    TR.figure(fig)                            -> a translated copy (titles, axis titles,
                                                 legend names, annotations, hover templates,
                                                 tick labels, colour-bar titles); a sentence
                                                 a study computed in both languages rides
                                                 along as ``layout.meta = {"zh": {en: zh}}``
    TR.value(output)                          -> any callback output translated: figures,
                                                 markdown, ``gr.update`` dicts (value, label,
                                                 choices' display text), tuples of those;
                                                 file paths, numbers and states pass through
    localized(fn, TR)                         -> ``fn`` with one more input, ``language``
                                                 (the header's switch): its outputs come back
                                                 translated when the language is 中文

Matching is by whole phrase (never inside a longer ASCII word, longest phrase first) and never
inside ``%{...}`` hover placeholders, HTML tags or `code` spans (token bytes stay as they are).
Trace ``text`` / ``hovertext`` / ``customdata`` are data (the reader's own prompt, node labels)
and are not touched.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import gradio as gr
import plotly.graph_objects as go

ZH_LANG = "中文"

COMMON: dict[str, str] = {
    "Download CSV": "下载 CSV",
    "token position (tokens)": "token 位置（token）",
    "tokens": "token",
    "token": "token",
    "request": "请求",
    "requests": "请求",
    "step": "步",
    "steps": "步",
    "scheduler step": "调度步",
    "log scale": "对数坐标",
    "(log scale)": "（对数坐标）",
    "no data": "无数据",
    "checkpoint": "检查点",
    "checkpoints": "检查点",
    "state": "状态",
    "head": "头",
    "layer": "层",
    "KDA layer": "KDA 层",
    "value": "值",
    "mean": "平均",
    "peak": "峰值",
    "seed": "随机种子",
    "memory": "显存",
    "budget": "预算",
    "ratio": "比例",
    "quantity": "量",
    "total": "合计",
    "free": "空闲",
    "live": "在用",
    "count": "计数",
    "error": "误差",
    "unified": "统一池",
    "static": "静态",
    "running": "运行中",
    "queued": "排队",
    "requests running": "运行中的请求",
    "decode": "解码",
    "prefill": "预填充",
    "replay": "重放",
    "exact": "精确",
    "time": "时间",
    "measured": "实测",
    "uncached": "不走缓存",
    "vs": "对比",
}


def _boundary(phrase: str) -> str:
    """A phrase matched whole: no ASCII letter, digit or _ directly before / after an ASCII
    end."""
    p = re.escape(phrase)
    if phrase[:1].isascii() and phrase[:1].isalnum():
        p = r"(?<![A-Za-z0-9_])" + p  # never inside an identifier such as S_match
    if phrase[-1:].isascii() and phrase[-1:].isalnum():
        p += r"(?![A-Za-z0-9_])"
    return p


_PROTECTED = re.compile(r"(%\{[^}]*\}|<[^>]*>|`[^`]*`)")
_VERBATIM: OrderedDict[str, None] = OrderedDict()  # recent reader texts, never translated
_VERBATIM_MAX = 512


def verbatim(text: str) -> str:
    """``text`` (the reader's own prompt, say), returned unchanged and remembered so that no
    phrase inside it is translated (the text itself carries no mark)."""
    if text:
        _VERBATIM[text] = None
        _VERBATIM.move_to_end(text)
        while len(_VERBATIM) > _VERBATIM_MAX:
            _VERBATIM.popitem(last=False)
    return text


def _kept_spans(s: str) -> list[str]:
    """``s`` split into [free, kept, free, kept, ...]: kept = remembered reader texts."""
    hits = sorted({(s.find(t), t) for t in _VERBATIM if t in s}, key=lambda h: (h[0], -len(h[1])))
    parts, pos = [], 0
    for _start, t in hits:
        at = s.find(t, pos)
        if at < 0:
            continue
        parts += [s[pos:at], t]
        pos = at + len(t)
    return [*parts, s[pos:]]


_FIGURE_TEXT_KEYS = frozenset(
    {"text", "title", "name", "hovertemplate", "ticktext", "texttemplate"}
)
_DATA_KEYS = frozenset({"customdata", "hovertext", "x", "y", "z", "base", "ids", "labels"})


class Translator:
    """English -> Chinese by phrase table (later tables override earlier ones)."""

    def __init__(self, *tables: Mapping[str, str]) -> None:
        merged: dict[str, str] = {}
        for t in tables:
            merged.update(t)
        self.table = merged
        keys = sorted(merged, key=len, reverse=True)
        self._re = re.compile("|".join(_boundary(k) for k in keys)) if keys else None

    def text(self, s: str) -> str:
        if not s or self._re is None:
            return s
        out = []
        for j, chunk in enumerate(_kept_spans(s)):
            if j % 2:  # a reader's text
                out.append(chunk)
                continue
            parts = _PROTECTED.split(chunk)
            for i in range(0, len(parts), 2):  # odd indices are the protected spans
                parts[i] = self._re.sub(lambda m: self.table[m.group(0)], parts[i])
            out.append("".join(parts))
        return "".join(out)

    def _walk(self, node: Any, key: str | None, whole: Mapping[str, str]) -> Any:
        """Translate the strings under text-like keys (titles, names, annotation texts);
        ``whole``: exact sentences the figure carries its own Chinese for."""
        if isinstance(node, dict):
            return {k: v if k in _DATA_KEYS else self._walk(v, k, whole) for k, v in node.items()}
        if isinstance(node, list):
            return [self._walk(v, key, whole) for v in node]
        if isinstance(node, str) and key in _FIGURE_TEXT_KEYS:
            return whole[node] if node in whole else self.text(node)
        return node

    def figure(self, fig: go.Figure) -> go.Figure:
        d = fig.to_dict()
        meta = d.get("layout", {}).get("meta")
        whole = meta.get("zh", {}) if isinstance(meta, dict) else {}
        layout = self._walk(d.get("layout", {}), None, whole)
        data = [self._trace(t, whole) for t in d.get("data", [])]
        return go.Figure({"data": data, "layout": layout}, skip_invalid=True)

    def _trace(self, t: dict, whole: Mapping[str, str]) -> dict:
        """A trace: its name, hover template and colour bar; its text/customdata are data."""
        keep = ("name", "hovertemplate", "legendgrouptitle", "colorbar", "marker")
        return {k: self._walk(v, k, whole) if k in keep else v for k, v in t.items()}

    def value(self, v: Any) -> Any:
        """A callback output (or a tuple of them) in Chinese."""
        if isinstance(v, go.Figure):
            return self.figure(v)
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        if isinstance(v, str):
            return v if os.path.isabs(v) else self.text(v)
        if isinstance(v, dict) and v.get("__type__") == "update":
            out = dict(v)
            if "value" in out and isinstance(out["value"], (str, go.Figure)):
                out["value"] = self.value(out["value"])
            if isinstance(out.get("label"), str):
                out["label"] = self.text(out["label"])
            if isinstance(out.get("choices"), list):
                out["choices"] = [self._choice(c) for c in out["choices"]]
            return out
        return v

    def _choice(self, c: Any) -> Any:
        if isinstance(c, (tuple, list)) and len(c) == 2:
            return (self.text(str(c[0])), c[1])
        if isinstance(c, str):
            return (self.text(c), c)
        return c


def is_zh(language: object) -> bool:
    return language == ZH_LANG


def localized(fn: Callable[..., Any], tr: Translator) -> Callable[..., Any]:
    """``fn`` plus a ``language`` input (wire the header's switch as the LAST input before any
    ``gr.Progress`` parameter, i.e. after ``fn``'s own inputs); outputs are translated for 中文.
    The signature Gradio sees (and the API listing shows) gains ``language``."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    special = [p for p in params if isinstance(p.default, gr.Progress)]
    plain = [p for p in params if p not in special]
    n_plain = len(plain)
    lang_param = inspect.Parameter(
        "language", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="English", annotation=str
    )
    new_sig = sig.replace(parameters=[*plain, lang_param, *special])

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args_l = list(args)
        language = kwargs.pop("language", None)
        if language is None and len(args_l) > n_plain:
            language = args_l.pop(n_plain)
        out = fn(*args_l, **kwargs)
        return tr.value(out) if is_zh(language) else out

    wrapper.__signature__ = new_sig  # type: ignore[attr-defined]
    del wrapper.__wrapped__  # Gradio must see the new signature, not fn's
    return wrapper


_REDRAWN = (gr.Plot, gr.Markdown, gr.HTML, gr.Dataframe)
_STAMP = itertools.count(1)  # orders the kept outputs of different events (no clocks)


class Localizer:
    """The language switch for an app whose outputs come from a few events.

    ``loc.wrap(fn, outputs)`` returns ``(callback, outputs + [kept])``: the callback takes the
    language as its last input (before ``gr.Progress``), returns ``fn``'s outputs translated
    for 中文 and keeps the English ones in a per-session ``gr.State``. ``loc.finish()`` (after
    every ``wrap``) makes the switch redraw the kept figures / markdown in the chosen language
    without computing anything again; where two events wrote the same output, the later one
    wins. States, sliders and other inputs are never re-sent."""

    def __init__(self, radio: gr.Radio, tr: Translator) -> None:
        self.radio = radio
        self.tr = tr
        self._events: list[tuple[list[Any], gr.State]] = []
        self._initial: dict[int, tuple[Any, Any]] = {}

    def initial(self, component: Any, value: Any) -> None:
        """``component`` shows ``value`` (English) until an event writes it: the switch
        translates that placeholder too."""
        self._initial[id(component)] = (component, value)

    def wrap(self, fn: Callable[..., Any], outputs: list[Any]) -> tuple[Callable, list[Any]]:
        kept = gr.State(None)
        inner = localized(fn, self.tr)
        tr = self.tr

        @functools.wraps(inner)
        def callback(*args: Any, **kwargs: Any) -> Any:
            out = fn_outputs(fn, args, kwargs, inner.__signature__)  # type: ignore[attr-defined]
            language = out[0]
            eng = out[1]
            tup = eng if isinstance(eng, tuple) else (eng,)
            shown = tup
            if is_zh(language):  # a gr.Code output is program text (a log): never translated
                shown = tuple(
                    v if i < len(outputs) and isinstance(outputs[i], gr.Code) else tr.value(v)
                    for i, v in enumerate(tup)
                )
            return (*shown, (next(_STAMP), tup))

        callback.__signature__ = inner.__signature__  # type: ignore[attr-defined]
        with contextlib.suppress(AttributeError):
            del callback.__wrapped__
        self._events.append((outputs, kept))
        return callback, [*outputs, kept]

    def finish(self) -> None:
        comps: list[Any] = [c for c, _ in self._initial.values()]
        for outs, _ in self._events:
            for c in outs:
                if isinstance(c, _REDRAWN) and c not in comps:
                    comps.append(c)
        events = list(self._events)
        tr = self.tr
        initial = dict(self._initial)

        def redraw(language: str, *kept: Any) -> list[Any]:
            latest: dict[int, tuple[int, Any]] = {}
            for (outs, _), k in zip(events, kept):
                if not k:
                    continue
                stamp, values = k
                for c, v in zip(outs, values):
                    i = id(c)
                    if c in comps and (i not in latest or latest[i][0] < stamp):
                        latest[i] = (stamp, v)
            res = []
            for c in comps:
                if id(c) not in latest and id(c) in initial:
                    latest[id(c)] = (0, initial[id(c)][1])
                if id(c) not in latest:
                    res.append(gr.skip())
                    continue
                v = latest[id(c)][1]
                res.append(tr.value(v) if is_zh(language) else v)
            return res

        if comps:
            self.radio.change(
                redraw,
                [self.radio, *(k for _, k in events)],
                comps,
                api_visibility="private",
                show_progress="hidden",
            )


def fn_outputs(
    fn: Callable[..., Any], args: tuple, kwargs: dict, sig: inspect.Signature
) -> tuple[Any, Any]:
    """Call ``fn`` with the wrapper's arguments minus ``language``: (language, outputs)."""
    arguments = dict(sig.bind(*args, **kwargs).arguments)
    language = arguments.pop("language", "English")
    return language, fn(**arguments)


__all__ = [
    "COMMON",
    "Localizer",
    "Translator",
    "ZH_LANG",
    "is_zh",
    "localized",
    "verbatim",
]
