"""The trace panel's explanation of one request in words (English / 中文): ``WHY``, a base of
``words.trace_hits.HITS``: one sentence per part of the token match
(``studies.hit_requests.EngineExplanation.parts``, keys ``why_<part>``) and what took an evicted
state (``took_<reason>``); ``apps/panels/trace_hits_view.py`` assembles them."""

from __future__ import annotations

from words.catalog import Catalog

_BUDGET_TOOK = {
    "evicted_state_budget": ("the state budget evicted it", "状态预算驱逐了它"),
    "evicted_kv_budget": ("the KV budget evicted its prefix", "KV 预算驱逐了它的前缀"),
    "evicted_unified_budget": ("the unified budget evicted it", "统一预算驱逐了它"),
    "host_last_state_only": (
        "the device evicted it and the host holds only each request's last state, none here",
        "设备驱逐了它，而 host 只保存每个请求最后的状态，这里没有",
    ),
    "evicted_host_budget": (
        "the device evicted it and the host's capacity evicted its copy",
        "设备驱逐了它，host 的容量又驱逐了它的副本",
    ),
}
# one sentence per part of the token match (EngineExplanation.parts), from the facts
_WHY = {
    "first": ("no earlier request shares its first block.", "没有更早的请求与它共享第一个块。"),
    "restored": (
        "restores {n:,} tokens from the state request {src} saved.",
        "从请求 {src} 保存的状态恢复 {n:,} 个 token。",
    ),
    "restored_any": (
        "restores {n:,} tokens from a saved state.",
        "从一个已保存的状态恢复 {n:,} 个 token。",
    ),
    "nothing": ("restores nothing.", "没有可恢复的状态。"),
    "more": (
        "With these budgets an earlier request restored less and saved a state here that the "
        "run without budgets does not have (it restores {full:,}).",
        "在这些预算下，更早的某个请求恢复得更少，因而在这里保存了一个不设预算时没有的状态"
        "（不设预算时恢复 {full:,}）。",
    ),
    "evicted": (
        "Without budgets it would restore {full:,}, from a state request {src} saved: {took} "
        "({n:,} more tokens to compute).",
        "不设预算时它会从请求 {src} 保存的状态恢复 {full:,}：{took}（多算 {n:,} 个 token）。",
    ),
    "gap_past": (
        "No state in the next {n:,} shared tokens (up to {grid:,}, the deepest grid point it "
        "can reuse): the nearest deeper state on this path, at {q:,} (saved by request {k}), "
        "lies past the {match:,} tokens this request shares.",
        "接下来共享的 {n:,} 个 token 中没有状态（直到它可复用的最深网格点 {grid:,}）：这条路径"
        "上更深的最近状态在 {q:,}（由请求 {k} 保存），位于本请求共享的 {match:,} 个 token 之后。",
    ),
    "gap_last": (
        "No state in the next {n:,} shared tokens (up to {grid:,}, the deepest grid point it "
        "can reuse): the nearest deeper state, at {q:,} (saved by request {k}), ends the prompt, "
        "and the lookup covers at most input − 1 tokens.",
        "接下来共享的 {n:,} 个 token 中没有状态（直到它可复用的最深网格点 {grid:,}）：更深的"
        "最近状态在 {q:,}（由请求 {k} 保存），正好在提示词末尾，而查找最多只覆盖输入 − 1 个 "
        "token。",
    ),
    "gap_none": (
        "No state in the next {n:,} shared tokens (up to {grid:,}, the deepest grid point it "
        "can reuse): no earlier request saved a state on this path past {at:,} (request {j} "
        "was the first to share these {match:,} tokens).",
        "接下来共享的 {n:,} 个 token 中没有状态（直到它可复用的最深网格点 {grid:,}）：没有更早"
        "的请求在这条路径上 {at:,} 之后保存过状态（请求 {j} 最先共享这 {match:,} 个 token）。",
    ),
    "below": (
        "The last {n:,} reusable tokens are short of one grid unit ({unit:,} tokens).",
        "最后 {n:,} 个可复用的 token 不足命中网格的一个单位（{unit:,} 个 token）。",
    ),
    "last": (
        "The prompt's last token is recomputed for its logits (the lookup covers at most "
        "input − 1 tokens).",
        "提示词的最后一个 token 要为其 logits 重新计算（查找最多覆盖输入 − 1 个 token）。",
    ),
}
WHY = Catalog(
    "trace_hits_why",
    {
        **{f"why_{k}": v for k, v in _WHY.items()},
        **{f"took_{k}": v for k, v in _BUDGET_TOOK.items()},
    },
)

__all__ = ["WHY"]
