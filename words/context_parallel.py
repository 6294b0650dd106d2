"""context_parallel in words (English / 中文): the page and its figures (``_PAGE``), and what only
the static figure ``plots/plot_context_parallel.py`` says (``_FIGURES``, keys ``fig_*``; it
shares the page's names of the scans, the phases, the ranks and the test bound)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Context parallel", "上下文并行"),
    "blurb": (
        "Split one sequence over P ranks: a prefix scan of affine maps, not a KV broadcast.",
        "把一条序列切到 P 个 rank 上：扫描仿射映射，而不是广播 KV。",
    ),
    "intro": (
        "**Context parallelism for KDA: scan the maps, do not broadcast the KV.** An "
        "attention layer split over P ranks can send every rank the other ranks' KV. A KDA "
        "layer cannot: the state after rank 1's tokens depends on the state rank 0 ended "
        "with, and states of different segments do not add. What does compose is each "
        "segment's *affine map* S → M S + b. **Each rank** computes its map in one chunked "
        "pass; an **exclusive prefix scan** over the maps (all-gather + fold, or log-depth "
        "with send/recv) hands every rank its incoming state; each rank then finishes its "
        "outputs. **Look at:** the messages per step (a map is H·K·(K+V) numbers, a state "
        "H·K·V — whatever T is), the state each rank receives (equal to the true one), "
        "errors at float64 round-off, and bytes against an MLA KV all-gather that grows "
        "with T. Packed documents reset the scan at their starts.",
        "**KDA 的上下文并行：扫描映射，而不是广播 KV。** 注意力层切到 P 个 rank 上时，可以把"
        "其他 rank 的 KV 发给每个 rank。KDA 层不行：rank 1 处理完之后的状态取决于 rank 0 "
        "结束时的状态，而不同段的状态不能相加。能够组合的是每一段的*仿射映射* S → M S + b。"
        "**每个 rank** 用一次分块计算得到自己的映射；对这些映射做一次**排他前缀扫描**"
        "（全收集 + 折叠，或用 send/recv 的对数深度扫描），每个 rank 就拿到自己的初始状态，"
        "然后完成自己的"
        "输出。**请看：** 每一步的消息（一个映射是 H·K·(K+V) 个数，一个状态是 H·K·V 个数，"
        "与 T 无关）、每个 rank 收到的状态（与真实状态相同）、float64 舍入级的误差，以及与随 "
        "T 增长的 MLA KV 全收集相比的字节数。打包的多个文档在各自的起点重置扫描。",
    ),
    "f_T": ("tokens T (16-{max})", "token 数 T（16-{max}）"),
    "f_P": ("ranks P (1-{max})", "rank 数 P（1-{max}）"),
    "f_scan": ("scan", "扫描方式"),
    "f_docs": ("document lengths (empty: one document)", "文档长度（留空：一个文档）"),
    "f_rank": ("rank to inspect", "查看的 rank"),
    "f_seed": ("seed", "随机种子"),
    "b_run": ("Run", "运行"),
    "v_T": ("T", "T"),
    "v_P": ("ranks P", "rank 数 P"),
    "v_scan": ("scan", "扫描方式"),
    "v_rank": ("rank to inspect", "查看的 rank"),
    "v_seed": ("seed", "随机种子"),
    "v_doc": ("document length", "文档长度"),
    "e_docs_chars": (
        "document lengths: at most {n} characters",
        "文档长度：最多 {n} 个字符",
    ),
    "e_docs_count": (
        "document lengths: give 1 to {n} comma-separated integers",
        "文档长度：请给出 1 到 {n} 个以逗号分隔的整数",
    ),
    "e_docs_sum": (
        "document lengths must sum to T = {T}, got {got}",
        "文档长度之和必须等于 T = {T}，收到 {got}",
    ),
    "e_P_T": (
        "ranks P must be in [1, {hi}] (at most T), got {got}",
        "rank 数 P 必须在 [1, {hi}] 内（不超过 T），收到 {got}",
    ),
    "n_steps": ("steps", "扫描步骤"),
    "n_state": ("state", "状态"),
    "n_exactness": ("exactness", "精确性"),
    "n_bytes": ("bytes", "字节数"),
    "n_speedup": ("speedup", "加速比"),
    "scan_logdepth": ("log-depth scan", "对数深度扫描"),
    "scan_allgather": ("all-gather + fold", "全收集 + 折叠"),
    "o_logdepth": ("log-depth", "对数深度"),
    "o_allgather": ("all-gather + fold", "全收集 + 折叠"),
    "t_steps": (
        "Ranks and scan steps ({scan}, P = {P}, T = {T})",
        "rank 与扫描步骤（{scan}，P = {P}，T = {T}）",
    ),
    "x_tokens": ("token position", "token 位置"),
    "step_n": ("step {n}", "第 {n} 步"),
    "local": ("local pass", "本地计算"),
    "finish": ("finish", "收尾"),
    "x_rank": ("rank", "rank"),
    "rank_n": ("rank {r}", "rank {r}"),
    "kind_map": ("map (M, b)", "映射 (M, b)"),
    "kind_state": ("state b", "状态 b"),
    "h_segment": ("rank {r}: [{a}, {b})", "rank {r}：[{a}, {b})"),
    "h_msg": ("rank {src} → {dst}: {kind}, {n:,} B", "rank {src} → {dst}：{kind}，{n:,} B"),
    "t_state": (
        "State handed to rank {r} (head 0) and its difference from the truth",
        "交给 rank {r} 的状态（头 0）及其与真实状态之差",
    ),
    "st_received": ("received S_in", "收到的 S_in"),
    "st_diff": ("S_in − true state (max |Δ| {d:.1e})", "S_in − 真实状态（max |Δ| {d:.1e}）"),
    "x_value": ("value channel", "value 通道"),
    "y_key": ("key channel", "key 通道"),
    "t_exact": (
        "Outputs per rank vs one rank (float64)",
        "每个 rank 的输出与单 rank 相比（float64）",
    ),
    "y_rel": ("relative error of o (log)", "o 的相对误差（对数）"),
    "bound": ("test bound 1e-10", "测试阈值 1e-10"),
    "t_bytes": (
        "Bytes each rank sends (T = {T}, P = {P})",
        "每个 rank 发送的字节数（T = {T}，P = {P}）",
    ),
    "y_bytes": ("bytes (log)", "字节（对数）"),
    "g_demo": ("this demo's layer", "本演示的层"),
    "g_k3": ("a K3 layer (8 heads × 128, fp32)", "K3 的一层（8 个头 × 128，fp32）"),
    "l_kv": ("MLA KV all-gather", "MLA KV 全收集"),
    "t_speedup": (
        "Modelled speed-up of one K3 layer (8 heads, measured step costs)",
        "K3 一层的模型加速比（8 个头，实测的步骤开销）",
    ),
    "l_ctx": ("{scan}, T = {T}", "{scan}，T = {T}"),
    "x_P": ("ranks P", "rank 数 P"),
    "y_speedup": ("speed-up vs one rank", "相对单 rank 的加速比"),
    "l_ideal": ("P (ideal)", "P（理想）"),
    "s_run": (
        "- {P} ranks, {T} tokens, random inputs (seed {seed}), {docs}: worst relative error "
        "of the outputs **{worst:.1e}**, final state **{final:.1e}**\n- scan of this demo's "
        "layer: at most **{sent:,} B** sent per rank\n- one K3 layer, same context and ranks: "
        "the scan's messages **{k3:,} B** per rank, an MLA KV all-gather **{kv:,} B**",
        "- {P} 个 rank，{T} 个 token，随机输入（种子 {seed}），{docs}：输出最大相对误差 "
        "**{worst:.1e}**，最终状态 **{final:.1e}**\n- 本演示层的扫描：每个 rank 最多发送 "
        "**{sent:,} B**\n- K3 的一层，同样的上下文和 rank：扫描的消息每个 rank **{k3:,} B**，"
        "MLA KV 全收集 **{kv:,} B**",
    ),
    "docs_1": ("1 document", "1 个文档"),
    "docs_n": ("{n} documents", "{n} 个文档"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "KDA context parallelism: scan the maps, do not broadcast KV",
        "KDA 上下文并行：扫描仿射映射，而不是广播 KV",
    ),
    "fig_title_b": ("Bytes sent per rank, P = {P}", "每个 rank 发送的字节数，P = {P}"),
    "fig_x_b": ("context T (tokens)", "上下文长度 T（token）"),
    "fig_y_b": ("bytes per rank", "每个 rank 的字节数"),
    "fig_kv": ("MLA KV all-gather (one K3 layer)", "MLA KV 全收集（K3 的一层）"),
    "fig_cross": ("KV > scan\nfrom {T:,} tokens", "超过 {T:,} 个 token\nKV 多于扫描"),
    "fig_title_s": ("Modelled speed-up, T = {T}", "模型加速比，T = {T}"),
    "fig_title_t": ("Slowest rank's time (log-depth)", "最慢 rank 的时间（对数深度）"),
    "fig_y_t": ("share of wall time", "占总时间的比例"),
    "fig_phase_scan": ("scan (incl. waiting)", "扫描（含等待）"),
    "fig_title_e": ("Error per rank (P = {P})", "每个 rank 的误差（P = {P}）"),
    "fig_y_e": ("rel. error of o vs one rank", "o 相对单 rank 的误差"),
    "fig_source": (
        "Data: one KDA layer, H = {H}, K = V = {K}, {dtype}; costs measured on a "
        "2-core CPU, gloo on loopback; errors: in-process ranks, float64",
        "数据：一层 KDA，H = {H}，K = V = {K}，{dtype}；开销在 2 核 CPU 上测得，"
        "gloo 走回环；误差：进程内 rank，float64",
    ),
}
MSG = Catalog("context_parallel", {**_PAGE, **_FIGURES}, COMMON)

__all__ = ["MSG"]
