"""checkpoint_density in words (English / 中文): the page and its figures (``_PAGE``), what only
the static figures ``plots/plot_checkpoint_density.py`` and ``plot_retention_policies.py`` say
(``_FIGURES``, keys ``fig_*``), and the replay notes both draw (``_NOTES``, keys ``note_*``,
assembled from ``kda_core.studies.density.replay_notes`` by ``words.phrases``)."""

from __future__ import annotations

from words.catalog import Catalog
from words.checkpoint_density_swa import SWA
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Checkpoint density", "检查点密度"),
    "blurb": (
        "Checkpoint every K tokens: state memory ~1/K against replay per hit, on a real trace.",
        "每 K 个 token 存一个检查点：状态显存 ~1/K 与每次命中的重放量，在真实 trace 上权衡。",
    ),
    "intro": (
        "**How often should a KDA state be checkpointed?** A prefix cache can only resume a "
        "request at a token where the recurrent state was saved. Save it every K tokens and the "
        "saved states take memory ~1/K, but a request whose prefix matches between two "
        "checkpoints must *replay* ~K/2 tokens from the last one. Whether the simulated replay "
        "per hit really follows K depends on the trace and the budget (under a budget, dense "
        "checkpoints evict each other): the title and the notes say what each curve does, with "
        "its numbers.\n**Look at:** the three panels against K (memory falls; replay per hit "
        "against the analytic curve; TTFT has a minimum: the star), the gap between the *token* "
        "hit rate (what a KV cache would reuse) and the *state* hit rate (what KDA can actually "
        "resume), the Pareto frontier, and how the policies (SGLang, Marconi, vLLM) compare at "
        "one budget.",
        "**KDA 状态应该多久存一次检查点？** 前缀缓存只能在保存了递推状态的 token 处恢复请求。每 "
        "K 个 token 存一次，状态占用的显存约为 1/K；但前缀匹配点落在两个检查点之间的请求，必须从"
        "上一个检查点*重放*约 K/2 个 token。模拟的每次命中重放量是否真的随 K 增长，取决于 trace "
        "和预算（有预算时，过密的检查点会互相驱逐）：标题和注释按曲线给出各自的走势和数字。\n"
        "**请看：** 随 K 变化的三幅子图（显存下降；每次命中的重放量与解析曲线对比；首 token 延迟"
        "有最小值：星号），*token* 命中率（KV 缓存能复用的部分）与*状态*命中率（KDA 真正能恢复的"
        "部分）之间的差距，Pareto 前沿，以及在同一预算下各策略（SGLang、Marconi、vLLM）的对比。",
    ),
    "f_workload": ("workload", "负载"),
    "wl_head": ("conversation trace (first {n:,} requests)", "对话 trace（前 {n:,} 个请求）"),
    "wl_all": (
        "conversation trace (all 12,031 requests, ~1 min)",
        "对话 trace（全部 12,031 个请求，约 1 分钟）",
    ),
    "wl_synthetic": ("Mooncake synthetic trace", "Mooncake 合成 trace"),
    "wl_chat": ("multi-turn chat (synthetic)", "多轮对话（合成）"),
    "wl_agentic": ("agentic sessions (synthetic)", "智能体会话（合成）"),
    "wl_documents": ("one-shot documents (synthetic)", "一次性文档（合成）"),
    "f_intervals": (
        "intervals K (tokens, multiples of the block)",
        "检查点间隔 K（token，块大小的整数倍）",
    ),
    "f_budgets": (
        "state budgets (GiB per GPU or 'unlimited', 1-4)",
        "状态显存预算（每卡 GiB 或 'unlimited'，1-4 个）",
    ),
    "f_policy_budget": ("policy budget (GiB)", "策略对比预算（GiB）"),
    "f_every": ("timeline interval K", "时间线的间隔 K"),
    "f_policies": ("policies compared at the policy budget", "在策略预算下对比的策略"),
    "pol_every block": ("every block", "每个块"),
    "pol_interval 4096": ("interval 4096", "间隔 4096"),
    "pol_SGLang": ("SGLang", "SGLang"),
    "pol_Marconi": ("Marconi", "Marconi"),
    "pol_vLLM align": ("vLLM align", "vLLM 对齐"),
    "b_run": ("Run", "运行"),
    "v_workload": ("workload", "负载"),
    "v_interval": ("interval K", "检查点间隔 K"),
    "v_budget": ("budget (GiB)", "预算（GiB）"),
    "v_policy_budget": ("policy budget (GiB)", "策略对比预算（GiB）"),
    "e_intervals": (
        "intervals: give 1 to {n} comma-separated token counts, got {got}",
        "检查点间隔：请给出 1 到 {n} 个以逗号分隔的 token 数，收到 {got}",
    ),
    "e_multiple": (
        "interval K must be a multiple of the block size {b} in [{b}, 65536], got {k}",
        "检查点间隔 K 必须是块大小 {b} 的整数倍，且在 [{b}, 65536] 内，收到 {k}",
    ),
    "e_budgets": (
        "budgets: give 1 to {n} comma-separated GiB values or 'unlimited', got {got}",
        "预算：请给出 1 到 {n} 个以逗号分隔的 GiB 值或 'unlimited'，收到 {got}",
    ),
    "e_policies": (
        "policies: choose 1 to {n} of: {all}; got {got}",
        "策略：请从{all}中选 1 到 {n} 个，收到 {got}",
    ),
    "progress_hits": ("token vs state hit over the trace", "正在计算 trace 上的 token 与状态命中"),
    "progress_sim": ("simulating: {what}", "正在模拟：{what}"),
    "stale": (
        "⚠ The results below are for the previous workload; press **Run** for **{w}**.",
        "⚠ 下面的结果仍是上一个负载的；按 **运行** 计算 **{w}**。",
    ),
    "n_tradeoff": ("memory, replay, TTFT", "显存、重放、首 token 延迟"),
    "n_hits": ("token vs state hit", "token 与状态命中"),
    "n_timeline": ("hit rates over the trace", "trace 上的命中率"),
    "n_pareto": ("Pareto frontier", "Pareto 前沿"),
    "n_policies": ("policies", "策略"),
    "budget_unlimited": ("unlimited", "不限"),
    # tradeoff
    "l_budget": ("budget {b}", "预算 {b}"),
    "h_peak": ("peak state {y} GiB", "状态峰值 {y} GiB"),
    "h_replay": ("replay {y} tokens/hit", "每次命中重放 {y} 个 token"),
    "h_ttft": ("mean TTFT {y} s", "平均首 token 延迟 {y} 秒"),
    "l_optimum": ("optimum at {b}: K={k:,}", "{b} 的最优点：K={k:,}"),
    "h_optimum": (
        "optimum ({b})<br>K={x}<br>TTFT {y} s",
        "最优点（{b}）<br>K={x}<br>首 token 延迟 {y} 秒",
    ),
    "l_an_mem": ("analytic memory: distinct prefix / K", "解析显存：不同前缀 / K"),
    "h_an_mem": ("analytic memory<br>K={x}<br>{y} GiB", "解析显存<br>K={x}<br>{y} GiB"),
    "l_an_rep": (
        "analytic replay: ideal match − floor to K (KV kept for every token)",
        "解析重放：理想匹配点 − 向下取整到 K（每个 token 的 KV 都保留）",
    ),
    "h_an_rep": (
        "analytic replay<br>K={x}<br>{y} tokens/hit",
        "解析重放<br>K={x}<br>每次命中 {y} 个 token",
    ),
    "x_interval_log": (
        "checkpoint interval K (tokens, log scale)",
        "检查点间隔 K（token，对数坐标）",
    ),
    "y_peak": ("peak state (GiB)", "状态峰值（GiB）"),
    "y_replay": ("replay per hit (tokens)", "每次命中的重放量（token）"),
    "y_ttft": ("mean TTFT (s)", "平均首 token 延迟（秒）"),
    # hit rates
    "l_state_hit": ("state hit, {b}", "状态命中，{b}"),
    "l_token_hit": ("token hit, {b}", "token 命中，{b}"),
    "h_state_hit": ("{b}<br>K={x}<br>state hit {y}", "{b}<br>K={x}<br>状态命中 {y}"),
    "h_token_hit": ("{b}<br>K={x}<br>token hit {y}", "{b}<br>K={x}<br>token 命中 {y}"),
    "l_an_hit": ("analytic state hit (no budget)", "解析状态命中（无预算）"),
    "h_an_hit": ("analytic<br>K={x}<br>{y}", "解析值<br>K={x}<br>{y}"),
    "ideal_hit": ("ideal token hit {r:.1%}", "理想 token 命中 {r:.1%}"),
    "t_hits": ("A token hit is not a state hit", "token 命中不等于状态命中"),
    "y_hit": ("hit rate (share of input tokens)", "命中率（占输入 token 的比例）"),
    # timeline
    "l_cum_token": ("token hit (KV could reuse)", "token 命中（KV 可复用）"),
    "l_cum_state": ("state hit (KDA can resume)", "状态命中（KDA 可恢复）"),
    "h_cum_token": ("after {x} requests<br>token hit {y}", "{x} 个请求之后<br>token 命中 {y}"),
    "h_cum_state": ("after {x} requests<br>state hit {y}", "{x} 个请求之后<br>状态命中 {y}"),
    "t_timeline": (
        "Cumulative hit rates over the trace (interval {every:,}, budget {b}); the shaded gap "
        "is replayed or re-prefilled",
        "trace 上的累计命中率（间隔 {every:,}，预算 {b}）；阴影部分需要重放或重新预填充",
    ),
    "x_served": ("requests served", "已服务的请求"),
    "y_cum": ("cumulative hit rate", "累计命中率"),
    # pareto
    "h_pareto": (
        "{b}<br>K={k}<br>peak state {x} GiB<br>state hit {y}",
        "{b}<br>K={k}<br>状态峰值 {x} GiB<br>状态命中 {y}",
    ),
    "l_frontier": ("Pareto frontier (◆)", "Pareto 前沿（◆）"),
    "h_frontier": ("frontier<br>{x} GiB<br>{y}", "前沿<br>{x} GiB<br>{y}"),
    "t_pareto": ("Memory vs state hit: the Pareto frontier", "显存与状态命中：Pareto 前沿"),
    "x_peak_log": (
        "peak state memory (GiB per GPU, log scale)",
        "状态显存峰值（每卡 GiB，对数坐标）",
    ),
    "y_state_hit": ("state hit rate", "状态命中率"),
    # policies
    "h_policy": (
        "{x}<br>{name}: {y}<br>checkpoints {c}<br>replay {r} tokens/hit<br>evictions {e}<br>"
        "TTFT p50 {t} s<br>peak state {p} GiB",
        "{x}<br>{name}：{y}<br>检查点 {c}<br>每次命中重放 {r} 个 token<br>驱逐 {e}<br>"
        "首 token 延迟 p50 {t} 秒<br>状态峰值 {p} GiB",
    ),
    "l_token": ("token hit", "token 命中"),
    "l_state": ("state hit", "状态命中"),
    "ideal": ("ideal {r:.1%}", "理想值 {r:.1%}"),
    "t_policies": (
        "Policies at one budget ({b} of state per GPU)",
        "同一预算下的各策略（每卡 {b} 状态显存）",
    ),
    "x_policy": ("checkpoint policy", "检查点策略"),
    # summary and runs
    "s_head": (
        "**{trace}**: {n:,} requests, block {block} tokens, {mib:.1f} MiB per checkpoint "
        "({model}); ideal token hit **{ideal:.1%}**",
        "**{trace}**：{n:,} 个请求，块大小 {block} 个 token，每个检查点 {mib:.1f} MiB（{model}）"
        "；理想 token 命中 **{ideal:.1%}**",
    ),
    "s_th": (
        "| budget | best K | mean TTFT | state hit | token hit | peak state |",
        "| 预算 | 最优 K | 平均首 token 延迟 | 状态命中 | token 命中 | 状态峰值 |",
    ),
    "s_replay": ("**Replay per hit, per budget**", "**每次命中的重放量（按预算）**"),
    "runs_title": ("**Runs in this session**", "**本会话的运行**"),
    "runs_th": ("| # | workload | intervals | optimum |", "| # | 负载 | 间隔数 | 最优点 |"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_k": ("checkpoint interval K (tokens)", "检查点间隔 K（token）"),
    "fig_title_mem": ("Peak checkpoint memory", "检查点显存峰值"),
    "fig_mem": ("bytes per GPU", "每卡字节数"),
    "fig_title_hit": ("State hit rate", "状态命中率"),
    "fig_hit": ("restorable / input tokens", "可恢复 / 输入 token"),
    "fig_title_rep": ("Replay per state hit", "每次状态命中的重放量"),
    "fig_rep": ("mean replayed tokens", "平均重放 token 数"),
    "fig_title_ttft": ("Mean time to first token", "平均首 token 延迟"),
    "fig_ttft": ("seconds", "秒"),
    "fig_budget": ("state budget {b}", "状态预算 {b}"),
    "fig_an_mem": ("distinct prefix / K (analytic)", "不同前缀 / K（解析）"),
    "fig_an_rep": ("ideal match − floor to K (analytic)", "理想匹配点 − 向下取整到 K（解析）"),
    "fig_source": (
        "Data: simulated prefix cache on the first {n:,} requests of the Mooncake "
        "conversation trace · {model} TP8 · block {block} tokens · {ckpt} per checkpoint",
        "数据：在 Mooncake 对话 trace 的前 {n:,} 个请求上模拟前缀缓存 · {model} TP8 · "
        "块 {block} token · 每个检查点 {ckpt}",
    ),
    "fig_opt": ("best K for the budget", "该预算下最佳 K"),
    # plot_retention_policies
    "fig_ret_suptitle": (
        "Which checkpoints to keep: policies vs state budget (real trace)",
        "保留哪些检查点：各策略 vs 状态预算（真实 trace）",
    ),
    "fig_ret_budget": ("state budget per GPU", "每卡状态预算"),
    "fig_ret_ideal": ("token hit rate, infinite KV (ceiling)", "token 命中率，KV 无限（上限）"),
    "fig_ret_title_ck": ("Checkpoints stored", "保存的检查点"),
    "fig_ret_ck": ("checkpoints over the run", "整个运行中保存的检查点数"),
    "fig_ret_source": (
        "Data: trace-driven simulation of {trace}, {model} per GPU at TP8",
        "数据：在{trace}上做 trace 驱动模拟，{model} 每卡 TP8",
    ),
    "trace_head": (
        "the first {n:,} requests of the Mooncake conversation trace",
        "Mooncake 对话 trace 的前 {n:,} 个请求",
    ),
}
_NOTES: dict[str, tuple[str, str]] = {
    "note_headline": (
        "A checkpoint every K tokens: memory ~1/K; replay per hit {parts}",
        "每 K 个 token 一个检查点：显存 ~1/K；每次命中的重放量{parts}",
    ),
    "note_part_like_k": ("grows like K ({budgets})", "随 K 近似线性增长（{budgets}）"),
    "note_part_slower": ("grows slower than K ({budgets})", "增长慢于 K（{budgets}）"),
    "note_part_flat": ("stays about flat ({budgets})", "基本持平（{budgets}）"),
    "note_part_falls": ("falls as K grows ({budgets})", "随 K 增大而下降（{budgets}）"),
    "note_part_one_k": ("has one K only ({budgets})", "只有一个 K（{budgets}）"),
    "note_line_like_k": (
        "{budget}: grows like K, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：随 K 近似线性增长，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "note_line_slower": (
        "{budget}: grows slower than K, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}; 1 would be ~K).",
        "{budget}：增长慢于 K，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}，1 即 ~K）。",
    ),
    "note_line_flat": (
        "{budget}: stays about flat, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：基本持平，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "note_line_falls": (
        "{budget}: falls {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：随 K 增大而下降，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "note_line_one_k": (
        "{budget}: {r0:,.0f} tokens at the one interval K = {k0:,} (a slope needs two or more K).",
        "{budget}：只有 K = {k0:,} 一个间隔，重放 {r0:,.0f} token（算不出斜率，至少需要两个 K）。",
    ),
    "note_short": (
        "{budget}: {trend}, {r0:,.0f} → {r1:,.0f} tokens (slope {slope:.2f})",
        "{budget}：{trend}，{r0:,.0f} → {r1:,.0f} token（斜率 {slope:.2f}）",
    ),
    "note_trend_like_k": ("grows like K", "随 K 近似线性增长"),
    "note_trend_slower": ("grows slower than K", "增长慢于 K"),
    "note_trend_flat": ("about flat", "基本持平"),
    "note_trend_falls": ("falls as K grows", "随 K 增大而下降"),
    "note_why_falls": (
        "Why it falls: under a budget a small K stores more checkpoints than fit, so they are "
        "evicted ({e0:,} evictions at K = {k0:,} vs {e1:,} at K = {k1:,} for {budget}) and a "
        "hit restores further back.",
        "为何下降：有预算时，K 小则检查点多到放不下而被驱逐（{budget}：K = {k0:,} 时驱逐 {e0:,} "
        "次，K = {k1:,} 时 {e1:,} 次），命中只能从更早处恢复。",
    ),
    "note_why_unlimited": (
        "Without a budget nothing is evicted, yet the cache keeps KV only up to a request's "
        "deepest checkpoint: a follow-up turn usually matches exactly at a checkpoint and "
        "replays only at branch points.",
        "不限预算时没有驱逐，但缓存只保留到请求最深检查点为止的 KV："
        "后续轮次通常恰好在检查点处匹配，只在分叉点才重放。",
    ),
    "note_analytic": (
        "Dashed (analytic): replay if KV were kept for every token = ideal match − floor to K, "
        "{a0:,.0f}–{a1:,.0f} tokens.",
        "虚线（解析）：若每个 token 的 KV 都保留，重放 = 理想匹配点 − 向下取整到 K，"
        "{a0:,.0f}–{a1:,.0f} token。",
    ),
    "note_sep": ("; ", "；"),
}
MSG = Catalog("checkpoint_density", {**_PAGE, **_FIGURES, **_NOTES}, COMMON, SWA)

__all__ = ["MSG"]
