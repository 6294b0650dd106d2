"""unified_memory in words (English / 中文): the page and its figures (``_PAGE``; a pool mode's
code ``mode_<kind>``, a workload phase's ``phase_<name>``), and what only the static figure
``plots/plot_unified_memory.py`` says (``_FIGURES``, keys ``fig_*``; it names the modes, the
phases and the axes as the page does). The calculator panel's words are ``CALC``."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON
from words.unified_memory_calculator import CALC

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Unified memory", "统一显存池"),
    "blurb": (
        "One byte buffer, MLA KV from one end and state slots from the other, vs static splits.",
        "一块显存，MLA KV 从一端增长、状态槽从另一端增长，对比静态划分。",
    ),
    "intro": (
        "**Two caches, one buffer.** A KDA hybrid needs two kinds of GPU memory: per-token "
        "MLA KV pages (blue, growing from the top end) and fixed-size KDA state slots (red, "
        "growing from the bottom end). A *static* split (SGLang's ratio) fixes the border "
        "in advance; a *unified* pool lets the two ends grow toward each other until they "
        "meet. The workload first sends many short chats (state-hungry: many requests), "
        "then a few long documents (KV-hungry). **Look at:** the buffer bars while you play "
        "the timeline (where the ends meet, which static region fills first), the "
        "running-requests curve in each phase, and how no single static ratio matches the "
        "unified pool in both phases.",
        "**两种缓存，一块显存。** KDA 混合模型需要两类显存：按 token 增长的 MLA KV 页（蓝色，"
        "从顶端增长）和固定大小的 KDA 状态槽（红色，从底端增长）。*静态*划分（SGLang 的比例）"
        "事先固定边界；*统一*池让两端相向增长，直到相遇。负载先是大量短对话（请求多、"
        "吃状态槽），"
        "再是少量长文档（吃 KV）。**请看：** 播放时间轴时的显存条（两端在何处相遇，哪个静态区域"
        "先满），两个阶段中的并发请求曲线，以及为什么没有任何一个静态比例能在两个阶段都追上"
        "统一池。",
    ),
    "f_nchat": ("chat requests (0-3000)", "短对话请求数（0-3000）"),
    "f_nlong": ("long-context requests (0-150)", "长上下文请求数（0-150）"),
    "f_chat_rate": ("chat arrivals / step", "每步到达的对话数"),
    "f_long_rate": ("long arrivals / step", "每步到达的长请求数"),
    "f_total": ("buffer per GPU (GiB, 4-192)", "每卡缓冲区（GiB，4-192）"),
    "f_mode": ("unified pool compaction", "统一池整理方式"),
    "mode_eager": ("eager", "立即整理"),
    "mode_lazy": ("lazy", "延迟整理"),
    "f_ratios": ("static ratios state:KV (1-8 values)", "静态比例 状态:KV（1-8 个值）"),
    "f_seed": ("seed", "随机种子"),
    "f_step": ("step", "步"),
    "b_run": ("Run", "运行"),
    "b_play": ("Play", "播放"),
    "b_pause": ("Pause", "暂停"),
    "v_nchat": ("chat requests", "短对话请求数"),
    "v_nlong": ("long-context requests", "长上下文请求数"),
    "v_chat_rate": ("chat arrivals per step", "每步到达的对话数"),
    "v_long_rate": ("long arrivals per step", "每步到达的长请求数"),
    "v_total": ("buffer size (GiB)", "缓冲区大小（GiB）"),
    "v_mode": ("unified mode", "统一池整理方式"),
    "v_ratio": ("static ratio", "静态比例"),
    "v_seed": ("seed", "随机种子"),
    "v_step": ("step", "步"),
    "e_ratios": (
        "static ratios: give 1 to 8 comma-separated numbers, got {got}",
        "静态比例：请给出 1 到 8 个以逗号分隔的数，收到 {got}",
    ),
    "e_counts": (
        "chat requests + long-context requests must be >= 1",
        "短对话请求数 + 长上下文请求数必须 >= 1",
    ),
    "e_no_run": ("run a replay first (press Run)", "请先运行一次回放（按“运行”）"),
    "progress_build": ("building the workload", "正在生成负载"),
    "progress_replay": (
        "replaying the unified pool and {n} static partitions",
        "正在回放统一池和 {n} 种静态划分",
    ),
    "n_buffer": ("buffer", "缓冲区"),
    "n_frontiers": ("frontiers", "两端位置"),
    "n_running": ("running requests", "运行中的请求"),
    "n_ratio": ("concurrency vs ratio", "并发与比例"),
    # pools and phases
    "pool_unified": ("unified ({mode})", "统一池（{mode}）"),
    "pool_static": ("static r={r:.3g}", "静态 r={r:.3g}"),
    "pool_best": ("best static r={r:.3g}", "最佳静态 r={r:.3g}"),
    "pool_for": ("static for {phase} r={r:.3g}", "为{phase}阶段调优的静态 r={r:.3g}"),
    "pool_tuned": (
        "static tuned for {phase} r={r:.3g}",
        "为{phase}阶段调优的静态 r={r:.3g}",
    ),
    "phase_chat": ("chat", "对话"),
    "phase_long-context": ("long-context", "长上下文"),
    "phase_all": ("all", "全部"),
    # buffer
    "t_buffer": ("The buffer at step {step} of {n}", "第 {step} 步（共 {n} 步）的缓冲区"),
    "t_buffer_full": (
        "The buffer at step {step} of {n} · {k} of {m} pools full (ends met)",
        "第 {step} 步（共 {n} 步）的缓冲区 · {m} 个池中 {k} 个已满（两端相遇）",
    ),
    "row_full": ("{pool} · full", "{pool} · 已满"),
    "x_offset_gib": ("byte offset in the buffer (GiB)", "缓冲区中的字节偏移（GiB）"),
    "seg_state_live": ("KDA state slots (live)", "KDA 状态槽（在用）"),
    "seg_state_holes": ("freed state slots (holes)", "已释放的状态槽（空洞）"),
    "seg_free": ("free", "空闲"),
    "seg_kv_holes": ("freed KV pages (holes)", "已释放的 KV 页（空洞）"),
    "seg_kv_live": ("MLA KV pages (live)", "MLA KV 页（在用）"),
    "h_segment": (
        "{seg}: {gib} GiB<br>running {run}, queued {queued}",
        "{seg}：{gib} GiB<br>运行 {run}，排队 {queued}",
    ),
    # frontiers
    "t_frontiers": (
        "Unified pool ({mode}): where the two ends are",
        "统一池（{mode}）：两端的位置",
    ),
    "x_step": ("scheduler step", "调度步"),
    "y_offset": ("byte offset (GiB)", "字节偏移（GiB）"),
    "y_moves": ("moves per step", "每步搬移次数"),
    "l_state_front": ("state frontier (grows up)", "状态端（向上增长）"),
    "l_kv_front": ("KV frontier (grows down)", "KV 端（向下增长）"),
    "h_state_end": ("step {x}<br>state end {y} GiB", "第 {x} 步<br>状态端 {y} GiB"),
    "h_kv_end": ("step {x}<br>KV end {y} GiB", "第 {x} 步<br>KV 端 {y} GiB"),
    "l_blocked": (
        "ends met: head of queue blocked ({n} steps)",
        "两端相遇：队首被阻塞（{n} 步）",
    ),
    "h_blocked": ("step {x}: blocked", "第 {x} 步：阻塞"),
    "l_moves": ("compaction moves ({n:,})", "整理搬移（{n:,} 次）"),
    "h_moves": ("step {x}<br>{y} moves", "第 {x} 步<br>搬移 {y} 次"),
    # running
    "t_running": (
        "Running requests over time (chat phase, then long-context)",
        "运行中的请求随时间变化（先对话阶段，后长上下文阶段）",
    ),
    "y_requests": ("requests", "请求数"),
    "l_off_axis": (
        "{pool} (ends at step {n:,}, off the axis)",
        "{pool}（结束于第 {n:,} 步，超出坐标轴）",
    ),
    "h_running": ("{pool}<br>step {x}<br>running {y}", "{pool}<br>第 {x} 步<br>运行 {y}"),
    "l_queued": ("queued (unified)", "排队（统一池）"),
    "h_queued": ("step {x}<br>queued {y}", "第 {x} 步<br>排队 {y}"),
    # ratio
    "t_ratio": (
        "Mean running requests: unified pool vs static ratios",
        "平均运行请求数：统一池对比静态比例",
    ),
    "x_ratio": ("static ratio state : KV (log scale)", "静态比例 状态 : KV（对数坐标）"),
    "y_mean_running": ("mean running requests", "平均运行请求数"),
    "l_static": ("static partition", "静态划分"),
    "h_static": ("ratio {x}<br>mean running {y}", "比例 {x}<br>平均运行 {y}"),
    "l_unified": ("unified pool {c:.1f}", "统一池 {c:.1f}"),
    "h_unified": ("unified pool<br>mean running {c:.1f}", "统一池<br>平均运行 {c:.1f}"),
    "l_tuned": ("static tuned for {phase} (r={r:.3g})", "为{phase}阶段调优的静态（r={r:.3g}）"),
    "h_tuned": ("tuned for {phase}<br>ratio {r:.3g}", "为{phase}阶段调优<br>比例 {r:.3g}"),
    "l_best": ("best static in hindsight (r={r:.3g})", "事后看最佳的静态划分（r={r:.3g}）"),
    "h_best": ("best static<br>ratio {x}<br>{y}", "最佳静态<br>比例 {x}<br>{y}"),
    # summary table
    "th": (
        "| pool | mean running | peak | mean queueing (steps) | makespan | ends met (steps) "
        "| moves |",
        "| 显存池 | 平均运行数 | 峰值 | 平均排队（步） | 总步数 | 两端相遇（步） | 搬移次数 |",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "One buffer, two ends: unified pool vs static partitions",
        "一块缓冲区，两端增长：统一池 vs 静态划分",
    ),
    "fig_title_tl": (
        "Unified pool ({mode}): state grows from the bottom, KV from the top",
        "统一池（{mode}）：状态从底端增长，KV 从顶端增长",
    ),
    "fig_offset": ("byte offset in the buffer", "缓冲区中的字节偏移"),
    "fig_state": ("KDA state slots", "KDA 状态槽"),
    "fig_kv": ("MLA KV pages", "MLA KV 页"),
    "fig_met": ("ends met: head of queue waits", "两端相遇：队首请求等待"),
    "fig_title_run": ("Running requests", "运行中的请求"),
    "fig_unified": ("unified", "统一池"),
    "fig_best": ("best static r={r:.2g}", "最佳静态 r={r:.2g}"),
    "fig_tuned": ("static for {phase} r={r:.2g}", "为{phase}阶段调优 r={r:.2g}"),
    "fig_title_ratio": ("Concurrency vs static ratio", "并发与静态比例"),
    "fig_best_pt": ("best static {c:.1f}", "最佳静态 {c:.1f}"),
    "fig_makespan": ("{name} · {n:,} steps", "{name} · {n:,} 步"),
    "fig_ratio": ("static ratio r (state : KV bytes)", "静态比例 r（状态 : KV 字节）"),
    "fig_more": ("→ runs to step {n:,}", "→ 持续到第 {n:,} 步"),
    "fig_source": (
        "Data: simulated scheduler on a chat-then-long-context workload · "
        "Kimi K3 per GPU, TP8, bf16, {size} buffer, full reservation, FIFO",
        "数据：先对话后长上下文负载的调度模拟 · Kimi K3 每卡，TP8，bf16，{size} 缓冲区，"
        "全量预留，FIFO",
    ),
}
MSG = Catalog("unified_memory", {**_PAGE, **_FIGURES}, COMMON, CALC)

__all__ = ["MSG"]
