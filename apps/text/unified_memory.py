"""Unified memory app: its explanation (English / 中文), phrase table and summary text."""

from __future__ import annotations

from apps.ui.i18n import COMMON, Translator
from kda_core.studies import memory as mem

TR = Translator(
    COMMON,
    {
        "pool": "显存池",
        "mean running": "平均运行数",
        "mean queueing (steps)": "平均排队（步）",
        "makespan": "总步数",
        "ends met (steps)": "两端相遇（步）",
        "moves": "搬移次数",
        "unified (eager)": "统一池（eager）",
        "unified (lazy)": "统一池（lazy）",
        "best static": "最佳静态",
        "static for": "静态，针对",
        "static tuned for": "为此调优的静态：",
        "tuned for": "调优目标：",
        "chat": "对话",
        "long-context": "长上下文",
        "The buffer at step": "显存缓冲区：第",
        "of": "步，共",
        "full": "已满",
        "byte offset in the buffer (GiB)": "缓冲区中的字节偏移 (GiB)",
        "KDA state slots (live)": "KDA 状态槽（在用）",
        "freed state slots (holes)": "已释放的状态槽（空洞）",
        "freed KV pages (holes)": "已释放的 KV 页（空洞）",
        "MLA KV pages (live)": "MLA KV 页（在用）",
        "Unified pool (eager): where the two ends are": "统一池（eager）：两端的位置",
        "Unified pool (lazy): where the two ends are": "统一池（lazy）：两端的位置",
        "byte offset (GiB)": "字节偏移 (GiB)",
        "moves per step": "每步搬移次数",
        "state frontier (grows up)": "状态前沿（向上增长）",
        "KV frontier (grows down)": "KV 前沿（向下增长）",
        "state end": "状态端",
        "KV end": "KV 端",
        "ends met: head of queue blocked": "两端相遇：队首被阻塞",
        "blocked": "阻塞",
        "compaction moves": "整理搬移",
        "Running requests over time (chat phase, then long-context)": (
            "运行中的请求随时间变化（先对话阶段，后长上下文阶段）"
        ),
        "ends at step": "结束于第",
        "off the axis": "步，超出坐标轴",
        "queued (unified)": "排队（统一池）",
        "Mean running requests: unified pool vs static ratios": (
            "平均运行请求数：统一池对比静态比例"
        ),
        "static ratio state : KV (log scale)": "静态比例 状态 : KV（对数坐标）",
        "mean running requests": "平均运行请求数",
        "static partition": "静态划分",
        "unified pool": "统一池",
        "best static in hindsight": "事后看最佳的静态划分",
        "Buffer": "缓冲区",
        "Frontiers": "前沿",
        "Running requests": "运行中的请求",
        "Concurrency vs ratio": "并发与比例",
        "unified pool compaction": "统一池整理方式",
        "Pool comparison": "显存池对比",
    },
)
EN = """**Two caches, one buffer.** A KDA hybrid needs two kinds of GPU memory: per-token MLA KV
pages (blue, growing from the top end) and fixed-size KDA state slots (red, growing from the bottom
end). A *static* split (SGLang's ratio) fixes the border in advance; a *unified* pool lets the
two ends grow toward each other until they meet. The workload first sends many short chats
(state-hungry: many requests), then a few long documents (KV-hungry). **Look at:** the buffer
bars while you play the timeline (where the ends meet, which static region fills first), the
running-requests curve in each phase, and how no single static ratio matches the unified pool
in both phases."""
ZH = """**两种缓存，一块显存。** KDA 混合模型需要两类显存：
按 token 增长的 MLA KV 页（蓝色，从顶端增长）和固定大小的 KDA 状态槽（红色，从底端增长）。
*静态*划分（SGLang 的比例）事先固定边界；*统一*池让两端相向增长，直到相遇。
负载先是大量短对话（请求多、吃状态槽），再是少量长文档（吃 KV）。**请看：**
播放时间轴时的显存条（两端在何处相遇，哪个静态区域先满），两个阶段中的并发请求曲线，以及为什么
没有任何一个静态比例能在两个阶段都追上统一池。"""


def summary_markdown(c: mem.Comparison) -> str:
    rows = [("unified (" + c.unified.kind + ")", c.unified)]
    rows.append((f"best static r={c.best_ratio:.3g}", c.best_static))
    rows += [
        (f"static for {n} r={r:.3g}", s)
        for n, r, s in zip(c.phase_names, c.phase_ratios, c.phase_static)
    ]
    out = [
        "| pool | mean running | peak | mean queueing (steps) | makespan | ends met "
        "(steps) | moves |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        out.append(
            f"| {label} | {r.mean_concurrency:.1f} | {r.peak_concurrency} | "
            f"{r.mean_queue_delay:.1f} | {r.makespan} | {r.blocked_steps} | "
            f"{r.total_moves:,} |"
        )
    return "\n".join(out)
