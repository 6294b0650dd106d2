"""memory_planner's engine view and log panel in words (English / 中文): ``ENGINE_MSG``, a base of
``words.memory_planner.MSG``: SGLang and vLLM side by side (``eng_*``), the pasted config, and a
server log read back (its verdict ``vd_<verdict>``, a line's status ``st_<status>``, the reader's
sentences in ``words.memory_planner_reasons``)."""

from __future__ import annotations

from words.catalog import Catalog
from words.memory_planner_reasons import REASON_MSG

ENGINE_MSG = Catalog(
    "memory_planner_engines",
    {
        # inputs
        "acc_config": (
            "config.json (model = config.json): paste it or upload the file (at most 1 MiB)",
            "config.json（模型 = config.json）：粘贴内容或上传文件（最多 1 MiB）",
        ),
        "o_config": ("config.json (pasted or uploaded)", "config.json（粘贴或上传）"),
        "f_config_text": ("config.json text", "config.json 文本"),
        "f_config_file": ("upload config.json", "上传 config.json"),
        "f_page": ("page size (--page-size)", "页大小（--page-size）"),
        "f_replayssm": ("ReplaySSM ring (L = 16)", "ReplaySSM 环（L = 16）"),
        "f_mtp": (
            "MTP drafter (the model's own MTP modules draft)",
            "MTP 草稿模型（由模型自带的 MTP 模块起草）",
        ),
        "f_eagle": (
            "EAGLE3 drafter (the bundled Qwen3-Next EAGLE3 draft config; beside another model it "
            "stands in for a draft of its shape)",
            "EAGLE3 草稿模型（内置的 Qwen3-Next EAGLE3 草稿配置；"
            "用于其他模型时，代表同样形状的草稿）",
        ),
        "f_requested": ("max running requests (0 = unset)", "最大并发请求数（0 = 不设）"),
        "f_max_num_seqs": ("vLLM max_num_seqs", "vLLM max_num_seqs"),
        "f_prefix": ("vLLM prefix caching", "vLLM 前缀缓存"),
        "b_k3": ("K3 write-up example", "K3 文章中的例子"),
        "v_page": ("page size", "页大小"),
        "v_mtp": ("MTP drafter", "MTP 草稿模型"),
        "v_eagle": ("EAGLE3 drafter", "EAGLE3 草稿模型"),
        "e_two_drafters": (
            "choose one drafter: MTP or EAGLE3, not both",
            "只能选一个草稿模型：MTP 或 EAGLE3，不能同时选",
        ),
        "e_eagle_draft": (
            "an EAGLE3 drafter needs draft tokens >= 1 (vLLM's num_speculative_tokens)",
            "EAGLE3 草稿模型需要草稿 token 数 >= 1（vLLM 的 num_speculative_tokens）",
        ),
        "v_requested": ("max running requests", "最大并发请求数"),
        "v_max_num_seqs": ("max_num_seqs", "max_num_seqs"),
        "v_log_ratio": ("ratio of the log (0 = unknown)", "日志的比例（0 = 未知）"),
        "v_log_page": ("page size of the log (0 = from the log)", "日志的页大小（0 = 从日志读）"),
        "v_log_tp": ("TP of the log (0 = inferred)", "日志的 TP（0 = 推断）"),
        "e_heads": (
            "TP must divide the {heads} recurrent-state heads; got TP={tp}",
            "TP 必须整除 {heads} 个递推状态头；收到 TP={tp}",
        ),
        "e_log_custom": (
            "a log is read against a shipped model or a config.json, not the custom numbers",
            "日志只能按内置模型或 config.json 读取，不能按自定义数字读取",
        ),
        "f_vllm_logs": ("What vLLM would print", "vLLM 会打印的日志"),
        # the engines table
        "eng_th": (
            "| same GPU budget, TP and dtypes | SGLang | vLLM |",
            "| 相同显存预算、TP 与精度 | SGLang | vLLM |",
        ),
        "eng_slots": (
            "state slots (vLLM: blocks shared with KV)",
            "状态槽（vLLM：与 KV 共用的块）",
        ),
        "eng_per_req": ("state slots per request", "每请求状态槽"),
        "eng_per_req_v": ("{m} mamba + {a} attention blocks", "{m} 个 mamba 块 + {a} 个注意力块"),
        "eng_layers": (
            "layers (a trailing partial layer group: SGLang keeps it linear, vLLM makes it"
            " attention)",
            "层数（末尾不完整的层组：SGLang 仍为线性层，vLLM 改为注意力层）",
        ),
        "eng_layers_v": ("{lin} {kind} + {attn} {akind}", "{lin} 层 {kind} + {attn} 层 {akind}"),
        "eng_running": ("**max running requests**", "**最大并发请求数**"),
        "eng_refuses": ("0: refuses to start (max_num_seqs)", "0：无法启动（max_num_seqs）"),
        "eng_kv": ("KV tokens", "KV token 数"),
        "eng_block": ("attention block size (tokens)", "注意力块大小（token）"),
        "eng_hit": ("smallest prompt that can hit the prefix cache", "能命中前缀缓存的最短提示"),
        "eng_hit_off": ("prefix caching off", "前缀缓存关闭"),
        "eng_tokens": ("{n:,} tokens", "{n:,} 个 token"),
        "eng_page": ("page {n}", "页 {n}"),
        "eng_spec": ("draft tokens per step", "每步草稿 token 数"),
        "eng_draft_kv": ("MTP drafter's KV", "MTP 草稿模型的 KV"),
        "eng_draft_s": ("{b:,} B/token in the cell", "KV 单元中 {b:,} B/token"),
        "eng_draft_v": (
            "{n} attention layer(s), {mib} per request",
            "{n} 个注意力层，每请求 {mib}",
        ),
        "eng_eagle_kv": ("EAGLE3 drafter's KV", "EAGLE3 草稿模型的 KV"),
        "eng_eagle_where": ("where the drafter's KV lives", "草稿模型 KV 所在"),
        "eng_eagle_pool": (
            "its own pool, {gib} (at the draft's shape)",
            "自己的池，{gib}（按草稿模型的形状）",
        ),
        "eng_eagle_own": (
            "its own KV cache group (another shape)",
            "自己的 KV cache 组（形状不同）",
        ),
        "eng_eagle_joins": (
            "the target's attention groups (same shape)",
            "并入目标模型的注意力组（形状相同）",
        ),
        "eng_eagle_block": ("drafter's block size (tokens)", "草稿模型的块大小（token）"),
        "eng_beyond": ("{gib} beyond the budget", "超出预算 {gib}"),
        "eng_over": (
            "none: the budget reserves {gib} more than the pool takes",
            "无：预算比池多预留 {gib}",
        ),
        "eng_kv_alone": ("KV tokens without the drafter", "不含草稿模型时的 KV token 数"),
        "eng_unpriced": (
            "draft KV pool beyond the budget",
            "超出预算的草稿 KV 池",
        ),
        "eng_unpriced_v": ("none (in the blocks)", "无（计入块中）"),
        "eng_recover": (
            "RecoverSSM verify records (outside the KV pool)",
            "RecoverSSM 校验记录（KV 池之外）",
        ),
        "eng_none": ("none", "无"),
        "eng_note": (
            "One budget for both: SGLang's profiled rest of the GPU and vLLM's \"Available KV "
            "cache memory\"; vLLM's requests are {n:,} tokens long (max_model_len = input + "
            "output).",
            "两者用同一预算：SGLang 测得的剩余显存与 vLLM 的“Available KV cache memory”；"
            "vLLM 的请求长 {n:,} 个 token（max_model_len = 输入 + 输出）。",
        ),
        # the log panel
        "log_title": ("## Paste your server's log", "## 粘贴你的服务器日志"),
        "log_intro": (
            "A SGLang or vLLM log, or any piece of one (a capping line, the ready line, per-batch "
            "lines, a `/metrics` scrape), is read back against the model chosen above: each "
            "number is rebuilt from the config and the flags the log implies, and what the "
            "piece cannot pin is named.",
            "SGLang 或 vLLM 的日志，或其中任意一段（限流行、就绪行、每批次日志、`/metrics` 抓取），"
            "会按上方所选模型读回：每个数字都由配置和日志所隐含的参数重新算出，这一段定不出的"
            "也会指明。",
        ),
        "f_log": ("server log", "服务器日志"),
        "f_log_ratio": (
            "mamba-full-memory-ratio (0 = unknown)",
            "mamba-full-memory-ratio（0 = 未知）",
        ),
        "f_log_page": ("page size (0 = from the log)", "页大小（0 = 从日志读）"),
        "f_log_tp": ("TP (0 = inferred)", "TP（0 = 推断）"),
        "b_read": ("Read the log", "读取日志"),
        "examples": ("Real logs (one click):", "真实日志（一键载入）："),
        "rep_title": (
            "**{engine} log of {model}**: {counts}",
            "**{model} 的 {engine} 日志**：{counts}",
        ),
        "rep_count": ("{n} {status}", "{status} {n} 行"),
        "st_reproduced": ("reproduced", "已复现"),
        "st_different": ("different", "不同"),
        "st_input": ("input", "输入"),
        "st_not understood": ("not understood", "无法理解"),
        "st_skipped": ("skipped", "跳过"),
        "vd_state_slots": ("**Verdict: bound by the state slots**", "**结论：受限于状态槽**"),
        "vd_kv_tokens": ("**Verdict: bound by the KV tokens**", "**结论：受限于 KV token**"),
        "vd_request_pool": ("**Verdict: bound by the request cap**", "**结论：受限于请求数上限**"),
        "vd_max_num_seqs": ("**Verdict: bound by max_num_seqs**", "**结论：受限于 max_num_seqs**"),
        "vd_prefix_inert": (
            "**Verdict: prefix caching inert below one block**",
            "**结论：短于一个块的提示无法命中前缀缓存**",
        ),
        "why": ("The reader's reasoning:", "读取器的推理："),
        "lines_th": (
            "| # | status | line | logged → rebuilt |",
            "| # | 状态 | 日志行 | 日志值 → 重算值 |",
        ),
        "inferred": ("Inferred flags:", "推断出的参数："),
        "log_none": (
            "Paste a log and press **Read the log**, or load one of the real logs.",
            "粘贴日志后点击**读取日志**，或载入一份真实日志。",
        ),
        "log_refused": ("**Not read:** {message}", "**未读取**：{message}"),
        "e_log_empty": ("paste a log first", "请先粘贴日志"),
        "vd_other_model": ("**Verdict: is it this model?**", "**结论：确定是这个模型吗？**"),
        "vd_nothing_known": (
            "**Verdict: no line the reader knows**",
            "**结论：没有读取器认识的行**",
        ),
        "vd_unknown": (
            "**Verdict: the paste does not say what bounds concurrency**",
            "**结论：粘贴的内容没有说明并发受什么限制**",
        ),
        "running_th": ("Requested vs effective:", "请求值与实际值："),
        "held_th": ("Held vs reserved:", "占用与预留："),
        "missing_th": ("Not in the paste:", "粘贴的内容里没有："),
        "fix_th2": (
            "| flag change | effect | reaches the target | what it costs |",
            "| 参数修改 | 效果 | 达到目标 | 代价 |",
        ),
        "yes": ("yes", "是"),
        "no": ("no", "否"),
        "on": ("on", "开"),
        "off": ("off", "关"),
        "lines_skipped": (
            "{n:,} lines skipped: not lines the reader knows (not listed)",
            "跳过 {n:,} 行：读取器不认识这些行（未列出）",
        ),
        "f_log_requested": (
            "requested max running requests (0 = from the log)",
            "请求的最大并发数（0 = 从日志读）",
        ),
        "f_log_target": ("target running requests (0 = none)", "目标并发数（0 = 不设）"),
        "v_log_requested": ("requested max running requests", "请求的最大并发数"),
        "v_log_target": ("target running requests", "目标并发数"),
        "not_planned_fig": ("not planned", "未规划"),
        "not_planned": (
            "**Not planned** — the model was refused: {message}",
            "**未规划**——模型被拒绝：{message}",
        ),
        "hit_radix_off": ("none: the radix cache is off", "无：radix 缓存已关闭"),
        "hit_no_buffer": (
            "{n} tokens: `no_buffer` saves a state where each prefill step ends",
            "{n} 个 token：`no_buffer` 在每个预填充步结束处保存状态",
        ),
        "hit_grid": (
            "{n} tokens: states are saved every {grid} tokens (max(mamba chunk {chunk}, page))",
            "{n} 个 token：每 {grid} 个 token 保存一次状态（max(mamba 块 {chunk}, 页)）",
        ),
    },
    REASON_MSG,
)


__all__ = ["ENGINE_MSG"]
