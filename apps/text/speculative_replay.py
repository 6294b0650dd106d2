"""Speculative replay app: its explanation (English / 中文), phrase table and markdown."""

from __future__ import annotations

from apps.ui.i18n import COMMON, Translator
from kda_core.studies import speculative as sp

TR = Translator(
    COMMON,
    {
        "byte tokens": "字节 token",
        "verified tokens (D)": "验证的 token (D)",
        "(token ids; bold = committed)": "（token id；粗体 = 已提交）",
        "committed": "已提交",
        "greedy acceptance": "贪心接受数",
        "greedy accept": "贪心接受",
        "max commit error": "最大提交误差",
        "all acceptance counts": "所有接受数",
        "bf16 fold error": "bf16 折叠误差",
        "why the ring keeps raw v, k": "这就是环保留原始 v、k 的原因",
        "ring bytes (this run, float64)": "环字节数（本次运行，float64）",
        "per-draft states instead": "改用每草稿完整状态",
        "K3 deployment: rings, all slots": "K3 部署：环，全部槽位",
        "K3 deployment: per-draft states": "K3 部署：每草稿完整状态",
        "running requests": "个运行中的请求",
        "draft step (token index in the verify)": "草稿步（验证中的 token 序号）",
        "ring field": "环字段",
        "Verify": "验证",
        "ring of KDA layer": "KDA 层的环：层",
        "all heads": "所有头",
        "input token": "输入 token",
        "target's greedy next": "目标模型的贪心下一个",
        "committed (accepted prefix)": "已提交（接受的前缀）",
        "rejected (rolled back)": "被拒绝（回滚）",
        "field": "字段",
        "L2 norm": "L2 范数",
        "Ring of": "环：",
        "slots (slot = position mod L)": "个槽位（槽 = 位置 mod L）",
        "the commit keeps": "提交保留",
        "steps": "步",
        "conv window kept: after step": "保留的卷积窗口：第",
        "nothing accepted, the old state and conv window are kept": (
            "没有接受任何 token，保留旧状态与卷积窗口"
        ),
        "ring slot": "环槽位",
        "after verify": "验证之后",
        "after commit": "提交之后",
        "slot": "槽",
        "accepted step": "接受的步",
        "rejected step": "被拒绝的步",
        "empty": "空",
        "this commit": "本次提交",
        "Commit exactness vs a sequential run": "提交精确度（对比顺序运行）",
        "verify logits error": "验证 logits 误差",
        "outputs rebuilt from the ring": "由环重建的输出",
        "tokens accepted (count)": "接受的 token（个数）",
        "max |state error| (log scale)": "max |状态误差|（对数坐标）",
        "max |state error|": "max |状态误差|",
        "0 (exact)": "0（精确）",
        "accept": "接受",
        "open-loop fold of bf16 d, k (no raw v / k)": "bf16 d、k 的开环折叠（无原始 v / k）",
        "open-loop fold, float64": "开环折叠，float64",
        "ReplaySSM commit (exact replay from the ring)": "ReplaySSM 提交（从环精确重放）",
        "draft tokens D": "草稿 token 数 D",
        "bytes per request (MiB, log scale)": "每请求字节数（MiB，对数坐标）",
        "Per-request memory over D": "每请求显存随 D 的变化",
        "rings vs per-draft states": "环对比每草稿完整状态",
        "for K3": "（K3）",
        "per-draft full states": "每草稿完整状态",
        "ReplaySSM rings": "ReplaySSM 环",
        "ring": "环",
        "conv windows per draft (both need)": "每草稿卷积窗口（两者都需要）",
        "Verify steps in this session": "本会话的验证步",
        "commit error": "提交误差",
        "Generated": "已生成",
        "ids": "id",
        "bytes": "字节",
        "acceptance": "接受率",
        "tokens per verify": "每次验证的 token",
        "equal to greedy": "与贪心一致",
        "Generation": "生成",
        "verify passes": "次验证",
        "greedy needs": "贪心需要",
        "logits error": "logits 误差",
        "verify step": "验证步",
        "tokens per verify (count)": "每次验证的 token（个数）",
        "at position": "位置",
        "drafted + 1": "个草稿 + 1",
        "committed (accepted + 1)": "已提交（接受数 + 1）",
        "verified (D)": "已验证 (D)",
        "Acceptance vs draft noise": "接受率与草稿噪声",
        "every run equals greedy": "每次运行都与贪心一致",
        "draft noise (logit standard deviation)": "草稿噪声（logit 标准差）",
        "fraction (0-1)": "比例 (0-1)",
        "noise": "噪声",
        "drafts accepted (fraction)": "被接受的草稿（比例）",
        "tokens per verify / D": "每次验证的 token / D",
        "True": "是",
        "False": "否",
        "tokens": "个 token",
        "in": "，",
        "of": "/",
        "Verify step": "验证步",
        "Ring slots": "环槽位",
        "Commit exactness": "提交精确度",
        "Memory over D": "显存随 D",
        "Verify summary": "验证摘要",
        "TinyHybrid has random weights, so its tokens are arbitrary bytes (shown as ids and "
        "escapes) · ": "",
        "prompt": "提示词",
        "position": "位置",
        "slots": "槽位",
        "Generation summary": "生成摘要",
    },
)
RANDOM_NOTE = (
    "TinyHybrid is trained on Python's docstrings; tokens are UTF-8 bytes, shown as decoded text "
    "· TinyHybrid 在 Python 文档字符串上训练过；token 是 UTF-8 字节，以解码后的文本显示"
)
EN = """**Speculative decoding with a recurrent state.** A draft proposes D tokens; the target model
verifies them in one pass and keeps the longest correct prefix. A KV cache just drops the
rejected tokens' entries, but a KDA state has already absorbed them. Instead of saving a full
state per draft token, ReplaySSM writes each step's small inputs (d, k, g, raw v, raw k, beta) to
a **ring** and, once the accepted count is known, **replays exactly** those steps from the old
state. **Look at:** the ring slots the commit keeps (the rejected ones are freed), the commit
error (rounding, ~1e-15, for every acceptance count) against the bf16 fold, and how much smaller
the rings are than per-draft states at Kimi K3 scale. Pick how many tokens are accepted.
*TinyHybrid is trained on Python's docstrings; its tokens (UTF-8 bytes) are shown as decoded
text. What matters is that the commit is exact and the output equals plain greedy.*"""
ZH = (
    "**带递推状态的投机解码。** 草稿模型提出 D 个 token，目标模型一次前向验证，保留最长的正确"
    "前缀。KV 缓存只需丢弃被拒 token 的条目，但 KDA 状态已经吸收了它们。ReplaySSM 不为每个草"
    "稿 token 保存完整状态，而是把每一步的小输入（d、k、g、原始 v、原始 k、beta）写进**环形缓"
    "冲**，知道接受数量后从旧状态**精确重放**这些步。**请看：** 提交保留了哪些环槽（被拒的被"
    "释放），各接受数量下的提交误差（舍入级，约 1e-15）与 bf16 折叠的对比，以及在 Kimi K3 规"
    "模下环比逐草稿状态小多少。可以自己选接受几个 token。"
    "\n*TinyHybrid 在 Python 文档字符串上训练过；它的 token（UTF-8 字节）以解码后的文本显示。"
    "重要的是提交精确、输出与普通贪心解码一致。*"
)


