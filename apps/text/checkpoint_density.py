"""checkpoint_density's words (English / 中文): the catalog (with the study's own replay notes,
``kda_core.studies.density.notes.MESSAGES``), the summary, the runs table."""

from __future__ import annotations

from apps.text.checkpoint_density_swa import SWA
from apps.text.common import COMMON
from apps.text.trace_hits import HITS
from apps.ui.catalog import Catalog, T
from kda_core.studies import density as ds
from kda_core.studies.density import notes

GIB = float(1 << 30)
_APP: dict[str, tuple[str, str]] = {
    "title": ("Checkpoint density", "检查点密度"),
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
MSG = Catalog(
    "checkpoint_density",
    {**_APP, **{f"note_{k}": v for k, v in notes.MESSAGES.items()}},
    COMMON,
    SWA,
    HITS,
)


def budget(label: str, t: T) -> str:
    """A budget label of the study ("8 GiB", "unlimited") in ``t``'s language."""
    return t("budget_unlimited") if label == "unlimited" else label


def summary_markdown(s: ds.DensitySweep, n_requests: int, t: T) -> str:
    lines = [
        t("s_head", trace=f"`{s.trace_name}`", n=n_requests, block=s.block_size,
          mib=s.state_bytes_per_checkpoint / (1 << 20), model=s.model,
          ideal=s.analytic.ideal_token_hit_rate),
        "",
        t("s_th"),
        "|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for j, lab in enumerate(s.budget_labels):
        i = int(s.optimum[j])
        lines.append(
            f"| {budget(lab, t)} | **{int(s.intervals[i]):,}** | {s.ttft_mean_s[i, j]:.3f} s | "
            f"{s.state_hit_rate[i, j]:.1%} | {s.token_hit_rate[i, j]:.1%} | "
            f"{s.peak_state_bytes[i, j] / GIB:.2f} GiB |"
        )
    lines += ["", t("s_replay"), ""]
    lines += [f"- {line}" for line in ds.replay_note(s, t.code).split("\n")]
    return "\n".join(lines)


def runs_markdown(hist: list, t: T) -> str:
    body = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in hist)
    return f"{t('runs_title')}\n\n{t('runs_th')}\n|---|---|---:|---|\n{body}"
