"""Messages every page shares: input validation, the CSV buttons, the title line, a core refusal."""

from __future__ import annotations

from words.catalog import Catalog

COMMON = Catalog(
    "common",
    {
        # validation (apps.ui.checks): {name} is the field, a message of the app's catalog
        "must_int": (
            "{name} must be an integer in [{lo}, {hi}], got {got}",
            "{name}必须是 [{lo}, {hi}] 内的整数，收到 {got}",
        ),
        "must_number": (
            "{name} must be a number in [{lo}, {hi}], got {got}",
            "{name}必须是 [{lo}, {hi}] 内的数，收到 {got}",
        ),
        "must_choice": (
            "{name} must be one of {choices}, got {got}",
            "{name}必须是 {choices} 之一，收到 {got}",
        ),
        "empty_field": ("an empty field", "空白输入"),
        "invalid": ("invalid value", "无效的值"),
        # a kda_core ValueError: its own (English) sentence, inside one in the page's language
        "core_refused": ("{message}", "输入被拒绝，计算代码的原话是：“{message}”"),
        # every figure's CSV button names its figure
        "csv": ("Download CSV ({figure})", "下载 CSV（{figure}）"),
        "h1": ("# {title}", "# {title}"),
    },
)

__all__ = ["COMMON"]
