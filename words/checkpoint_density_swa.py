"""checkpoint_density's SWA-vs-KDA panel in words (English / 中文): ``SWA``, a base of
``words.checkpoint_density.MSG`` (its keys shadow none of the app's own)."""

from __future__ import annotations

from words.catalog import Catalog

SWA = Catalog(
    "checkpoint_density_swa",
    {
        "acc_swa": (
            "Why a sliding-window checkpoint does not carry over to KDA",
            "为什么滑动窗口（SWA）的检查点方法不能照搬到 KDA",
        ),
        "swa_intro": (
            "A sliding-window attention (SWA) layer reads only the K/V of the last W tokens: it "
            "can resume at **any** position whose W preceding tokens' K/V are held, and those W "
            "tokens' inputs rebuild it. A KDA layer's state folds the whole history: it resumes "
            "**only** where a state was saved, and replays everything after it. Same requests, "
            "checkpoints every k tokens in both caches, no budget.",
            "滑动窗口注意力（SWA）层只读取最近 W 个 token 的 K/V：只要某位置之前 W 个 token 的 "
            "K/V 还在，就能在**任意**位置恢复，而且这 W 个 token 的输入就能重建它。"
            "KDA 层的状态折叠了全部历史：只能在**保存过状态**的位置恢复，"
            "并重放其后的所有 token。同一批请求，两种缓存都每 k 个 token 存一个检查点，不设预算。",
        ),
        "f_swa_workload": ("Requests", "请求"),
        "swa_wl_chat": ("multi-turn chat (30 sessions)", "多轮对话（30 个会话）"),
        "swa_wl_agentic": ("agentic sessions", "智能体会话"),
        "f_swa_intervals": (
            "Checkpoint every k tokens (comma-separated, multiples of 64)",
            "每 k 个 token 一个检查点（逗号分隔，64 的倍数）",
        ),
        "f_swa_window": ("SWA window W (tokens, multiple of 64)", "SWA 窗口 W（token，64 的倍数）"),
        "f_swa_heads": (
            "SWA K/V heads per layer (1-96; 96 = as many as the KDA heads)",
            "SWA 每层 K/V 头数（1-96；96 = 与 KDA 头数相同）",
        ),
        "b_swa": ("Compare", "对比"),
        "v_swa_workload": ("requests", "请求"),
        "v_swa_interval": ("checkpoint interval k", "检查点间隔 k"),
        "v_swa_window": ("SWA window W", "SWA 窗口 W"),
        "v_swa_heads": ("SWA K/V heads", "SWA K/V 头数"),
        "e_swa_intervals": (
            "checkpoint intervals: give 1 to {n} comma-separated integers, got {got}",
            "检查点间隔：请填写 1 到 {n} 个以逗号分隔的整数，收到 {got}",
        ),
        "e_swa_multiple": (
            "{what} must be a multiple of the trace's block size {b}, got {k}",
            "{what} 必须是 trace 块大小 {b} 的倍数，收到 {k}",
        ),
        "n_swa_cost": ("checkpoint cost", "检查点开销"),
        "n_swa_resume": ("replay and bytes on the same requests", "同一批请求的重放量与字节数"),
        "t_swa_cost": (
            "What one checkpoint costs: {model}, {layers} linear layers, one GPU",
            "一个检查点的开销：{model}，{layers} 个线性层，单卡",
        ),
        "x_swa_window": ("SWA window W (tokens)", "SWA 窗口 W（token）"),
        "swa_y_gib": ("GiB per checkpoint", "每个检查点 GiB"),
        "l_swa_window": ("SWA: K/V of the last W tokens", "SWA：最近 W 个 token 的 K/V"),
        "swa_l_kda_ckpt": ("KDA: state + conv window", "KDA：状态 + 卷积窗口"),
        "swa_a_crossover": ("same cost at W = {w:,.1f}", "W = {w:,.1f} 时开销相同"),
        "h_swa_cost": ("W = {x}<br>{y} GiB", "W = {x}<br>{y} GiB"),
        "t_swa_resume": (
            "What a hit needs: {n:,} requests of {trace}, {m:,} matched tokens, W = {w:,}",
            "命中需要什么：{trace} 的 {n:,} 个请求，共匹配 {m:,} 个 token，W = {w:,}",
        ),
        "swa_x_interval": ("checkpoint every k tokens", "每 k 个 token 一个检查点"),
        "swa_y_replay": ("tokens replayed (sum)", "重放 token 数（总和）"),
        "swa_y_tib": ("TiB held at the end", "结束时占用 TiB"),
        "l_swa_replay": ("SWA: resume where the window is held", "SWA：在窗口仍在处恢复"),
        "l_swa_rebuilt": (
            "SWA: or rebuild the window from its last W tokens",
            "SWA：或用最后 W 个 token 重建窗口",
        ),
        "swa_l_kda_replay": (
            "KDA: replay from the last saved state",
            "KDA：从上一个保存的状态重放",
        ),
        "l_swa_bytes": ("SWA K/V blocks held", "SWA 保留的 K/V 块"),
        "swa_l_kda_bytes": ("KDA states held", "KDA 保留的状态"),
        "swa_h_tokens": ("k = {x}<br>{y} tokens", "k = {x}<br>{y} 个 token"),
        "swa_h_tib": ("k = {x}<br>{y} TiB", "k = {x}<br>{y} TiB"),
        "s_swa_head": (
            "**One checkpoint** ({model}): SWA K/V **{tok:.2f} MiB per token**; KDA state + conv "
            "window **{kda:.1f} MiB**, the K/V of **{cross:,.1f} tokens**. A shorter window is the "
            "cheaper checkpoint, a longer one the dearer.",
            "**一个检查点**（{model}）：SWA 每个 token 的 K/V **{tok:.2f} MiB**；"
            "KDA 状态 + 卷积窗口 **{kda:.1f} MiB**，相当于 **{cross:,.1f} 个 token** 的 K/V。"
            "窗口更短则检查点更便宜，更长则更贵。",
        ),
        "s_swa_th": (
            "| k | SWA resume | KDA resume | SWA replay | rebuilt | KDA replay |",
            "| k | SWA 恢复点总和 | KDA 恢复点总和 | SWA 重放 | 重建窗口 | KDA 重放 |",
        ),
        "s_swa_tail": (
            "Every KDA resume point is also an SWA one; where checkpoints are closer than the "
            "window, SWA windows overlap and reach the match more often, and rebuilding the "
            "window caps SWA's replay at W per request, while KDA replays everything back to "
            "its checkpoint.",
            "每个 KDA 恢复点也是 SWA 的恢复点；检查点间隔小于窗口时，SWA 窗口相互重叠，更常直接到达"
            "匹配点；重建窗口把 SWA 每个请求的重放限制在 W 以内，而 KDA 要一直重放回检查点。",
        ),
    },
)


__all__ = ["SWA"]
