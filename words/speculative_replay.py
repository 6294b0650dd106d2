"""speculative_replay in words (English / 中文): its hub card (the page's title and a line) and what
the static figure ``plots/plot_speculative_memory.py`` says (keys ``fig_*``); the page's own
words join here from ``apps.text.speculative_replay``."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_CARD: dict[str, tuple[str, str]] = {  # the hub card: the page's title and a line
    "title": ("Speculative replay", "投机解码重放"),
    "blurb": (
        "Verify D draft tokens, accept a prefix, commit exactly by replaying from the ring.",
        "验证 D 个草稿 token，接受前缀，从环形缓冲精确重放提交。",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "Speculative decoding: ReplaySSM rings vs a state per draft token",
        "推测解码：ReplaySSM 环形缓冲 vs 每个草稿 token 一份状态",
    ),
    "fig_title_req": (
        "One request, {model} per GPU (TP{tp}, {dtype})",
        "单个请求，{model} 每卡（TP{tp}，{dtype}）",
    ),
    "fig_d": ("draft tokens D", "草稿 token 数 D"),
    "fig_bytes": ("bytes per request", "每个请求的字节数"),
    "fig_rings": (
        "ReplaySSM rings (L = next pow2 ≥ 2D)",
        "ReplaySSM 环（L = 不小于 2D 的 2 的幂）",
    ),
    "fig_per_draft": ("D per-draft recurrent states", "D 份草稿递推状态"),
    "fig_conv": ("conv windows (both designs)", "卷积窗口（两种设计都需要）"),
    "fig_title_ratio": ("Per-draft states / rings", "草稿状态 / 环"),
    "fig_ratio": ("memory ratio", "显存比值"),
    "fig_title_deploy": ("Deployment: {slots} slots, D = {d}", "部署：{slots} 个槽，D = {d}"),
    "fig_deploy_rings": ("rings\n(every slot)", "环\n（每个槽）"),
    "fig_deploy_draft": ("per-draft states\n({n} running)", "草稿状态\n（{n} 个运行中）"),
    "fig_deploy_conv": ("conv windows\n({n} running)", "卷积窗口\n（{n} 个运行中）"),
    "fig_source": (
        "Data: buffer shapes of SGLang's speculative verify for {model} at TP{tp} "
        "and the lab's tiny model, {dtype}",
        "数据：SGLang 推测验证缓冲区的形状，{model}（TP{tp}）与实验室的小模型，{dtype}",
    ),
}
MSG = Catalog("speculative_replay", {**_CARD, **_FIGURES}, COMMON)

__all__ = ["MSG"]
