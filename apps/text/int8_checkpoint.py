"""INT8 checkpoint app: its explanation (English / 中文), phrase table and the markdown it shows."""

from __future__ import annotations

import html

from apps.ui import i18n
from apps.ui.i18n import COMMON, Translator
from kda_core.studies import int8 as st
from kda_core.studies import quality

TR = Translator(
    COMMON,
    {
        "parked after": "停放于",
        "format": "格式",
        "scales in the native dtype": "缩放因子用原生精度保存",
        "relative error (all layers)": "相对误差（所有层）",
        "ceiling": "上限",
        "max abs error": "最大绝对误差",
        "max error / bound": "最大误差 / 界",
        "(≤ 1: within the bound)": "（≤ 1：在界内）",
        "park once, last step": "只停放一次，最后一步",
        "every step, last step": "每步都量化，最后一步",
        "max Δlogit": "最大 Δlogit",
        "checkpoint": "检查点",
        "native": "原生",
        "capacity gained": "增加的容量",
        "checkpoints": "个检查点",
        "key channel": "按键通道",
        "per head": "按头",
        "per tensor": "按张量",
        "value channel v": "值通道 v",
        "key channel k": "键通道 k",
        "parked state S": "停放的状态 S",
        "restored − S": "恢复值 − S",
        "Error map of": "误差图：",
        "max |error|": "max |误差|",
        "elements (count, log scale)": "元素（个数，对数坐标）",
        "state value": "状态值",
        "signed error, all KDA layers": "带符号误差，所有 KDA 层",
        "state values, all KDA layers": "状态值，所有 KDA 层",
        "Histograms: where the rounding error and the values fall": "直方图：舍入误差与数值的分布",
        "tokens decoded after parking": "停放后解码的 token",
        "relative Frobenius distance": "相对 Frobenius 距离",
        "max |Δlogit| (logit units)": "max |Δlogit|（logit 单位）",
        "state distance to the exact run": "与精确运行的状态距离",
        "max |logit − exact logit|": "max |logit − 精确 logit|",
        "Decoding": "解码",
        "tokens after the restore": "个 token（恢复之后）",
        "same greedy token": "相同的贪心 token",
        "park once": "只停放一次",
        "every step": "每步都量化",
        "quantized once at parking": "停放时量化一次",
        "re-quantized at every step": "每步重新量化",
        "Every format on the same parked state (all KDA layers)": (
            "同一停放状态上的各种格式（所有 KDA 层）"
        ),
        "format / scale granularity": "格式 / 缩放粒度",
        "relative Frobenius error (log scale)": "相对 Frobenius 误差（对数坐标）",
        "measured ‖error‖ / ‖S‖, other formats": "实测 ‖误差‖ / ‖S‖，其他格式",
        "measured ‖error‖ / ‖S‖, selected": "实测 ‖误差‖ / ‖S‖，所选格式",
        "theoretical ceiling": "理论上限",
        "checkpoints in the budget (count)": "预算内的检查点（个数）",
        "Checkpoint capacity per format": "各格式的检查点容量",
        "native pool": "原生池",
        "gain vs native": "相对原生的增益",
        "checkpoints that fit": "放得下的检查点",
        "selected": "所选",
        "Runs in this session": "本会话的运行",
        "drift": "偏离",
        "gain": "增益",
        "Error map": "误差图",
        "Divergence": "偏离",
        "Variants": "各格式",
        "Histograms": "直方图",
        "Capacity": "容量",
        "Park and restore summary": "停放与恢复摘要",
        "Kimi K3 capacity": "Kimi K3 容量",
    },
)
EN = """**Parking a checkpoint in fewer bytes.** A checkpoint is a copy of every KDA layer's
recurrent state (plus the short-conv window). SGLang can park it as **INT8 with one scale per
(head, key channel)** and dequantize on restore: one rounding per cache hit, about half the bytes
of bf16, so about twice the checkpoints fit. Here the tiny model reads your text; its real state
is compressed and restored. **Look at:** the error map (stripes along key channels with large
values), the error against its theoretical ceiling per variant, and the divergence: quantizing
*once* at parking stays flat, quantizing *at every step* keeps adding error."""
ZH = (
    "**用更少的字节停放检查点。** 检查点是每个 KDA 层递推状态（加短卷积窗口）的一份拷贝。SGLa"
    "ng 可以把它以 **INT8、每个 (头, key 通道) 一个缩放因子** 停放，恢复时反量化：每次命中只"
    "舍入一次，字节数约为 bf16的一半，能存下约两倍的检查点。这里小模型读取你的文本，它的真实"
    "状态被压缩再恢复。**请看：** 误差图（数值大的 key 通道呈条纹），各种格式的误差与理论上限"
    "，以及偏离曲线：只在停放时量化*一次*保持平稳，*每一步*都量化则误差不断累积。"
)


