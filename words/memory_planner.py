"""memory_planner in words (English / 中文): the page and its figures (``_PAGE``; what limits
the running requests ``lim_<side>``), its panels' catalogs as bases (the engine view and the log
panel ``ENGINE_MSG``, the trace panel ``TRACE``), and what only the static figure
``plots/plot_k3_memory_vs_context.py`` says (``_FIGURES``, keys ``fig_*``; the crossover it marks
is the one the page prints)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON
from words.memory_planner_engines import ENGINE_MSG
from words.memory_planner_trace import TRACE

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Memory planner", "显存规划"),
    "blurb": (
        "Real configs: state per request, MLA KV per token, slots, and max running requests.",
        "真实模型配置：每请求状态、每 token MLA KV、槽位与最大并发请求数。",
    ),
    "intro": (
        "**One GPU's cache budget for a hybrid model, as SGLang and vLLM size it.** Pick a "
        "shipped model or bring your own `config.json` (Kimi-Linear / Kimi K3, Qwen3-Next / "
        "Qwen3.5, Ling 3.0, Intern-S2-Mobius, Nemotron-H, Falcon-H1, Jamba and the other hybrid "
        "families of the model list). Every running request needs its own *fixed-size* recurrent "
        "state (red) however long the context, while the attention layers' KV cache (blue) "
        "grows with every token. SGLang splits the budget with `--mamba-full-memory-ratio` "
        "and, with radix caching, *reserves several state slots* per request; vLLM puts "
        "both in one pool of equal pages and raises the attention block until a page holds "
        "a state. **Look at:** the two engines side by side (slots, running requests, KV "
        "tokens, vLLM's block size and the shortest prompt its prefix cache can hit), the "
        "lines each engine would print, which side caps *max running requests*, and, "
        "below, your own server's log read back line by line.",
        "**一块 GPU 上混合模型的缓存预算，按 SGLang 与 vLLM 各自的算法。** 选择内置模型或"
        "带来你自己的 `config.json`（Kimi-Linear / Kimi K3、Qwen3-Next / Qwen3.5、"
        "Ling 3.0、Intern-S2-Mobius、Nemotron-H、Falcon-H1、Jamba 以及模型列表中的其他混合模型"
        "系列）。每个正在运行的请求都需要一份*固定大小*的递推状态（红色），与上下文"
        "长度无关；而注意力层的 KV 缓存（蓝色）随每个 token 增长。SGLang 用 "
        "`--mamba-full-memory-ratio` 划分显存，开启 radix 缓存时每个请求要*预留多个状态槽*；"
        "vLLM 把两者放进同一个等大页面的池，并增大注意力块直到一页能装下一份状态。**请看：** "
        "两个引擎并排的结果（状态槽、并发请求、KV token、vLLM 的块大小及其前缀缓存能命中的"
        "最短提示），各引擎会打印的日志，是哪一侧限制了*最大并发请求数*，以及下方按行读回的"
        "你自己服务器的日志。",
    ),
    # inputs
    "f_model": ("Model", "模型"),
    "o_custom": ("custom", "自定义"),
    "model_name": ("{name}", "{name}"),
    "acc_custom": ("Custom model (model = custom)", "自定义模型（模型 = 自定义）"),
    "f_linear_kind": ("linear layers' kind", "线性层类型"),
    "f_attn_kind": ("attention: MLA or GQA", "注意力：MLA 或 GQA"),
    "f_n_kda": ("linear layers", "线性层数"),
    "f_n_mla": ("attention layers", "注意力层数"),
    "f_heads": ("linear heads (short conv: channels)", "线性层头数（短卷积：通道数）"),
    "f_head_dim": ("key / state dim", "键 / 状态维度"),
    "f_value_dim": ("value dim (0 = key dim)", "值维度（0 = 键维度）"),
    "f_conv_k": ("conv kernel", "卷积核大小"),
    "f_lora": ("kv_lora_rank (MLA) / KV heads (GQA)", "kv_lora_rank（MLA）/ KV 头数（GQA）"),
    "f_rope": (
        "qk_rope_head_dim (MLA) / head dim (GQA)",
        "qk_rope_head_dim（MLA）/ 头维度（GQA）",
    ),
    "f_tp": ("TP (1-64)", "张量并行 TP（1-64）"),
    "f_budget": ("Cache memory per GPU (GiB)", "每卡缓存显存（GiB）"),
    "f_ratio": ("mamba-full-memory-ratio (0.01-10)", "mamba-full-memory-ratio（0.01-10）"),
    "f_max_slots": ("max-mamba-cache-size (0 = ratio)", "max-mamba-cache-size（0 = 按比例）"),
    "f_ssm_dtype": (
        "SSM dtype (auto = each engine's default)",
        "SSM 精度（auto = 各引擎默认值）",
    ),
    "f_conv_dtype": ("conv dtype", "卷积精度"),
    "f_kv_dtype": ("KV dtype", "KV 精度"),
    "f_strategy": ("Radix strategy", "Radix 策略"),
    "f_overlap": ("overlap scheduler", "重叠调度器"),
    "f_skip_lock": ("skip decode lock", "跳过解码锁"),
    "f_draft": ("speculative draft tokens D (0-64)", "投机草稿 token 数 D（0-64）"),
    "f_input": ("input tokens", "输入 token 数"),
    "f_output": ("output tokens", "输出 token 数"),
    "b_plan": ("Plan", "规划"),
    "f_logs": ("What SGLang would print", "SGLang 会打印的日志"),
    # the names the checks use
    "v_model": ("model", "模型"),
    "v_n_kda": ("linear layers", "线性层数"),
    "v_n_mla": ("attention layers", "注意力层数"),
    "v_heads": ("linear heads", "线性层头数"),
    "v_head_dim": ("key / state dim", "键 / 状态维度"),
    "v_value_dim": ("value dim", "值维度"),
    "v_conv_k": ("conv kernel", "卷积核大小"),
    "v_lora": ("kv_lora_rank / KV heads", "kv_lora_rank / KV 头数"),
    "v_rope": ("qk_rope_head_dim / head dim", "qk_rope_head_dim / 头维度"),
    "v_linear_kind": ("linear layers' kind", "线性层类型"),
    "v_attn_kind": ("attention kind", "注意力类型"),
    "v_tp": ("TP", "TP"),
    "v_ssm_dtype": ("SSM dtype", "SSM 精度"),
    "v_conv_dtype": ("conv dtype", "卷积精度"),
    "v_kv_dtype": ("KV dtype", "KV 精度"),
    "v_budget": ("cache memory per GPU (GiB)", "每卡缓存显存（GiB）"),
    "v_ratio": ("mamba-full-memory-ratio", "mamba-full-memory-ratio"),
    "v_max_slots": (
        "max_mamba_cache_size (0 = from ratio)",
        "max_mamba_cache_size（0 = 按比例）",
    ),
    "v_strategy": ("strategy", "策略"),
    "v_draft": ("draft tokens D", "草稿 token 数 D"),
    "v_input": ("input length", "输入长度"),
    "v_output": ("output length", "输出长度"),
    "n_context": ("memory vs context", "显存与上下文"),
    "n_ratio": ("running requests vs ratio", "并发请求与比例"),
    "n_strategies": ("strategies", "策略"),
    "n_live": ("live run", "实时运行"),
    # summary table
    "th": ("| quantity | value | note |", "| 量 | 值 | 说明 |"),
    "r_ssm": ("recurrent state / slot", "递推状态 / 槽"),
    "r_layers": ("{n} layers", "{n} 层"),
    "r_conv": ("conv window / slot", "卷积窗口 / 槽"),
    "r_kernel": ("kernel {k}", "卷积核 {k}"),
    "r_slot": ("one state slot", "一个状态槽"),
    "r_outweighs": (
        "one request's KV outweighs it from {n:,} tokens",
        "从 {n:,} 个 token 起一个请求的 KV 超过它",
    ),
    "r_kv_token": ("attention KV / token", "注意力 KV / token"),
    "r_slots": ("state slots (max_mamba_cache_size)", "状态槽（max_mamba_cache_size）"),
    "r_kv_tokens": ("KV tokens", "KV token 数"),
    "r_per_request": ("slots reserved / held per request", "每请求预留 / 持有的槽"),
    "r_max_running": ("**max running requests**", "**最大并发请求数**"),
    "r_balanced": ("balancing ratio for this workload", "此负载的平衡比例"),
    "r_tokens_req": ("{n:,} tokens / request", "每请求 {n:,} 个 token"),
    "r_ckpts": ("checkpoints per request", "每请求检查点数"),
    "r_ckpts_n": ("chunk + decode track", "分块 + 解码跟踪"),
    "r_rings": ("ReplaySSM rings (all slots)", "ReplaySSM 环（全部槽位）"),
    "r_per_draft": ("per-draft states instead", "改用每草稿完整状态"),
    "lim_state": ("state", "状态槽"),
    "lim_kv": ("kv", "KV"),
    "limited": ("limited by **{by}**", "受限于 **{by}**"),
    "no_fit_kv": (
        "**one request does not fit**: it needs {need:,} KV tokens, the KV pool holds "
        "{have:,} (more memory, a lower ratio or a shorter request)",
        "**一个请求都放不下**：它需要 {need:,} 个 KV token，KV 池只能容纳 {have:,} 个"
        "（加显存、降低比例或缩短请求）",
    ),
    "no_fit_state": (
        "**one request does not fit**: SGLang reserves {spr} state slots per request at "
        "admission ({held} held while it runs), the pool has {have:,} (more memory or a "
        "higher ratio)",
        "**一个请求都放不下**：SGLang 在接纳请求时为每个请求预留 {spr} 个状态槽（运行时持有 "
        "{held} 个），池中只有 {have:,} 个（加显存或提高比例）",
    ),
    # history
    "hist_title": ("**Plans in this session**", "**本会话的方案**"),
    "hist_th": (
        "| # | model | TP | GiB | ratio / slots | strategy | max running | limited by |",
        "| # | 模型 | TP | GiB | 比例 / 槽位 | 策略 | 最大并发 | 受限于 |",
    ),
    "n_slots": ("{n} slots", "{n} 个槽"),
    # live run
    "live_none": (
        "**Live run:** no live run for {s} (the engine always keeps a radix cache)",
        "**实时运行：** {s} 没有实时运行（引擎始终保留 radix 缓存）",
    ),
    "live": (
        "**Live run** ({s}, {slots} state slots, {n} requests waiting): peak **{peak}** "
        "running {same} the planner's max running requests **{plan}** (this plan at full "
        "scale: {full:,}; state slots: {full_slots:,})",
        "**实时运行**（{s}，{slots} 个状态槽，{n} 个请求等待）：峰值并发 **{peak}** {same} "
        "规划器的最大并发请求数 **{plan}**（本方案在完整规模下：{full:,}；"
        "状态槽：{full_slots:,}）",
    ),
    "live_lock": (
        "(the engine runs the overlap scheduler with the decode lock)",
        "（引擎使用重叠调度器并保留解码锁）",
    ),
    "live_sglang": ("SGLang would print:", "SGLang 会打印（原文）："),
    # figures
    "l_mla": ("attention KV (grows per token)", "注意力 KV（按 token 增长）"),
    "h_mla": ("context {x} tokens<br>KV {y} MiB", "上下文 {x} 个 token<br>KV {y} MiB"),
    "l_kda": (
        "recurrent state + conv window (one slot, flat)",
        "递推状态 + 卷积窗口（一个槽，不变）",
    ),
    "h_kda": (
        "context {x} tokens<br>state slot {y} MiB",
        "上下文 {x} 个 token<br>状态槽 {y} MiB",
    ),
    "cross": ("KV > state from {n:,} tokens", "从 {n:,} 个 token 起 KV > 状态"),
    "t_context": (
        "One request's memory on one GPU vs context ({model}, TP{tp})",
        "单卡上一个请求的显存随上下文的变化（{model}，TP{tp}）",
    ),
    "x_context": ("context length (tokens, log scale)", "上下文长度（token，对数坐标）"),
    "y_mib": ("memory per request (MiB, log scale)", "每请求显存（MiB，对数坐标）"),
    "l_by_state": ("limit from state slots", "状态槽决定的上限"),
    "h_by_state": ("ratio {x}<br>{y} requests (state)", "比例 {x}<br>{y} 个请求（状态槽）"),
    "l_by_kv": (
        "limit from KV ({n:,} tokens/request)",
        "KV 决定的上限（每请求 {n:,} 个 token）",
    ),
    "h_by_kv": ("ratio {x}<br>{y} requests (KV)", "比例 {x}<br>{y} 个请求（KV）"),
    "l_max": ("max running requests", "最大并发请求数"),
    "h_max": ("ratio {x}<br>max running {y}", "比例 {x}<br>最大并发 {y}"),
    "balanced": ("balanced {r:.3g}", "平衡点 {r:.3g}"),
    "l_this": ("this plan (ratio {r:g})", "本方案（比例 {r:g}）"),
    "h_this": (
        "this plan<br>ratio {x}<br>max running {y}",
        "本方案<br>比例 {x}<br>最大并发 {y}",
    ),
    "t_ratio": (
        "Max running requests vs --mamba-full-memory-ratio",
        "最大并发请求数随 --mamba-full-memory-ratio 的变化",
    ),
    "x_ratio": (
        "mamba-full-memory-ratio (state : KV bytes, log scale)",
        "mamba-full-memory-ratio（状态 : KV 字节，对数坐标）",
    ),
    "y_running": ("running requests", "并发请求数"),
    "st_slots": ("state slots per request", "每请求状态槽"),
    "st_max": ("max running from {n:,} slots", "{n:,} 个槽下的最大并发"),
    "l_reserved": ("slots reserved / request", "每请求预留的槽"),
    "h_reserved": ("{x}<br>reserved {y} slots", "{x}<br>预留 {y} 个槽"),
    "l_held": ("slots held / request", "每请求持有的槽"),
    "h_held": ("{x}<br>held {y} slots", "{x}<br>持有 {y} 个槽"),
    "l_state_cap": ("max running requests (state cap)", "最大并发请求数（状态上限）"),
    "h_state_cap": ("{x}<br>max running {y}", "{x}<br>最大并发 {y}"),
    "na": ("n/a", "不适用"),
    "t_strategies": (
        "Radix strategies: slots per request and the concurrency they allow",
        "Radix 策略：每请求槽位与允许的并发",
    ),
    "y_slots": ("slots per request", "每请求槽位"),
    "x_strategy": ("strategy", "策略"),
    "t_live_none": ("Live run", "实时运行"),
    "live_none_fig": (
        "no live run for {s}: the engine always keeps a radix cache",
        "{s} 没有实时运行：引擎始终保留 radix 缓存",
    ),
    "l_admitted": ("what the live run admitted", "实时运行接纳的请求"),
    "h_admitted": ("step {x}<br>{y} running", "第 {x} 步<br>运行 {y} 个"),
    "l_planner": ("the planner's max running requests ({n})", "规划器的最大并发请求数（{n}）"),
    "h_planner": ("planner: {n}", "规划器：{n}"),
    "t_live": (
        "Live run on a scaled pool: {s}, {slots} state slots, {n} requests: peak {peak} "
        "running, planner {plan}",
        "缩放后状态池上的实时运行：{s}，{slots} 个状态槽，{n} 个请求：峰值并发 {peak}，"
        "规划器 {plan}",
    ),
    "x_step": ("scheduler step", "调度步"),
    "y_per_step": ("running requests per step", "每步并发请求数"),
}
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
MSG = Catalog("memory_planner", {**_PAGE, **_FIGURES}, ENGINE_MSG, TRACE, COMMON)

__all__ = ["MSG"]
