"""chunk_scan in words (English / 中文): the page and its figures (``_PAGE``), and what only the
static figures ``plots/plot_chunk_agreement.py`` and ``plot_affine_composition.py`` say
(``_FIGURES``, keys ``fig_*``; they share the page's names of the inputs and groupings)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Chunk scan", "分块扫描"),
    "blurb": (
        "Chunked equals recurrent; segment maps compose in any grouping but not in any order.",
        "分块计算等于逐步递推；段映射可任意结合，但不可交换顺序。",
    ),
    "intro": (
        "**Chunked = recurrent, and why checkpoints compose.** KDA's state update is an "
        "*affine map* S → M S + b for every token; a run of tokens (a segment, a chunk) is "
        "one composed map. The chunkwise kernel evaluates these maps 64 tokens at a time "
        "with matrix multiplies instead of one token at a time. **Look at:** the errors "
        "against the token recurrence (float64 round-off, ~1e-15, for every chunk size); "
        "how chunking cuts the *sequential* steps by C while doing a bit *more* arithmetic; "
        "segment maps grouped any way give the same map (associative: a parallel scan "
        "works), but applied in another order they give a different state (not "
        "commutative: a cache may only resume a prefix from a checkpoint *of that "
        "prefix*).",
        "**分块计算等于逐步递推，以及检查点为何可以组合。** KDA 每个 token 的状态更新是一个"
        "*仿射映射* S → M S + b；一段 token（一个段、一个块）就是一个复合映射。分块内核每次用"
        "矩阵乘法处理 64 个 token，而不是逐个 token。**请看：** 与逐步递推相比的误差（float64 "
        "舍入误差，约 1e-15，任何块大小都是如此）；分块把*串行*步数减少为 1/C，但算术量略*多*；"
        "段映射无论怎样结合都得到同一个映射（结合律：可以并行扫描），但换一个顺序得到不同的状态"
        "（不满足交换律：缓存只能从*该前缀自己的*检查点恢复）。",
    ),
    # inputs
    "f_source": ("inputs", "输入"),
    "o_random": ("random inputs", "随机输入"),
    "o_text": ("tiny model on text", "小模型读文本"),
    "f_text": ("text (tiny model, 3-2048 bytes)", "文本（小模型，3-2048 字节）"),
    "f_seed": ("seed", "随机种子"),
    "f_chunk": ("chunk size C (1-256)", "块大小 C（1-256）"),
    "f_lengths": ("segment lengths (2-5 values)", "段长度（2-5 个值）"),
    "f_head": ("head", "头"),
    "f_repeats": ("repeats (1-5)", "重复次数（1-5）"),
    "b_run": ("Run", "运行"),
    "b_time": ("Measure speed", "测量速度"),
    "md_speed": ("**Speed** (wall clock on this machine)", "**速度**（本机实测耗时）"),
    # the names the checks use
    "v_source": ("source", "输入来源"),
    "v_seed": ("seed", "随机种子"),
    "v_chunk": ("chunk size", "块大小"),
    "v_length": ("segment length", "段长度"),
    "v_head": ("head", "头"),
    "v_repeats": ("repeats", "重复次数"),
    "e_lengths": (
        "segment lengths: give 2 to {n} comma-separated integers in [1, 256], got {got}",
        "段长度：请给出 2 到 {n} 个 [1, 256] 内、以逗号分隔的整数，收到 {got}",
    ),
    "e_text": (
        "text must be 3 to 2048 UTF-8 bytes long, got {n}",
        "文本必须为 3 到 2048 个 UTF-8 字节，收到 {n}",
    ),
    "e_sum": (
        "segment lengths must sum to at most the text's {n} bytes, got {got}",
        "段长度之和不能超过文本的 {n} 个字节，收到 {got}",
    ),
    # figure names (the CSV buttons)
    "n_agreement": ("chunked vs recurrent", "分块与逐步递推"),
    "n_cost": ("what chunking buys", "分块带来什么"),
    "n_groupings": ("groupings", "结合方式"),
    "n_orders": ("orders", "顺序"),
    "n_maps": ("transition matrices", "转移矩阵"),
    "n_timing": ("measured speed", "实测速度"),
    # agreement
    "src_random": ("random (seed {seed})", "随机输入（种子 {seed}）"),
    "src_model": ("TinyHybrid layer 0", "TinyHybrid 第 0 层"),
    "t_agreement": (
        "Chunked vs recurrent: max abs difference ({source})",
        "分块与逐步递推：最大绝对差（{source}）",
    ),
    "x_chunk_log": ("chunk size C (tokens, log scale)", "块大小 C（token，对数坐标）"),
    "y_diff_log": (
        "max |chunked − recurrent| (log scale)",
        "max |分块 − 逐步递推|（对数坐标）",
    ),
    "l_output": ("T={T} output", "T={T} 输出"),
    "l_state": ("T={T} final state", "T={T} 最终状态"),
    "l_eps": ("float64 machine epsilon {eps:.1e}", "float64 机器精度 {eps:.1e}"),
    "l_eps_dashed": (
        "float64 machine epsilon {eps:.1e} (dashed)",
        "float64 机器精度 {eps:.1e}（虚线）",
    ),
    "l_yours": ("your chunk size C = {C}", "你选的块大小 C = {C}"),
    # cost
    "t_cost": (
        "What chunking buys: one KDA layer, H={H}, K={K}, V={V}",
        "分块带来什么：一个 KDA 层，H={H}，K={K}，V={V}",
    ),
    "st_steps": ("sequential steps per layer", "每层的串行步数"),
    "st_flops": ("matmul FLOPs, chunked ÷ recurrent", "矩阵乘 FLOPs：分块 ÷ 逐步递推"),
    "x_chunk": ("chunk size C (tokens)", "块大小 C（token）"),
    "y_steps_log": ("steps (log scale)", "步数（对数坐标）"),
    "y_flops": ("FLOPs ratio (×)", "FLOPs 比值（×）"),
    "h_steps": ("{steps} chunk steps (recurrent: {T})", "{steps} 个分块步（逐步递推：{T}）"),
    "h_flops": ("× {ratio} FLOPs", "FLOPs × {ratio}"),
    # groupings
    "t_groupings": (
        "Any grouping gives the same map (segments {seg} tokens)",
        "任意结合方式得到同一个映射（段长 {seg} 个 token）",
    ),
    "x_maxdiff": (
        "max abs difference (log scale; 0 drawn at 1e-18)",
        "最大绝对差（对数坐标；0 画在 1e-18）",
    ),
    "g_pairwise tree (parallel scan)": (
        "pairwise tree (parallel scan)",
        "两两归约树（并行扫描）",
    ),
    "g_closed form of the whole span": ("closed form of the whole span", "整段的闭式解"),
    "g_token by token": ("token by token", "逐 token 递推"),
    "l_dM": ("max |ΔM| vs (A→B)→C", "max |ΔM|，对比 (A→B)→C"),
    "l_db": ("max |Δb| vs (A→B)→C", "max |Δb|，对比 (A→B)→C"),
    "l_dS": ("max |map(S0) − recurrent S|", "max |map(S0) − 逐步递推的 S|"),
    # orders
    "t_orders": (
        "The order matters: other orders give other states",
        "顺序很重要：换一个顺序得到另一个状态",
    ),
    "t_orders_many": (
        "The order matters: other orders give other states ({n} orders, sorted)",
        "顺序很重要：换一个顺序得到另一个状态（{n} 种顺序，已排序）",
    ),
    "x_orders": ("order of the segment maps", "段映射的顺序"),
    "x_orders_sorted": (
        "orders of the segment maps, sorted by distance",
        "段映射的各种顺序（按距离排序）",
    ),
    "l_distance": ("relative state distance", "相对状态距离"),
    "l_true": ("true order {order} (distance 0)", "真实顺序 {order}（距离 0）"),
    "l_other": ("another order", "其他顺序"),
    # maps
    "t_maps": ("The composed transition matrix M [K, K]", "复合转移矩阵 M [K, K]"),
    "st_M": ("M of {order} (head {head})", "{order} 的 M（头 {head}）"),
    "st_dM": ("M of {order} − M of the true order", "{order} 的 M − 真实顺序的 M"),
    "x_col": ("key channel (column)", "key 通道（列）"),
    "y_row": ("key channel (row)", "key 通道（行）"),
    "h_map": ("row {row}, col {col}", "第 {row} 行，第 {col} 列"),
    # timing
    "t_timing": (
        "Measured on this CPU (numpy, H={H}, K={K}, V={V}, best of {r}); the latest run is solid",
        "在本机 CPU 上实测（numpy，H={H}，K={K}，V={V}，{r} 次取最好）；最新一次为实线",
    ),
    "x_T": ("sequence length T (tokens)", "序列长度 T（token）"),
    "y_ms": ("time (ms, log scale)", "时间（毫秒，对数坐标）"),
    "l_run_rec": ("#{n} recurrent", "#{n} 逐步递推"),
    "l_run_chunk": ("#{n} chunked C={C}", "#{n} 分块 C={C}"),
    "h_rec": ("recurrent {ms} ms", "逐步递推 {ms} 毫秒"),
    "h_chunk": ("{ms} ms (×{x} faster)", "{ms} 毫秒（快 {x} 倍）"),
    "t_no_timing": ("Measured speed", "实测速度"),
    "no_timing": ("press “Measure speed”", "请按“测量速度”"),
    "progress_time": ("timing recurrent and chunked forms", "正在计时：逐步递推与分块"),
    # summary
    "s_agreement": (
        "- chunked vs recurrent ({source}) at C = {C} (yours): max |Δo| **{o:.2e}**, "
        "max |ΔS| **{S:.2e}**; worst over every C ∈ {Cs} and T ∈ {Ts}: "
        "{o_all:.2e} / {S_all:.2e}",
        "- 分块与逐步递推（{source}），C = {C}（你选的）：max |Δo| **{o:.2e}**，"
        "max |ΔS| **{S:.2e}**；在所有 C ∈ {Cs}、T ∈ {Ts} 中最差为 {o_all:.2e} / {S_all:.2e}",
    ),
    "s_groupings": (
        "- groupings: max |ΔM| **{dM:.2e}**, max |Δb| **{db:.2e}**; other orders: "
        "relative state distance **{lo:.3g} – {hi:.3g}**",
        "- 结合方式：max |ΔM| **{dM:.2e}**，max |Δb| **{db:.2e}**；其他顺序："
        "相对状态距离 **{lo:.3g} – {hi:.3g}**",
    ),
    "s_prefix": (
        "- prefix compositions reproduce the recurrent state at every boundary {bounds} "
        "to **{d:.1e}**",
        "- 前缀复合在每个边界 {bounds} 上都复现逐步递推的状态，误差 **{d:.1e}**",
    ),
    "s_cost": (
        "- one K3 KDA layer at T = {T:,}, C = {C} (yours): **{steps:,}** sequential steps "
        "instead of {rec:,}, for **×{ratio:.2f}** the FLOPs",
        "- 一个 K3 KDA 层，T = {T:,}，C = {C}（你选的）：**{steps:,}** 个串行步，而不是 "
        "{rec:,} 个，FLOPs 为 **×{ratio:.2f}**",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    # plot_chunk_agreement
    "fig_title_agree": (
        "Chunked = recurrent\n(float64, seeded inputs)",
        "分块 = 逐步递推\n（float64，固定种子输入）",
    ),
    "fig_title_cost": (
        "What chunking buys\n(one K3 layer, T = {T:,})",
        "分块带来什么\n（K3 单层，T = {T:,}）",
    ),
    "fig_y_rel": ("relative error of outputs o", "输出 o 的相对误差"),
    "fig_T": ("T = {T}", "T = {T}"),
    "fig_eps": ("float64 machine ε", "float64 机器精度 ε"),
    "fig_steps": ("fewer sequential steps: T / ⌈T/C⌉", "串行步数减少：T / ⌈T/C⌉"),
    "fig_flops": ("more matmul FLOPs: chunked / recurrent", "矩阵乘 FLOPs 增加：分块 / 逐步递推"),
    "fig_y_ratio": ("ratio to the token recurrence", "相对逐 token 递推的比值"),
    "fig_agree_source": (
        "Data: KDA on {source} inputs, float64; cost model: one Kimi K3 KDA layer, "
        "{H} heads, K = {K}, V = {V}",
        "数据：KDA 在{source}上，float64；代价模型：Kimi K3 的一个 KDA 层，"
        "{H} 个头，K = {K}，V = {V}",
    ),
    # plot_affine_composition
    "fig_aff_suptitle": (
        "Segment maps compose in any grouping, but not in any order",
        "段映射可任意结合，但不可任意交换顺序",
    ),
    "fig_title_g": ("Grouping (associative)", "结合方式（满足结合律）"),
    "fig_title_o": ("Order (not commutative)", "顺序（不满足交换律）"),
    "fig_x_g": ("max |map(S₀) − recurrent Sₜ|", "max |map(S₀) − 逐步递推 Sₜ|"),
    "fig_x_o": ("rel. distance to the true Sₜ", "与真实 Sₜ 的相对距离"),
    "fig_true": ("true order", "真实顺序"),
    "fig_title_b": ("b of {order}", "{order} 的 b"),
    "fig_key": ("key channel", "key 通道"),
    "fig_value": ("value channel (head {h})", "value 通道（头 {h}）"),
    "fig_eps_short": ("float64 ε", "float64 ε"),
    "fig_cbar": ("entry of b", "b 的元素值"),
    "fig_aff_source": (
        "Data: KDA on {source} inputs, segments {segments} tokens, "
        "{H} heads, K = {K}, V = {V}; float64",
        "数据：KDA 在{source}上，分段 {segments} 个 token，{H} 个头，K = {K}，V = {V}；float64",
    ),
}
MSG = Catalog("chunk_scan", {**_PAGE, **_FIGURES}, COMMON)

__all__ = ["MSG"]