def summary_markdown(s: st.Int8Study, chosen: str) -> str:
    t = s.table
    i = t.labels.index(chosen)
    k3 = s.memory_k3
    j = k3.labels.index(chosen)
    d = s.divergence
    text = s.parked_text.replace("\n", "⏎").replace("|", "&#124;")
    rows = [
        ("parked after", f"{s.n_tokens} tokens", i18n.verbatim(text[-60:])),
        ("format", chosen, "scales in the native dtype"),
        ("relative error (all layers)", f"{t.rel_fro[i]:.3g}", f"ceiling {t.bound_rel_fro[i]:.3g}"),
        ("max abs error", f"{t.max_abs[i]:.3g}",
         f"max error / bound {t.max_bound_ratio[i]:.4g}"
         + (" (≤ 1: within the bound)" if t.bound_holds[i] else " (> 1: ABOVE the bound)")),
        ("park once, last step", f"{d.park_once_state_dist[-1]:.3g}",
         f"max Δlogit {d.park_once_logit_diff.max():.3g}"),
        ("every step, last step", f"{d.every_step_state_dist[-1]:.3g}",
         f"max Δlogit {d.every_step_logit_diff.max():.3g}"),
        (f"{k3.model} checkpoint", f"{k3.total_bytes[j] / (1 << 20):.1f} MiB",
         f"native {k3.total_bytes[0] / (1 << 20):.1f} MiB"),
        ("**capacity gained**", f"**×{k3.gain[j]:.2f}**",
         f"{k3.capacity[j]:,} vs {k3.capacity[0]:,} checkpoints"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return "| quantity | value |\n|---|---|\n" + body


def _cell(text: str) -> str:
    """Decoded text safe inside a markdown table cell (HTML-escaped, markdown characters as
    entities, so backslash escapes and pipes print as they are)."""
    t = html.escape(text, quote=False)
    for ch, ent in (
        ("\\", "&#92;"),
        ("|", "&#124;"),
        ("*", "&#42;"),
        ("_", "&#95;"),
        ("`", "&#96;"),
    ):
        t = t.replace(ch, ent)
    return t


def continuation_markdown(c: quality.Continuation) -> str:
    """Exact vs compressed greedy continuations side by side; the first difference marked."""
    k = c.first_divergence

    def row(pieces: tuple[str, ...]) -> str:
        if k is None:
            return _cell("".join(pieces))
        first = _cell(pieces[k] or "…")
        return (
            _cell("".join(pieces[:k]))
            + f"<mark><b>{first}</b></mark>"
            + _cell("".join(pieces[k + 1 :]))
        )

    verdict = (
        f"identical for all {len(c.exact)} tokens" if k is None
        else f"first difference at token {k + 1} of {len(c.exact)}, marked"
    )  # fmt: skip
    return (
        f"**Greedy continuation after the restore** ({verdict}) · after “…{_cell(c.prompt_tail)}”"
        "\n\n| restored from | continuation |\n|---|---|\n"
        f"| exact checkpoint | {row(c.exact_pieces)} |\n| {c.label} | {row(c.compressed_pieces)} |"
    )


HISTORY_HEADERS = ["#", "tokens", "format", "error", "drift", "gain"]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Runs in this session**\n\n" + head + "\n" + body
