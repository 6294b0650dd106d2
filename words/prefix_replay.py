"""prefix_replay in words (English / 中文): what the static figure ``plots/plot_prefix_replay.py``
says (keys ``fig_*``) and a scenario's title (``scen_<name>``, the codes of
``kda_core.studies.prefix_replay.SCENARIOS``). Its terms are the page's (token 匹配点,
停放的检查点); the page's own words join here from ``apps.text.prefix_replay``."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_SCENARIOS: dict[str, tuple[str, str]] = {
    "scen_system_tools_branches": (
        "System prompt + tools, two user branches",
        "系统提示 + 工具，两个用户分支",
    ),
    "scen_multi_turn": ("Multi-turn chat (English and Chinese)", "多轮对话（中英文）"),
    "scen_long_document": ("Long document, several questions", "长文档，多个问题"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "A token hit is not a state hit: restore, replay, then prefill",
        "token 命中不等于状态命中：恢复、重放，再预填充",
    ),
    "fig_title_tl": (
        "{title}: a checkpoint every {k} tokens",
        "{title}：每 {k} 个 token 一个检查点",
    ),
    "fig_turn": ("turn {i}", "第 {i} 轮"),
    "fig_tokens": ("position in the conversation (tokens)", "对话中的位置（token）"),
    "fig_replay_x": (
        "token position (tokens): replay {r} → {m}",
        "token 位置（token）：重放 {r} → {m}",
    ),
    "fig_restore": ("restored from a checkpoint", "从检查点恢复"),
    "fig_replay": ("replayed (checkpoint → token match)", "重放（检查点 → token 匹配点）"),
    "fig_prefill": ("prefilled", "预填充"),
    "fig_decode": ("decoded", "解码"),
    "fig_ckpt": ("checkpoint parked", "停放的检查点"),
    "fig_match": ("token match", "token 匹配点"),
    "fig_row": ("restore {r} · match {m}", "恢复 {r} · 匹配 {m}"),
    "fig_title_dist": (
        "Turn {i}: replay reaches the uncached state",
        "第 {i} 轮：重放到达未缓存状态",
    ),
    "fig_dist": ("relative distance of all KDA states", "全部 KDA 状态的相对距离"),
    "fig_title_drift": (
        "Turn {i}: logits vs an uncached run",
        "第 {i} 轮：与未缓存运行的 logit 差",
    ),
    "fig_gen": ("generated token", "生成的 token"),
    "fig_diff": ("max |Δ logit|", "max |Δ logit|"),
    "fig_exact": ("exact restore + replay", "精确恢复 + 重放"),
    "fig_int8": ("INT8 checkpoint + replay", "INT8 检查点 + 重放"),
    "fig_bad": (
        "MLA at match, KDA at checkpoint, no replay",
        "MLA 在匹配点、KDA 在检查点、不重放",
    ),
    "fig_source": (
        "Data: the lab's caching engine serving TinyHybrid (trained k3-mini, greedy "
        "decoding), a checkpoint every {k} tokens",
        "数据：本实验室的缓存引擎运行 TinyHybrid（训练后的 k3-mini，贪心解码），"
        "每 {k} 个 token 一个检查点",
    ),
}
MSG = Catalog("prefix_replay", {**_SCENARIOS, **_FIGURES}, COMMON)

__all__ = ["MSG"]
