"""prefix_replay's batch view and pools panel in words (English / 中文): ``BATCH``, a base of
``words.prefix_replay.MSG`` (a batch phase's code ``pk_<phase>``, a pool kind's ``kind_<kind>``).
SGLang's own messages are shown as SGLang prints them (they are not in the catalog)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

BATCH = Catalog(
    "prefix_replay_batch",
    {
        "acc_batch": ("Batch view: several requests at once", "批处理视图：同时服务多个请求"),
        "f_b_text": (
            "Batch requests (one prompt per line, 1-{n} lines)",
            "批处理请求（每行一个提示词，1-{n} 行）",
        ),
        "f_b_arr": (
            "Arrival steps (one per request, 0-64; empty = all at step 0)",
            "到达步（每个请求一个，0-64；留空 = 全部在第 0 步）",
        ),
        "f_b_new": ("Max new tokens (1-{n})", "最多新 token 数（1-{n}）"),
        "f_b_budget": ("Token budget per step (8-256)", "每步 token 预算（8-256）"),
        "f_b_strategy": ("Strategy", "策略"),
        "f_b_slots": ("State slots (5-64)", "状态槽位（5-64）"),
        "f_b_kv": (
            "KV pool in tokens (0 = no limit; up to {n})",
            "KV 池（token；0 = 不限，最多 {n}）",
        ),
        "b_batch": ("Serve together", "一起服务"),
        "f_b_buffer": (
            "One byte buffer in KiB (0 = two separate pools; up to {n}; on: it sets the state "
            "slots and the KV, the two fields above are not used)",
            "统一字节缓冲区（KiB；0 = 两个独立的池；最多 {n}；开启时由它决定状态槽位和 KV，"
            "上面两个字段不再使用）",
        ),
        "f_b_graph": (
            "Captured decode batch sizes (SGLang's cuda_graph_bs, each {lo}-{hi}; empty = eager "
            "decode)",
            "捕获的解码批大小（SGLang 的 cuda_graph_bs，每个 {lo}-{hi}；留空 = eager 解码）",
        ),
        "v_buffer": ("one byte buffer in KiB", "统一字节缓冲区（KiB）"),
        "e_buffer": (
            "one byte buffer in KiB must be 0 (two separate pools) or an integer in [{lo}, {hi}] "
            "for {strategy} (one request's reserved slots and a KV token), got {got}",
            "统一字节缓冲区（KiB）必须为 0（两个独立的池）或 [{lo}, {hi}] 内的整数"
            "（{strategy}：一个请求预留的槽位加一个 KV token），收到 {got}",
        ),
        "e_graph": (
            "captured decode batch sizes must be 1 to {n} integers in [{lo}, {hi}] separated by "
            "commas, or empty, got {got}",
            "捕获的解码批大小必须是 1 到 {n} 个 [{lo}, {hi}] 内、以逗号分隔的整数，或者留空，"
            "收到 {got}",
        ),
        "n_border": ("byte buffer border", "字节缓冲区边界"),
        "n_graphs": ("decode index table", "解码索引表"),
        "pk_waiting_memory": ("waiting: memory full", "等待：内存已满"),
        "t_border": (
            "One byte buffer of {kib} KiB: states up from byte 0, KV down from the top",
            "{kib} KiB 统一字节缓冲区：状态从字节 0 向上，KV 从顶端向下",
        ),
        "kind_free_gap": ("free gap", "空闲间隙"),
        "kind_kv": ("MLA KV (tree + running requests)", "MLA KV（树 + 运行中请求）"),
        "l_state_end": ("state side ends", "状态侧末端"),
        "l_kv_start": ("KV side begins", "KV 侧起点"),
        "l_held": (
            "a request waits: its slots and prompt KV do not fit",
            "请求等待：放不下它的槽位和提示词 KV",
        ),
        "h_held": (
            "step {x}<br>request #{n} waits for the buffer",
            "第 {x} 步<br>请求 #{n} 等待缓冲区",
        ),
        "h_bytes": ("step {x}<br>{name}: {y} KiB", "第 {x} 步<br>{name}：{y} KiB"),
        "y_kib": ("KiB from byte 0", "距字节 0 的 KiB"),
        "empty_border": (
            "set a byte buffer (KiB) and serve to see the border",
            "设置统一字节缓冲区（KiB）并服务，即可看到边界",
        ),
        "t_graphs": (
            "Decode on captured sizes {sizes}: each row's state index per step",
            "按捕获大小 {sizes} 解码：每步各行的状态索引",
        ),
        "st_padding": ("real batch and padding rows per step", "每步的真实批次与填充行"),
        "st_index": (
            "state index per row (slot + 1; 0 = the sink)",
            "每行的状态索引（槽位 + 1；0 = sink）",
        ),
        "kind_real": ("requests (real batch)", "请求（真实批次）"),
        "kind_pad": ("padding rows → sink slot 0", "填充行 → sink 槽位 0"),
        "kind_eager": ("eager step (a prefill in it)", "eager 步（含预填充）"),
        "y_rows": ("rows", "行"),
        "y_row": ("row", "行"),
        "h_real_row": (
            "step {x}, row {r}<br>request #{n}: state index {i} (slot {s})",
            "第 {x} 步，第 {r} 行<br>请求 #{n}：状态索引 {i}（槽位 {s}）",
        ),
        "h_sink_row": (
            "step {x}, row {r}<br>padding row: state index 0 (the sink)",
            "第 {x} 步，第 {r} 行<br>填充行：状态索引 0（sink）",
        ),
        "h_batch": (
            "step {x}<br>{name}: {y}",
            "第 {x} 步<br>{name}：{y}",
        ),
        "empty_graphs": (
            "set captured decode batch sizes and serve to see the index table",
            "设置捕获的解码批大小并服务，即可看到索引表",
        ),
        "b_buffer": (
            "**One byte buffer of {kib} KiB**: a state slot is {slot} KiB, a KV token {kvb} B "
            "(one slot = {ratio} tokens of KV); it holds at most {slots} slots, so at most "
            "{cap} running; the state slots and KV pool fields are not used",
            "**{kib} KiB 的统一字节缓冲区**：一个状态槽位 {slot} KiB，一个 KV token {kvb} B"
            "（一个槽位 = {ratio} 个 token 的 KV）；最多容纳 {slots} 个槽位，因此最多 {cap} 个"
            "并发；状态槽位和 KV 池字段不再使用",
        ),
        "b_held": (
            "request #{n} waited {k} steps at the head of the queue: the buffer could not hold "
            "its slots and its prompt's KV (unlocked cached states and tree KV were evicted "
            "first)",
            "请求 #{n} 在队首等待了 {k} 步：缓冲区放不下它的槽位和提示词的 KV"
            "（先驱逐了未锁定的缓存状态和树中的 KV）",
        ),
        "b_no_held": (
            "no request waited for the buffer itself: the running cap bound first (prompts "
            "longer than one slot's worth of KV make the buffer the limit)",
            "没有请求因缓冲区本身而等待：并发上限先触顶（提示词的 KV 超过一个槽位时，缓冲区"
            "才成为限制）",
        ),
        "b_graphs": (
            "**Decode on captured sizes** {sizes}: {n} all-decode steps, {pad} padding rows on "
            "the sink (state index 0); the largest size caps the running requests "
            "(cuda_graph_max_bs {top})",
            "**按捕获大小解码** {sizes}：{n} 个纯解码步，{pad} 个填充行写入 sink"
            "（状态索引 0）；最大的大小限制并发请求数（cuda_graph_max_bs {top}）",
        ),
        "b_refuses": (
            "SGLang refuses its unified pool with some PD-disaggregation, speculative-decoding, "
            "hierarchical-cache and decode-context-parallel settings (its messages are quoted "
            "in docs/serving.md); none of them is an option here",
            "SGLang 在部分 PD 分离、投机解码、分层缓存和解码上下文并行设置下拒绝统一内存池"
            "（原文见 docs/serving.md）；这里不提供这些选项",
        ),
        "v_new": ("max new tokens", "最多新 token 数"),
        "v_strategy": ("strategy", "策略"),
        "v_b_slots": ("state slots", "状态槽位"),
        "v_budget": ("token budget per step", "每步 token 预算"),
        "v_kv": ("KV pool in tokens (0 = no limit)", "KV 池 token 数（0 = 不限）"),
        "v_arrivals": ("arrival steps", "到达步"),
        "e_b_text": (
            "batch requests (one per line) must be text",
            "批处理请求（每行一个）必须是文本",
        ),
        "e_b_lines": (
            "batch requests (one per line) must hold 1 to {n} non-empty lines, got {got}",
            "批处理请求（每行一个）必须有 1 到 {n} 个非空行，收到 {got}",
        ),
        "e_b_line": (
            "batch requests (one per line): line {i} must be 1 to {n} UTF-8 bytes, got {got}",
            "批处理请求（每行一个）：第 {i} 行必须为 1 到 {n} 个 UTF-8 字节，收到 {got}",
        ),
        "e_b_arr_int": (
            "arrival steps must be integers in [0, {n}] separated by commas, got {got}",
            "到达步必须是 [0, {n}] 内、以逗号分隔的整数，收到 {got}",
        ),
        "e_b_arr_count": (
            "arrival steps must give one step in [0, {n}] per request ({k}) or be empty, got {got}",
            "到达步必须为每个请求（{k} 个）各给一个 [0, {n}] 内的步，或者留空，收到 {got}",
        ),
        "progress_batch": ("serving {n} requests together", "正在一起服务 {n} 个请求"),
        "n_pools": ("pools", "池"),
        "n_phases": ("batch swimlane", "批处理泳道图"),
        "n_bpool": ("batch pool", "批处理状态池"),
        "cnt_checkpoint_used": ("checkpoint slots used", "已用检查点槽位"),
        "cnt_copies": ("COW copies (restores)", "COW 复制（恢复）"),
        "cnt_donations": ("donations (track slot -> pool)", "捐赠（跟踪槽 → 池）"),
        "cnt_evicted_states": ("evicted states", "被驱逐的状态"),
        "h_counter": ("after request {x}<br>{name}: {y}", "请求 {x} 之后<br>{name}：{y}"),
        "st_per_request": ("per request, one at a time", "逐个请求"),
        "st_batch_peak": ("the batch run at its peak step", "批处理运行的峰值步"),
        "cap": ("checkpoint pool capacity {n}", "检查点池容量 {n}"),
        "t_pools": (
            "Pools after each request (cumulative) · real concurrency",
            "每个请求之后的池（累计）· 真实并发",
        ),
        "y_count": ("count (slots / events)", "计数（槽位 / 事件）"),
        "serve_below": (
            "serve the batch below to see real concurrency",
            "在下方服务批处理以查看真实并发",
        ),
        "all_rejected_panel": (
            "the last batch ran no step: every request was rejected",
            "上一批没有运行任何一步：每个请求都被拒绝",
        ),
        "step_n": ("step {n}", "第 {n} 步"),
        "y_peak_slots": ("state slots at the peak", "峰值时的状态槽位"),
        "x_peak": ("{run} running / max {cap}", "运行 {run} / 上限 {cap}"),
        "h_kind": ("{name}: {y} slots", "{name}：{y} 个槽位"),
        "pk_not_arrived": ("not arrived", "尚未到达"),
        "pk_waiting": ("waiting", "等待"),
        "pk_prefill": ("prefill chunk", "预填充分块"),
        "pk_decode": ("decode", "解码"),
        "pk_retracted": ("retracted", "被撤回"),
        "pk_finished": ("finished", "已完成"),
        "pk_rejected": ("rejected", "被拒绝"),
        "h_phase": ("request #{n}<br>{name}: steps {a}-{b}", "请求 #{n}<br>{name}：第 {a}-{b} 步"),
        "h_rejected0": ("request #{n}<br>{name} at admission", "请求 #{n}<br>接纳时{name}"),
        "t_phases": (
            "Batch: each request's phase per scheduler step ({n} requests, {s} steps, peak {p} "
            "running)",
            "批处理：每个请求在各调度步的阶段（{n} 个请求，{s} 步，峰值并发 {p}）",
        ),
        "x_step": ("scheduler step", "调度步"),
        "kind_slots_running": ("slots held by running requests", "运行中请求占用的槽位"),
        "kind_slots_cached": ("cached checkpoints", "缓存的检查点"),
        "kind_slots_free": ("free slots", "空闲槽位"),
        "st_pool": ("state slots (pool size {n})", "状态槽位（池大小 {n}）"),
        "st_running": ("running requests", "并发请求"),
        "h_pool": ("step {x}<br>{name}: {y}", "第 {x} 步<br>{name}：{y}"),
        "l_running": ("running requests", "并发请求"),
        "h_running": ("step {x}<br>{y} running", "第 {x} 步<br>运行 {y} 个"),
        "l_cap": ("max running requests {n}", "最大并发请求数 {n}"),
        "l_cap_capped": (
            "max running requests {n} (capped by the state pool)",
            "最大并发请求数 {n}（被状态池限制）",
        ),
        "t_bpool": (
            "One state pool over time: {s}, peak {p} running (max running requests {m})",
            "同一个状态池随时间的变化：{s}，峰值并发 {p}（最大并发请求数 {m}）",
        ),
        "no_step": (
            "no scheduler step ran: every request was rejected (the pool stayed empty, {n} free "
            "slots)",
            "没有运行任何调度步：每个请求都被拒绝（状态池一直是空的，{n} 个空闲槽位）",
        ),
        "y_slots": ("state slots", "状态槽位"),
        "empty_pools": ("empty session: send a request", "空会话：请发送一个请求"),
        "b_head": (
            "**Batch: {reqs}, {steps}** · {strategy}, {slots} state slots{kv} · peak "
            "running requests **{peak}** / max running requests **{cap}** (sizing: {plan})",
            "**批处理：{reqs}，{steps}** · {strategy}，{slots} 个状态槽位{kv} · 峰值并发 "
            "**{peak}** / 最大并发请求数 **{cap}**（按容量计算：{plan}）",
        ),
        "cnt_req_1": ("1 request", "1 个请求"),
        "cnt_req_n": ("{n} requests", "{n} 个请求"),
        "cnt_step_1": ("1 step", "1 步"),
        "cnt_step_n": ("{n} steps", "{n} 步"),
        "cnt_tok_1": ("1 token", "1 个 token"),
        "cnt_tok_n": ("{n} tokens", "{n} 个 token"),
        "b_kv": (", KV pool {tokens}", "，KV 池 {tokens}"),
        "b_capped": (
            "**The state pool caps concurrency.** SGLang would print:",
            "**状态池限制了并发。** SGLang 会打印（原文）：",
        ),
        "b_no_cap": (
            "no cap: the workload never reached {n} running requests",
            "没有触顶：负载从未达到 {n} 个并发请求",
        ),
        "b_restored": ("restored tokens from the tree: {list}", "从树中恢复的 token：{list}"),
        "b_retractions": (
            "retractions {n} · steps with a retraction {s}: the KV pool could not hold the next "
            "decode tokens, so the running request with the fewest new tokens (then the longest "
            "prompt) went back to waiting, to be redone later (SGLang's retract_decode)",
            "撤回 {n} 次 · 发生撤回的步数 {s}：KV 池放不下下一步的解码 token，于是新 token 最少"
            "（其次提示词最长）的运行中请求退回等待，稍后重做（SGLang 的 retract_decode）",
        ),
        "b_all_rejected": (
            "**No request fits a KV pool of {tokens}**, so no scheduler step ran and the state "
            "pool stayed empty: a request needs its prompt and every new token but the last "
            "({needs} tokens here). The smallest KV pool that admits one is **{least}** (request "
            "#{i}). SGLang refuses each with:",
            "**没有一个请求放得进 {tokens} 的 KV 池**，所以没有运行任何调度步，状态池一直是空的："
            "一个请求需要它的提示词和除最后一个以外的所有新 token（这里分别是 {needs} 个 "
            "token）。能接纳一个请求的最小 KV 池是 **{least}**（请求 #{i}）。SGLang 对每个请求的"
            "拒绝原话是：",
        ),
        "b_all_rejected_buffer": (
            "**No request fits beside its state slots in the byte buffer**, so no scheduler "
            "step ran and the state pool stayed empty. SGLang refuses each with:",
            "**没有一个请求能和它的状态槽位一起放进这块字节缓冲区**，所以没有运行任何调度步，"
            "状态池一直是空的。SGLang 对每个请求的拒绝原话是：",
        ),
        "b_rejected": (
            "{which} rejected: their KV ({needs} tokens) exceeds what the pool holds for one "
            "request; "
            "SGLang's message for #{n}:",
            "{which} 被拒绝：它们的 KV（{needs} 个 token）超过了池子能给一个请求的容量；"
            "SGLang 对 #{n} 的原话：",
        ),
        "b_rejected_1": (
            "request #{n} rejected: its KV ({needs}) exceeds what the pool holds for one "
            "request; SGLang's message:",
            "请求 #{n} 被拒绝：它的 KV（{needs}）超过了池子能给一个请求的容量；SGLang 的原话：",
        ),
        "b_requests": ("requests {list}", "请求 {list}"),
    },
    COMMON,
)


__all__ = ["BATCH"]
