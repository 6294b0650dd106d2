"""中文 for everything an app draws: figures, tables, step text, radio options, accordions.

The studies return data and the apps build English figures and text from it; this module
translates the *finished* outputs with a phrase table (English phrase -> Chinese), so a figure
maker stays one function and a translation is one table entry.

    TR = Translator(COMMON, {"Token timeline": "Token 时间线", ...})   # per app
    TR.text("Pools after each request")      -> "每个请求之后的池"
    TR.figure(fig)                            -> a translated copy (titles, axis titles,
                                                 legend names, annotations, hover templates,
                                                 tick labels, colour-bar titles)
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

import functools
import inspect
import os
import re
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
    """A phrase matched whole: no ASCII letter directly before / after an ASCII end."""
    p = re.escape(phrase)
    if phrase[:1].isascii() and phrase[:1].isalnum():
        p = r"(?<![A-Za-z])" + p
    if phrase[-1:].isascii() and phrase[-1:].isalnum():
        p += r"(?![A-Za-z])"
    return p


_MARK = "\u2063"  # INVISIBLE SEPARATOR: brackets text that must not be translated
_PROTECTED = re.compile(r"(%\{[^}]*\}|<[^>]*>|`[^`]*`|\u2063[^\u2063]*\u2063)")


def verbatim(text: str) -> str:
    """``text`` (the reader's own prompt, say) marked so that no phrase inside it is
    translated; the marks are invisible."""
    return f"{_MARK}{text.replace(_MARK, '')}{_MARK}"


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
        parts = _PROTECTED.split(s)
        for i in range(0, len(parts), 2):  # odd indices are the protected spans
            parts[i] = self._re.sub(lambda m: self.table[m.group(0)], parts[i])
        return "".join(parts)

    def _walk(self, node: Any, key: str | None) -> Any:
        """Translate the strings under text-like keys (titles, names, annotation texts)."""
        if isinstance(node, dict):
            return {k: v if k in _DATA_KEYS else self._walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [self._walk(v, key) for v in node]
        if isinstance(node, str) and key in _FIGURE_TEXT_KEYS:
            return self.text(node)
        return node

    def figure(self, fig: go.Figure) -> go.Figure:
        d = fig.to_dict()
        layout = self._walk(d.get("layout", {}), None)
        data = [self._trace(t) for t in d.get("data", [])]
        return go.Figure({"data": data, "layout": layout}, skip_invalid=True)

    def _trace(self, t: dict) -> dict:
        """A trace: its name, hover template and colour bar; its text/customdata are data."""
        keep = ("name", "hovertemplate", "legendgrouptitle", "colorbar", "marker")
        return {k: self._walk(v, k) if k in keep else v for k, v in t.items()}

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


__all__ = ["COMMON", "Translator", "ZH_LANG", "is_zh", "localized", "verbatim"]
