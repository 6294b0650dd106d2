"""Chunk scan app: its explanation (English / 中文), phrase table and summary text."""

from __future__ import annotations

import numpy as np

from apps.ui.i18n import COMMON, Translator
from kda_core.studies import chunk_scan as cs

TR = Translator(
    COMMON,
    {
        "chunked vs recurrent": "分块与逐步递推对比",
        "your chunk size C": "你的块大小 C",
        "(yours)": "（你的）",
        "worst over every C": "所有 C 中最差",
        "Chunked vs recurrent: max abs difference": "分块与逐步递推：最大绝对差",
        "Chunked vs recurrent": "分块与逐步递推",
        "random": "随机输入",
        "tiny model on text": "小模型 + 文本",
        "random inputs": "随机输入",
        "chunk size C (tokens, log scale)": "块大小 C（token，对数坐标）",
        "chunk size C (tokens)": "块大小 C（token）",
        "max |chunked − recurrent| (log scale)": "max |分块 − 逐步递推|（对数坐标）",
        "output": "输出",
        "final state": "最终状态",
        "float64 machine epsilon": "float64 机器精度",
        "(dashed)": "（虚线）",
        "steps (log scale)": "步数（对数坐标）",
        "FLOPs ratio (×)": "FLOPs 比值（×）",
        "sequential steps per layer": "每层串行步数",
        "matmul FLOPs, chunked ÷ recurrent": "矩阵乘 FLOPs：分块 ÷ 逐步递推",
        "What chunking buys: one KDA layer": "分块带来什么：一个 KDA 层",
        "What chunking buys": "分块带来什么",
        "chunk steps": "分块步",
        "recurrent": "逐步递推",
        "chunked": "分块",
        "FLOPs": "FLOPs",
        "Any grouping gives the same map": "任意结合方式得到同一个映射",
        "segments": "段",
        "max abs difference (log scale; 0 drawn at 1e-18)": "最大绝对差（对数坐标；0 画在 1e-18）",
        "The order matters: other orders give other states": "顺序很重要：别的顺序给出别的状态",
        "orders, sorted": "种顺序，已排序",
        "orders of the segment maps, sorted by distance": "段映射的顺序（按距离排序）",
        "order of the segment maps": "段映射的顺序",
        "relative state distance": "相对状态距离",
        "true order": "真实顺序",
        "(distance 0)": "（距离 0）",
        "another order": "其他顺序",
        "key channel (column)": "键通道（列）",
        "key channel (row)": "键通道（行）",
        "M of the true order": "真实顺序的 M",
        "M of": "M：",
        "The composed transition matrix M [K, K]": "复合转移矩阵 M [K, K]",
        "row": "行",
        "col": "列",
        "time (ms, log scale)": "时间（ms，对数坐标）",
        "sequence length T (tokens)": "序列长度 T（token）",
        "Measured on this CPU": "在本机 CPU 上实测",
        "best of": "取最好的",
        "the latest run is solid": "最新一次为实线",
        "faster": "更快",
        "Measured speed": "实测速度",
        "press “Measure speed”": "按“测量速度”",
        "worst": "最差",
        "and": "与",
        "over": "范围",
        "groupings": "结合方式",
        "other orders": "其他顺序",
        "prefix compositions reproduce the recurrent state at every boundary": (
            "前缀复合在每个边界都复现逐步递推的状态"
        ),
        "one K3 KDA layer at": "一个 K3 KDA 层，",
        "sequential steps instead of": "个串行步，而不是",
        "for": "代价是",
        "the FLOPs": "的 FLOPs",
        "Groupings": "结合方式",
        "Orders": "顺序",
        "Transition matrices": "转移矩阵",
    },
)
EN = """**Chunked = recurrent, and why checkpoints compose.** KDA's state update is an *affine map*
S → M S + b for every token; a run of tokens (a segment, a chunk) is one composed map. The
chunkwise kernel evaluates these maps 64 tokens at a time with matrix multiplies instead of one
token at a time. **Look at:** the errors against the token recurrence (float64 round-off,
~1e-15, for every chunk size); how chunking cuts the *sequential* steps by C while doing a bit
*more* arithmetic; segment maps grouped any way give the same map (associative: a parallel scan
works), but applied in another order they give a different state (not commutative: a cache may
only resume a prefix from a checkpoint *of that prefix*)."""
ZH = """**分块计算等于逐步递推，以及检查点为何可以组合。** KDA 每个 token 的状态更新是一个*仿射映射*
S → M S + b；一段 token（一个段、一个块）就是一个复合映射。分块内核每次用矩阵乘法处理 64 个 token，
而不是逐个 token。**请看：** 与逐步递推相比的误差（float64 舍入误差，约 1e-15，
任何块大小都是如此）；分块把*串行*步数减少为 1/C，但算术量略*多*；段映射无论怎样结合都得到同一个映射
（结合律：可以并行扫描），但换一个顺序得到不同的状态（不满足交换律：缓存只能从*该前缀自己的*检查点恢复）。"""


def summary_markdown(s: cs.ChunkScanStudy, m: cs.Composition) -> str:
    a = s.agreement
    C = s.chunk_size
    ja = int(np.flatnonzero(a.chunk_sizes == C)[0])  # the study puts C in both grids
    i = int(np.argmax(s.cost.T_values))
    j = int(np.flatnonzero(s.cost.chunk_sizes == C)[0])
    return (
        f"- chunked vs recurrent ({a.source}) at C = {C} (yours): max |Δo| "
        f"**{a.o_max_abs[:, ja].max():.2e}**, max |ΔS| **{a.S_max_abs[:, ja].max():.2e}**; "
        f"worst over every C ∈ {a.chunk_sizes.tolist()} and T ∈ {a.T_values.tolist()}: "
        f"{a.o_max_abs.max():.2e} / {a.S_max_abs.max():.2e}\n"
        f"- groupings: max |ΔM| **{m.grouping_M_diff.max():.2e}**, max |Δb| "
        f"**{m.grouping_b_diff.max():.2e}**; other orders: relative state distance "
        f"**{m.order_S_rel[1:].min():.3g} – {m.order_S_rel[1:].max():.3g}**\n"
        f"- prefix compositions reproduce the recurrent state at every boundary "
        f"{m.boundary_tokens.tolist()} to **{m.boundary_S_diff.max():.1e}**\n"
        f"- one K3 KDA layer at T = {int(s.cost.T_values[i]):,}, C = {C} (yours): "
        f"**{int(s.cost.chunked_steps[i, j]):,}** sequential steps instead of "
        f"{int(s.cost.recurrent_steps[i]):,}, for **×{s.cost.flops_ratio[i, j]:.2f}** the FLOPs"
    )