def _code(text: str, n: int = 48) -> str:
    """Readable bytes as inline markdown code (no markdown escapes needed), cut at ``n``."""
    t = text if len(text) <= n else text[: n - 1] + "…"
    return "`" + t.replace("`", "'").replace("|", "¦") + "`"


def summary_markdown(v: sp.VerifyStudy, mem: sp.MemoryOverD) -> str:
    toks = " ".join(
        f"**{int(t)}**" if i < v.n_accept else f"~~{int(t)}~~" for i, t in enumerate(v.inputs)
    )
    toks += "<br>" + _code(sp.readable(v.inputs)) + " (token ids and text; bold = committed)"
    rows = [
        ("prompt", f"{v.prompt_tokens} tokens", "byte tokens"),
        ("verified tokens (D)", f"{v.draft_tokens}", toks.replace("|", "&#124;")),
        ("committed", f"{v.n_accept}", f"greedy acceptance {v.natural_accept}"),
        ("max commit error", f"{v.commit_error.max():.1e}", "all acceptance counts"),
        ("bf16 fold error", f"{v.fold_bf16_error.max():.1e}", "why the ring keeps raw v, k"),
        ("ring bytes (this run, float64)", f"{v.ring_bytes:,}", f"L={v.ring_len}"),
        ("per-draft states instead", f"{v.per_draft_state_bytes:,}", f"×{v.memory_ratio:.1f}"),
        ("K3 deployment: rings, all slots", f"{mem.deploy_ring_bytes / (1 << 30):.2f} GiB",
         f"{mem.deploy_slots} slots, D={mem.deploy_draft_tokens}"),
        ("K3 deployment: per-draft states", f"{mem.deploy_per_draft_bytes / (1 << 30):.2f} GiB",
         f"{mem.deploy_max_running} running requests"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return "| quantity | value |\n|---|---|\n" + body


HISTORY_HEADERS = ["#", "D", "greedy accept", "committed", "commit error"]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Verify steps in this session**\n\n" + head + "\n" + body
