"""Context parallel app: its explanation, every label in both languages (``TEXT``), the summary."""

from __future__ import annotations

from apps import ui
from kda_core.studies import context_parallel as cps

EN = """**Context parallelism for KDA: scan the maps, do not broadcast the KV.** An attention layer
split over P ranks can send every rank the other ranks' KV. A KDA layer cannot: the state after
rank 1's tokens depends on the state rank 0 ended with, and states of different segments do not
add. What does compose is each segment's *affine map* S → M S + b. **Each rank** computes its
map in one chunked pass; an **exclusive prefix scan** over the maps (all-gather + fold, or
log-depth with send/recv) hands every rank its incoming state; each rank then finishes its
outputs. **Look at:** the messages per step (a map is H·K·(K+V) numbers, a state H·K·V —
whatever T is), the state each rank receives (equal to the true one), errors at float64
round-off, and bytes against an MLA KV all-gather that grows with T. Packed documents reset the
scan at their starts."""
ZH = """**KDA 的上下文并行：扫描映射，而不是广播 KV。** 注意力层切到 P 个 rank 上时，可以把其他 rank
的 KV 发给每个 rank。KDA 层不行：rank 1 处理完之后的状态取决于 rank 0 结束时的状态，而不同段的状态
不能相加。能够组合的是每一段的*仿射映射* S → M S + b。**每个 rank** 用一次分块计算得到自己的映射；
对这些映射做一次**排他前缀扫描**（全收集 + 折叠，或用 send/recv 的对数深度扫描），每个 rank 就拿到
自己的初始状态，然后完成自己的输出。**请看：** 每一步的消息（一个映射是 H·K·(K+V) 个数，一个状态是
H·K·V 个数，与 T 无关）、每个 rank 收到的状态（与真实状态相同）、float64 舍入级的误差，以及与随 T
增长的 MLA KV 全收集相比的字节数。打包的多个文档在各自的起点重置扫描。"""
TEXT = {
    "en": {
        "steps": "Ranks and scan steps ({scan}, P = {P}, T = {T})",
        "tokens": "token position",
        "step": "step",
        "local": "local pass",
        "finish": "finish",
        "rank": "rank",
        "map": "map (M, b)",
        "state": "state b",
        "doc": "document start",
        "state_title": "State handed to rank {r} (head 0) and its difference from the truth",
        "received": "received S_in",
        "diff": "S_in − true state (max |Δ| {d:.1e})",
        "key": "key channel",
        "value": "value channel",
        "exact_title": "Outputs per rank vs one rank (float64)",
        "rel": "relative error of o (log)",
        "bound": "test bound 1e-10",
        "bytes_title": "Bytes each rank sends (T = {T}, P = {P})",
        "bytes": "bytes (log)",
        "demo_layer": "this demo's layer",
        "k3_layer": "a K3 layer (8 heads × 128, fp32)",
        "kv": "MLA KV all-gather",
        "speed_title": "Modelled speed-up of one K3 layer (8 heads, measured step costs)",
        "ctx": "{scan}, T = {T}",
        "P": "ranks P",
        "speedup": "speed-up vs one rank",
        "ideal": "P (ideal)",
        "scans": {"logdepth": "log-depth scan", "allgather": "all-gather + fold"},
    },
    "zh": {
        "steps": "rank 与扫描步骤（{scan}，P = {P}，T = {T}）",
        "tokens": "token 位置",
        "step": "步骤",
        "local": "本地计算",
        "finish": "收尾",
        "rank": "rank",
        "map": "映射 (M, b)",
        "state": "状态 b",
        "doc": "文档起点",
        "state_title": "交给 rank {r} 的状态（头 0）及其与真实状态之差",
        "received": "收到的 S_in",
        "diff": "S_in − 真实状态（max |Δ| {d:.1e}）",
        "key": "键通道",
        "value": "值通道",
        "exact_title": "每个 rank 的输出与单 rank 相比（float64）",
        "rel": "o 的相对误差（对数）",
        "bound": "测试阈值 1e-10",
        "bytes_title": "每个 rank 发送的字节数（T = {T}，P = {P}）",
        "bytes": "字节（对数）",
        "demo_layer": "本演示的层",
        "k3_layer": "K3 的一层（8 个头 × 128，fp32）",
        "kv": "MLA KV 全收集",
        "speed_title": "K3 一层的模型加速比（8 个头，实测的步骤开销）",
        "ctx": "{scan}，T = {T}",
        "P": "rank 数 P",
        "speedup": "相对单 rank 的加速比",
        "ideal": "P（理想）",
        "scans": {"logdepth": "对数深度扫描", "allgather": "全收集 + 折叠"},
    },
}


def _t(lang: str) -> dict:
    return TEXT["zh" if lang == ui.LANGS[1] else "en"]


def t_scan(t: dict, scan: str) -> str:
    return t["scans"][scan]


def summary_markdown(d: cps.Demo, seed: int, lang: str) -> str:
    zh = lang == ui.LANGS[1]
    worst = float(d.o_rel.max())
    sent, kv = int(d.bytes_sent.max()), d.kv_bytes
    n = d.cu_seqlens.size - 1
    if zh:
        return (f"- {d.P} 个 rank，{d.T} 个 token，随机输入（种子 {seed}），{n} 个文档："
                f"输出最大相对误差 **{worst:.1e}**，"
                f"最终状态 **{d.S_final_rel:.1e}**\n- 扫描：每个 rank 最多发送 **{sent:,} B**；"
                f"同样上下文的 MLA KV 全收集（K3 一层）：**{kv:,} B**")  # fmt: skip
    return (f"- {d.P} ranks, {d.T} tokens, random inputs (seed {seed}), {n} document"
            f"{'s' if n > 1 else ''}: worst relative error of the outputs "
            f"**{worst:.1e}**, final state **{d.S_final_rel:.1e}**\n- scan: at most "
            f"**{sent:,} B** sent per rank; an MLA KV all-gather of the same context (one K3 "
            f"layer): **{kv:,} B**")  # fmt: skip
