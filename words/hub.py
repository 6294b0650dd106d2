"""The hub's landing page in words (English / 中文, shown side by side): what the lab shows. Each
card's title and line are its app's (``title``, ``blurb`` of ``words.<name>``)."""

from __future__ import annotations

from words.catalog import Catalog

MSG = Catalog(
    "hub",
    {
        "intro": (
            "Kimi Delta Attention keeps a fixed-size state per request: a token prefix hit is "
            "not a state hit. Each app shows one consequence of that fact.",
            "KDA 为每个请求保存固定大小的状态：token 前缀命中不等于状态命中。"
            "每个应用展示这一事实的一个后果。",
        ),
    },
)

__all__ = ["MSG"]
