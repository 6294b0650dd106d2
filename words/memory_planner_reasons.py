"""memory_planner's log reader's sentences in words (English / 中文): ``REASON_MSG``, a base of
``words.memory_planner_engines.ENGINE_MSG``, one message ``r_<key>`` per sentence the reader
returns (a ``sizing`` ``Reason``: its key and numbers). The English of each key is the reader's
own (``sizing.logread`` ``REASONS``); the 中文 here says the same with the same numbers. Flags, log
lines and strategy names stay as the engines spell them (code spans)."""

from __future__ import annotations

from kda_core.sizing.logread import REASONS
from words.catalog import Catalog

_ZH: dict[str, str] = {
    "state_slots": "{slots} 个状态槽 / 每请求预留 {spr} 个 = 最多 {cap} 个并发请求："
    "并发受限于状态槽",
    "state_slots_range": "{cap} 个并发请求 = 槽数 // {spr}，槽数在 {lo} 到 {hi} 之间："
    "并发受限于状态槽",
    "kv_tokens": "KV 池已满而状态槽仍有空闲：并发受限于 KV token",
    "kv_reduced": "{tokens} 个 KV token // 2 = {cap}：并发受限于 KV token",
    "request_pool": "请求数上限（{bound}）先于状态槽（{cap}）起作用",
    "other_model": "日志里的数字与 `{model}` 对不上：确定是这个模型吗？",
    "names_other": "日志写的模型是 `{name}`，不是 `{model}`：确定是这个模型吗？",
    "nothing_known": "粘贴的内容里没有读取器认识的行（跳过 {skipped} 行）",
    "unknown": "粘贴的内容没有说明并发受什么限制",
    "vllm_max_num_seqs": "已达到 `max_num_seqs`（{seqs}），而 KV 块还没用满",
    "vllm_prefix_inert": "注意力块被调大到 {block} 个 token，提示至少要 {hit} 个 token "
    "才能命中前缀缓存；能放下 {conc} 个长 {length} token 的请求",
    "vllm_kv_tokens": "{blocks} 个块能放下 {conc} 个长 {length} token 的请求",
    "seen": "实际：{running} 个运行中",
    "seen_waiting": "{waiting} 个排队",
    "seen_kv": "KV 池已用 {kv}",
    "seen_at_cap": "（已到上限）",
    "seen_hits": "前缀缓存命中 {hits} 的查询 token",
    "needs_slots": "槽数需要 `Mamba Cache is allocated` 行或限流行，"
    "或每批次的 `mamba num` 与 `mamba usage`",
    "needs_tp": "TP 需要 `Mamba Cache is allocated` 行或 `server_args` 回显（按 TP {tp} 计算）",
    "needs_spr": "每请求槽数需要限流行或策略参数（按 SGLang 默认的 {spr} 计算）",
    "needs_budget": "显存预算需要 `Mamba Cache is allocated` 与 `KV Cache is allocated` 两行",
    "needs_dtype": "状态精度需要 `Mamba Cache is allocated` 行（按 SGLang 默认的 {dtype} 计算）",
    "needs_blocks": "块数需要 `GPU KV cache size` 行或 `Available KV cache memory` 行",
    "needs_requested": "粘贴的内容里没有请求的 `--max-running-requests`",
    "needs_running": "实际的 `max_running_requests` 需要限流行或 `max_total_num_tokens=` 行",
    "cut": "这一行在数字之前被截断了（一行 `{what}`）",
    "running": "请求 {requested}，实际 {effective}",
    "running_effective": "实际 {effective}（粘贴的内容里没有请求值）",
    "bound_state": "状态缓存：{slots} 个槽 // 每请求 {spr} 个 = {cap}",
    "bound_state_range": "状态缓存：{cap} = 槽数 // {spr}，槽数在 {lo} 到 {hi} 之间",
    "bound_kv": "KV 池：{tokens} 个 token // 2 = {cap}",
    "bound_cli": "命令行上限 `--max-running-requests {cap}`",
    "bound_pool": "请求池：{tokens} 个 token / 上下文 {context} × 512 = {cap}",
    "won_state": "起作用的是状态缓存",
    "won_kv": "起作用的是 KV 池",
    "won_cli": "起作用的是 `--max-running-requests` 上限",
    "won_pool": "起作用的是请求池",
    "bound_graph": "不是 CUDA 图：SGLang 按 `max_running_requests` 截取 CUDA 图的批大小，"
    "而不是反过来",
    "target": "目标 {target} 个并发请求",
    "target_default": "未给目标：按 {target}（上限的两倍）计算",
    "target_requested": "未给目标：按请求的 {target} 计算",
    "sized_for": "{slots} 个槽 = {target} × {k}：按每请求 {k} 个槽（`{which}`）配置，"
    "而服务器每请求预留 {spr} 个（`{reserving}`）：{slots} // {spr} = {cap}",
    "fix_split": "{slots} 个槽 → 上限 {cap}，{tokens} 个 KV token",
    "fix_cap": "上限 {cap}",
    "fix_none": "没有哪个值能达到：整个预算只放得下 {slots} 个槽",
    "cost_kv": "KV token 数 {before} → {after}",
    "cost_kv_none": "KV 池一点不剩：SGLang 无法启动",
    "cost_kv_unknown": "KV token：粘贴的内容定不出显存预算",
    "cost_bf16": "递推状态用 bfloat16（SGLang 默认 float32）",
    "cost_lazy": "第二个跟踪槽在跟踪边界才分配，而不是预先分配（需要重叠调度）",
    "cost_skip": "实验性：`SGLANG_OPT_` 环境变量",
    "cost_radix_off": "完全没有前缀缓存",
    "cost_rest": "各项修改按 {slots} 个槽在比例 {ratio} 下对应的显存预算计算",
    "cost_drafts": "各项修改未计入投机解码的缓冲区（未重算）",
    "held": "每个运行中的请求占用 {held} 个槽（{samples} 个批次的 `mamba num` / `#running-req`）；"
    "调度器预留 {spr} 个：在上限 {cap} 时，{slots} 个槽中有 {free} 个（{share}）空闲",
    "held_pattern": "预留 {spr} 个：`{reserving}`；预留 {held} 个：`{matching}`",
    "vllm_bf16": "块大小 {block}，并发 {conc}x",
    "vllm_seqs_start": "可以启动（每个序列一个 mamba 块）",
    "vllm_more_seqs": "满长度时最多 {conc}",
    "vllm_mamba_block": "对齐模式下无效：vLLM 0.33 把它设为块大小",
}

REASON_MSG = Catalog("memory_planner_reasons", {f"r_{k}": (REASONS[k], _ZH[k]) for k in REASONS})


__all__ = ["REASON_MSG"]
