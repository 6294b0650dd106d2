"""The trace panel in words (English / 中文), one catalog for the panel and the static figures
``plots/plot_hit_reasons.py`` and ``plots/plot_kv_page_coverage.py``. ``HITS``: what the panel
(``apps/panels/trace_hits.py``, in checkpoint_density and state_transfer) says, a hit reason's
code worded (``r_<reason>``, ``kda_core.studies.hit_reasons.REASONS``) and the coverage legend,
which the figures say too; its base ``words.trace_hits_why.WHY`` explains one request. ``MSG``:
``HITS`` plus what only the static figures say (keys ``fig_*``)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON
from words.trace_hits_why import WHY

_SHARED: dict[str, tuple[str, str]] = {  # the panel's and the figures'
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
_PANEL: dict[str, tuple[str, str]] = {
    "acc_hits": (
        "Your trace: why a request got no hit, SGLang vs vLLM",
        "你的 trace：请求为何没有命中，SGLang 与 vLLM 对比",
    ),
    "hits_intro": (
        "Upload a trace (Mooncake / aiperf JSONL, BurstGPT or Azure CSV, token ids, "
        "conversations, SGLang's generated-shared-prefix settings) or keep the bundled one. "
        "For every request: the cached tokens SGLang 0.5.23 and vLLM 0.33 (align mode) would "
        "report for Kimi K3 at TP8, and when that is at most half of what it shares with "
        "earlier requests, the reason. Click a row of the table to explain that request.",
        "上传一个 trace（Mooncake / aiperf JSONL、BurstGPT 或 Azure CSV、token id、多轮对话、"
        "SGLang 的共享前缀生成设置），或使用内置 trace。对每个请求：SGLang 0.5.23 和 "
        "vLLM 0.33（对齐模式）在 Kimi K3、TP8 下会报告的缓存 token 数；当它不超过与更早请求"
        "共享部分的一半时，给出原因。点击表格中的一行即可查看该请求的解释。",
    ),
    "f_hits_file": (
        "Trace file (at most {mib} MiB, {n:,} requests; none = the bundled trace)",
        "trace 文件（最多 {mib} MiB、{n:,} 个请求；不传 = 内置 trace）",
    ),
    "f_hits_format": ("File format", "文件格式"),
    "fmt_auto": ("detect from the first line", "根据第一行自动识别"),
    "fmt_mooncake": ("Mooncake / aiperf JSONL", "Mooncake / aiperf JSONL"),
    "fmt_burstgpt": ("BurstGPT CSV", "BurstGPT CSV"),
    "fmt_azure": ("Azure LLM inference CSV", "Azure LLM 推理 CSV"),
    "fmt_token-ids": ("token-id JSONL", "token id JSONL"),
    "fmt_conversations": ("conversation JSONL", "多轮对话 JSONL"),
    "fmt_sglang-gsp": (
        "SGLang generated-shared-prefix settings (JSON)",
        "SGLang 共享前缀生成设置（JSON）",
    ),
    "f_hits_skip": (
        "Skip malformed rows (counted and reported) instead of refusing the file",
        "跳过格式错误的行（计数并报告），而不是拒绝整个文件",
    ),
    "f_hits_block": (
        "Block size of token-id / conversation files (tokens, 16-4096)",
        "token id / 对话文件的块大小（token，16-4096）",
    ),
    "f_hits_budget": (
        "State budget (GiB per GPU, 0 = unlimited)",
        "状态显存预算（每卡 GiB，0 = 不限）",
    ),
    "b_hits": ("Analyse the trace", "分析 trace"),
    "v_hits_format": ("file format", "文件格式"),
    "v_hits_block": ("block size", "块大小"),
    "v_hits_budget": ("state budget (GiB)", "状态显存预算（GiB）"),
    "e_hits_big": (
        "the trace file is {size} MiB; the upload cap is {cap} MiB",
        "trace 文件有 {size} MiB，上传上限是 {cap} MiB",
    ),
    "e_hits_format_none": (
        "{name}: line {line} looks like none of the formats this panel reads: choose the "
        "file's format in File format",
        "{name}：第 {line} 行不像本面板能读的任何一种格式：请在“文件格式”中选择这个文件的格式",
    ),
    "e_hits_format_two": (
        "{name}: line {line} fits more than one format ({fits}): choose one in File format",
        "{name}：第 {line} 行符合不止一种格式（{fits}）：请在“文件格式”中选一个",
    ),
    "e_hits_no_rows": (
        "{name}: no row reads as {fmt} ({rows} skipped: {reasons}); is File format right?",
        "{name}：没有一行能按 {fmt} 读取（跳过了 {rows}：{reasons}）；“文件格式”选对了吗？",
    ),
    "n_requests": ("{n:,} requests", "{n:,} 个请求"),
    "n_request": ("1 request", "1 个请求"),
    "n_bad_rows": ("{n:,} malformed rows", "{n:,} 个格式错误的行"),
    "n_bad_row": ("1 malformed row", "1 个格式错误的行"),
    "n_rows": ("{n:,} rows", "{n:,} 行"),
    "n_row": ("1 row", "1 行"),
    "e_hits_missing": (
        "the uploaded file is gone; upload it again",
        "上传的文件已不存在，请重新上传",
    ),
    "bundled": (
        "bundled Mooncake conversation trace, first {n:,} requests",
        "内置 Mooncake 对话 trace，前 {n:,} 个请求",
    ),
    "s_hits_head": (
        "**{name}** ({fmt}): {count}, block {block:,} tokens; Kimi K3 at TP8, SGLang "
        "checkpoint grid {sg:,} tokens, vLLM block {vb:,} tokens; state budget {budget}",
        "**{name}**（{fmt}）：{count}，块大小 {block:,} 个 token；Kimi K3、TP8，SGLang "
        "检查点网格 {sg:,} 个 token，vLLM 块大小 {vb:,} 个 token；状态显存预算 {budget}",
    ),
    "budget_none": ("unlimited", "不限"),
    "budget_gib": ("{gib:g} GiB per GPU", "每卡 {gib:g} GiB"),
    "s_hits_skipped": (
        "**{rows} skipped**; the first reasons:",
        "**跳过了 {rows}**；前几条原因：",
    ),
    "s_hits_rate": (
        "Cached / input tokens: SGLang **{sg:.1%}**, vLLM **{vl:.1%}** (an unlimited KV "
        "cache would reuse {ideal:.1%}).",
        "缓存 / 输入 token：SGLang **{sg:.1%}**，vLLM **{vl:.1%}**（不限容量的 KV 缓存可复用 "
        "{ideal:.1%}）。",
    ),
    "s_hits_lengths": (
        "**This file gives lengths only** ({fmt}, {count}, mean input {mi:,.0f} "
        "tokens, mean output {mo:,.0f}): it says nothing about which requests share a "
        "prefix, so **hit reasons and the page coverage cannot be computed from it**. "
        "Nothing below is drawn for it.",
        "**这个文件只给出长度**（{fmt}，{count}，平均输入 {mi:,.0f} 个 token，平均输出 "
        "{mo:,.0f} 个）：它没有说明哪些请求共享前缀，因此**无法据此计算未命中原因和页面覆盖率**"
        "。下面不为它绘制任何内容。",
    ),
    "th_request": ("request", "请求"),
    "th_input": ("input", "输入"),
    "th_match": ("shared", "共享"),
    "th_sg": ("SGLang cached", "SGLang 缓存"),
    "th_sg_reason": ("SGLang reason", "SGLang 原因"),
    "th_vl": ("vLLM cached", "vLLM 缓存"),
    "th_vl_reason": ("vLLM reason", "vLLM 原因"),
    "table_label": (
        "At most {n} requests, those that lose the most first (click a row)",
        "最多 {n} 个请求，损失最多的在前（点击一行）",
    ),
    "x_pick": (
        "Click a row of the table to explain that request.",
        "点击表格中的一行，查看该请求的解释。",
    ),
    "x_head": (
        "**Request {i}**: {input:,} input tokens; the longest prefix an earlier request "
        "shares is {match:,} tokens ({blocks:,} blocks of {block:,}); {branch}.",
        "**请求 {i}**：输入 {input:,} 个 token；与更早请求共享的最长前缀为 {match:,} 个 token"
        "（{blocks:,} 个 {block:,} token 的块）；{branch}。",
    ),
    "x_branch": (
        "there the prefix had already branched or an earlier prompt ended",
        "前缀在那里早已分叉，或有更早的提示词在那里结束",
    ),
    "x_nobranch": (
        "no earlier request had a node boundary there",
        "更早的请求在那里没有节点边界",
    ),
    "x_th": (
        "| tokens of the shared prefix | SGLang | vLLM |",
        "| 共享前缀的 token | SGLang | vLLM |",
    ),
    "x_unit": ("hit grid unit", "命中网格单位"),
    "x_restored": ("restored from a saved state (cached)", "从已保存的状态恢复（缓存）"),
    "x_evicted": (
        "+ taken by a budget (restored without budgets)",
        "+ 被预算拿走（不设预算时可恢复）",
    ),
    "x_no_state": (
        "+ no state up to the deepest reusable grid point",
        "+ 直到最深可复用网格点都没有状态",
    ),
    "x_below_unit": ("+ reusable, short of one grid unit", "+ 可复用但不足一个网格单位"),
    "x_last_token": (
        "+ the last prompt token (lookup ≤ input − 1)",
        "+ 提示词最后一个 token（查找 ≤ 输入 − 1）",
    ),
    "x_sum": ("= the shared prefix", "= 共享前缀"),
    "x_reason": ("reason", "原因"),
    "x_why": ("**{engine}**: {why}", "**{engine}**：{why}"),
    "t_hits_reasons": (
        "Why requests got no hit: SGLang vs vLLM (requests: {n:,})",
        "请求为何没有命中：SGLang 与 vLLM（请求数：{n:,}）",
    ),
    "hits_requests": ("share of requests", "请求占比"),
    "hits_tokens": ("share of the uncached tokens", "未缓存 token 占比"),
    "h_hits_share": ("{engine}<br>{reason}<br>{y}", "{engine}<br>{reason}<br>{y}"),
    "t_hits_none": ("No hit reasons for a lengths-only trace", "只有长度的 trace 无法给出原因"),
    "hits_none": (
        "the file does not say which requests share a prefix",
        "文件没有说明哪些请求共享前缀",
    ),
    "t_cov": (
        "Share of resident KV pages whose prefix has a state (device {d} states, SGLang)",
        "前缀带有状态的常驻 KV 页占比（设备 {d} 个状态，SGLang）",
    ),
    "x_cov": (
        "HiCache host ratio (host state slots = ratio × device + 1)",
        "HiCache host 比例（host 状态槽 = 比例 × 设备 + 1）",
    ),
    "y_cov": ("share of resident KV pages", "常驻 KV 页占比"),
    "h_cov": (
        "{name}<br>ratio {x}: {slots} host slots ({gib} GiB)<br>{y} of {pages} pages",
        "{name}<br>比例 {x}：{slots} 个 host 槽（{gib} GiB）<br>{pages} 页中的 {y}",
    ),
    "n_hits_reasons": ("reason breakdown", "原因分布"),
    "n_hits_cov": ("KV pages with a state", "带状态的 KV 页"),
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
HITS = Catalog("trace_hits", {**_SHARED, **_PANEL}, WHY)
MSG = Catalog("trace_hits", _FIGURES, HITS, COMMON)

__all__ = ["HITS", "MSG"]
