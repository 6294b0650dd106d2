"""The trace panel's words that its figures and the static figures ``plots/plot_hit_reasons.py``
and ``plots/plot_kv_page_coverage.py`` share (English / 中文): a hit reason's code worded
(``r_<reason>``, ``kda_core.studies.hit_reasons.REASONS``), the coverage legend, and what only
the static figures say (keys ``fig_*``). The panel's own catalog (``apps.text.trace_hits.HITS``)
says the same for every key both hold (tests/test_words.py) until it moves here."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_SHARED: dict[str, tuple[str, str]] = {
    "r_hit": ("hit (at least half the shared prefix)", "命中（至少共享前缀的一半）"),
    "r_first_occurrence": ("first occurrence", "首次出现"),
    "r_below_one_block": ("shared prefix < one block", "共享前缀不足一个块"),
    "r_state_in_unique_tokens": ("states in request-unique tokens", "状态落在请求独有的 token 中"),
    "r_no_state_at_branch": ("no state at the branch point", "分叉点没有状态"),
    "r_evicted_state_budget": ("evicted: state budget", "被状态预算驱逐"),
    "r_evicted_kv_budget": ("evicted: KV budget", "被 KV 预算驱逐"),
    "r_evicted_unified_budget": ("evicted: unified budget", "被统一预算驱逐"),
    "r_host_last_state_only": ("host holds last states only", "host 只存每个请求最后的状态"),
    "r_evicted_host_budget": ("evicted: host capacity", "被 host 容量驱逐"),
    "l_cov_device": ("state on the device", "状态在设备上"),
    "l_cov_host": ("state on the host", "状态在 host 上"),
    "l_cov_any": ("either", "任一处"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    # plot_hit_reasons
    "fig_suptitle": (
        "Why a request got no hit: SGLang vs vLLM on the same trace",
        "请求为何没有命中：同一 trace 上的 SGLang 与 vLLM",
    ),
    "fig_requests": ("share of requests", "请求占比"),
    "fig_tokens": ("share of the uncached tokens", "未命中输入 token 占比"),
    "fig_unlimited": ("no budget", "无预算"),
    "fig_budget": ("{gib:g} GiB states", "状态 {gib:g} GiB"),
    "fig_bar": ("{engine}, {budget}", "{engine}，{budget}"),
    "fig_source": (
        "Data: Mooncake conversation trace, first {n:,} requests; Kimi K3 TP8, vLLM "
        "block {vb} tokens; sequential replay",
        "数据：Mooncake 对话 trace 前 {n:,} 个请求；Kimi K3 TP8，vLLM 块 {vb} 个 token；顺序回放",
    ),
    # plot_kv_page_coverage
    "fig_cov_suptitle": (
        "Most resident KV pages have no state to resume from",
        "多数常驻 KV 页没有可恢复的状态",
    ),
    "fig_cov_pages": ("resident KV pages with a state", "带状态的常驻 KV 页占比"),
    "fig_cov_hit": ("state hit rate", "状态命中率"),
    "fig_cov_x": ("HiCache host ratio", "HiCache host 比例"),
    "fig_cov_source": (
        "Data: Mooncake conversation trace, first {n:,} requests ({pages:,} KV pages "
        "of 512 tokens); Kimi K3 TP8, SGLang, {d} device states of {ck}",
        "数据：Mooncake 对话 trace 前 {n:,} 个请求（{pages:,} 个 512 token 的 KV 页）"
        "；Kimi K3 TP8，SGLang，设备 {d} 个状态（每个 {ck}）",
    ),
}
MSG = Catalog("trace_hits", {**_SHARED, **_FIGURES}, COMMON)

__all__ = ["MSG"]
