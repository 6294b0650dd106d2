"""Checkpoint density app: its explanation (English / 中文), phrase table and summary text."""

from __future__ import annotations

from apps.ui.i18n import COMMON, Translator
from kda_core.studies import density as ds

TR = Translator(
    COMMON,
    {
        "A checkpoint every K tokens: memory ~1/K, replay ~flat": (
            "每 K 个 token 一个检查点：显存 ~1/K，重放几乎不变"
        ),
        "A checkpoint every K tokens: memory ~1/K, replay ~K": (
            "每 K 个 token 一个检查点：显存 ~1/K，重放 ~K"
        ),
        "peak state (GiB)": "状态峰值 (GiB)",
        "peak state": "状态峰值",
        "replay per hit (tokens)": "每次命中的重放量（token）",
        "checkpoint interval K (tokens, log scale)": "检查点间隔 K（token，对数坐标）",
        "mean TTFT (s)": "平均首 token 延迟 (s)",
        "mean TTFT": "平均首 token 延迟",
        "TTFT p50": "首 token 延迟 p50",
        "TTFT": "首 token 延迟",
        "budget": "预算",
        "optimum at": "最优点：",
        "optimum": "最优点",
        "analytic memory: distinct prefix / K": "解析显存：不同前缀 / K",
        "analytic memory": "解析显存",
        "analytic replay: ideal match − floor to K (KV kept for every token)": (
            "解析重放：理想匹配点 − 向下取整到 K（每个 token 的 KV 都保留）"
        ),
        "analytic replay": "解析重放",
        "analytic state hit (no budget)": "解析状态命中（无预算）",
        "analytic": "解析值",
        "ideal token hit": "理想 token 命中",
        "ideal": "理想值",
        "A token hit is not a state hit": "token 命中不等于状态命中",
        "hit rate (share of input tokens)": "命中率（占输入 token 的比例）",
        "state hit": "状态命中",
        "token hit": "token 命中",
        "tokens/hit": "token/次命中",
        "Cumulative hit rates over the trace": "trace 上的累计命中率",
        "the shaded gap is replayed or re-prefilled": "阴影部分需要重放或重新预填充",
        "requests served": "已服务的请求",
        "cumulative hit rate": "累计命中率",
        "token hit (KV could reuse)": "token 命中（KV 可复用）",
        "state hit (KDA can resume)": "状态命中（KDA 可恢复）",
        "after": "之后：",
        "Memory vs state hit: the Pareto frontier": "显存与状态命中：Pareto 前沿",
        "peak state memory (GiB per GPU, log scale)": "状态显存峰值（每卡 GiB，对数坐标）",
        "state hit rate": "状态命中率",
        "Pareto frontier (◆)": "Pareto 前沿（◆）",
        "Pareto frontier": "Pareto 前沿",
        "frontier": "前沿",
        "Policies at one budget": "同一预算下的各策略",
        "of state per GPU": "每卡状态显存",
        "checkpoint policy": "检查点策略",
        "checkpoints": "检查点",
        "evictions": "驱逐",
        "interval": "间隔",
        "unlimited": "不限",
        "best K": "最优 K",
        "block": "块大小",
        "MiB per checkpoint": "MiB/检查点",
        "Runs in this session": "本会话的运行",
        "workload": "负载",
        "intervals": "间隔数",
        "conversation trace (first 1,000 requests)": "对话 trace（前 1,000 个请求）",
        "conversation trace (all 12,031 requests, ~1 min)": (
            "对话 trace（全部 12,031 个请求，约 1 分钟）"
        ),
        "Mooncake synthetic trace": "Mooncake 合成 trace",
        "multi-turn chat (synthetic)": "多轮对话（合成）",
        "agentic sessions (synthetic)": "智能体会话（合成）",
        "one-shot documents (synthetic)": "一次性文档（合成）",
        "Memory, replay, TTFT": "显存、重放、首 token 延迟",
        "Token vs state hit": "token 与状态命中",
        "Hit rates over the trace": "trace 上的命中率",
        "Policies": "策略",
    },
)
GIB = float(1 << 30)
EN = """**How often should a KDA state be checkpointed?** A prefix cache can only resume a request
at a token where the recurrent state was saved. Save it every K tokens and the saved states take
memory ~1/K, but a request whose prefix matches between two checkpoints must *replay* ~K/2
tokens from the last one. Whether the simulated replay per hit really follows K depends on
the trace and the budget (under a budget, dense checkpoints evict each other): the title and
the note in the middle panel say what each curve does, with its numbers.
**Look at:** the three panels against K (memory falls; replay per hit against the analytic
curve; TTFT has a minimum: the star), the gap between the *token* hit rate (what a KV cache
would reuse) and the *state* hit rate (what KDA can actually resume), the Pareto frontier,
and how the policies (SGLang, Marconi, vLLM) compare at one budget."""
ZH = """**KDA 状态应该多久存一次检查点？** 前缀缓存只能在保存了递推状态的 token 处恢复请求。
每 K 个 token 存一次，状态占用的显存约为 1/K；但前缀匹配点落在两个检查点之间的请求，必须从上一个
检查点*重放*约 K/2 个 token。模拟的每次命中重放量是否真的随 K 增长，取决于 trace 和预算
（有预算时，过密的检查点会互相驱逐）：标题和中间子图的注释按曲线给出各自的走势和数字。
**请看：** 随 K 变化的三幅子图（显存下降；每次命中的重放量与解析曲线对比；
首 token 延迟有最小值：星号），*token* 命中率（KV 缓存能复用的部分）与*状态*
命中率（KDA 真正能恢复的部分）之间的差距，Pareto 前沿，以及在同一预算下各策略（SGLang、Marconi、
vLLM）的对比。"""


def summary_markdown(s: ds.DensitySweep, n_requests: int) -> str:
    lines = [
        f"**{s.trace_name}**: {n_requests:,} requests, block {s.block_size} tokens, "
        f"{s.state_bytes_per_checkpoint / (1 << 20):.1f} MiB per checkpoint ({s.model}); "
        f"ideal token hit **{s.analytic.ideal_token_hit_rate:.1%}**",
        "",
        "| budget | best K | mean TTFT | state hit | token hit | peak state |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for j, lab in enumerate(s.budget_labels):
        i = int(s.optimum[j])
        lines.append(
            f"| {lab} | **{int(s.intervals[i]):,}** | {s.ttft_mean_s[i, j]:.3f} s | "
            f"{s.state_hit_rate[i, j]:.1%} | {s.token_hit_rate[i, j]:.1%} | "
            f"{s.peak_state_bytes[i, j] / GIB:.2f} GiB |"
        )
    return "\n".join(lines)
