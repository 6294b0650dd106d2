"""memory_planner in words (English / 中文): what the static figure
``plots/plot_k3_memory_vs_context.py`` says (keys ``fig_*``; the crossover it marks is the one
the page prints); the page's own words join here from ``apps.text.memory_planner``."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_FIGURES: dict[str, tuple[str, str]] = {
    "fig_title": (
        "Kimi K3: one request's memory vs context length",
        "Kimi K3：单个请求的显存与上下文长度",
    ),
    "fig_x": ("context length (tokens)", "上下文长度（token）"),
    "fig_y": ("bytes per request", "每个请求的字节数"),
    "fig_mla": ("MLA latent KV (grows with every token)", "MLA 潜在 KV（每个 token 都增长）"),
    "fig_kda": (
        "KDA state slot: recurrent states + conv windows (flat)",
        "KDA 状态槽：递推状态 + 卷积窗口（恒定）",
    ),
    "fig_cross": ("MLA > KDA from {n:,} tokens", "从 {n:,} 个 token 起 MLA > KDA"),
    "fig_source": (
        "Data: model config sizes · {model} per GPU at TP{tp} · KV, state, conv in {dtype}",
        "数据：模型配置尺寸 · {model} 每卡，TP{tp} · KV、状态与卷积均为 {dtype}",
    ),
    "fig_end_mla": ("{b} at {n:,} tokens", "{n:,} 个 token 时 {b}"),
    "fig_end_kda": ("{b} at any length", "任意长度均为 {b}"),
}
MSG = Catalog("memory_planner", _FIGURES, COMMON)

__all__ = ["MSG"]
