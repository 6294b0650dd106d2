"""prefix_replay's words: the explanation (EN / 中文), the 中文 phrase table, the text panels.

The phrase table maps English figure / label phrases to Chinese (``apps.ui.i18n.Translator``:
whole phrases, longest first; numbers and the reader's own text pass through). The panels
(request summary, replay step, batch summary) are markdown built from the study's views.
Long prose about the concept: docs/prefix_replay.md.
"""

from __future__ import annotations

import html

from apps.ui import i18n
from apps.ui.i18n import COMMON, Translator
from kda_core.studies import batch_view as bv
from kda_core.studies import prefix_replay as pr

EN = """**A prefix hit is not a state hit.** The radix cache matches your prompt token by token,
but a KDA layer can only resume where its *recurrent state and conv window* were saved together
with the MLA KV: at a checkpoint. The engine restores the deepest checkpoint on the matched
path and **replays** the tokens from there up to the token match (violet), then prefills the
rest (green). **Look at:** the gap between the checkpoint diamond and the match line on the
timeline; the tree (pink nodes hold a checkpoint, blue ones are MLA-KV-only tombstones, black
outlines are locked; hover a node for its locks and LRU ages); then press **Play**: the state
heatmap converges and its distance to the uncached state falls to **exactly 0** at the match.
Tick *inconsistent restore* to see what skipping the replay does to the logits. Below, the
**batch view** serves several requests *at once* on one state pool: who waits, prefills,
decodes or is retracted in each scheduler step, and where the pool caps concurrency.
*TinyHybrid is trained on Python's docstrings: its output is shown as decoded text.*"""

ZH = (
    "**前缀命中不等于状态命中。** radix 缓存逐 token 匹配你的提示词，但 KDA 层只能从*递推状态"
    "与卷积窗口*和 MLA KV 一起保存的位置——检查点——继续。引擎恢复匹配路径上最深的检查点，然后"
    "从那里**重放**到 token 匹配点（紫色），再预填充剩余部分（绿色）。**请看：** 时间线上检查"
    "点菱形与匹配线之间的距离；radix 树（粉色节点带检查点，蓝色是只有 MLA KV 的墓碑节点，黑框表示被"
    "锁定；悬停查看锁与 LRU 年龄）；然后按**Play**：状态热图逐步收敛，"
    "它与不走缓存的状态之间的距离在匹配点**精确降为"
    " 0**。勾选*不一致恢复* 看跳过重放会让 logits 偏离多远。下方的**批处理视图**在同一个状态池上"
    "*同时*服务多个请求：每个调度步里谁在等待、预填充、解码或被撤回，以及状态池在何处限制并发。"
    "*TinyHybrid 在 Python 文档字符串上训练过：输出以解码后的文本显示。*"
)

TR = Translator(
    COMMON,
    {
        # timeline
        "Token timeline": "Token 时间线",
        "restores at": "恢复于",
        "replays": "重放",
        "prefills": "预填充",
        "reused: KV + state from the checkpoint": "复用：检查点中的 KV 与状态",
        "replayed: KV cached, state recomputed": "重放：KV 已缓存，状态重新计算",
        "fresh prefill (no token match)": "全新预填充（无 token 匹配）",
        "decode (generated tokens)": "解码（生成的 token）",
        "checkpoint parked (state + conv)": "已停放的检查点（状态 + 卷积窗口）",
        "checkpoint at": "检查点位于",
        "token match at": "token 匹配点位于",
        "token match": "token 匹配点",
        "= the inspected request (dark, outlined)": "= 正在查看的请求（深色、带边框）",
        "restore = match =": "恢复点 = 匹配点 =",
        "(cold prefill)": "（冷启动预填充）",
        "(nothing to replay)": "（无需重放）",
        "restore": "恢复点",
        "match": "匹配点",
        # tree
        "Radix tree while request": "radix 树：请求",
        "holds its lock": "持有锁期间",
        "Radix tree after request": "radix 树：请求之后",
        "Radix tree": "radix 树",
        "checkpoint node (KV + KDA state)": "检查点节点（KV + KDA 状态）",
        "tombstone (MLA KV only, no state)": "墓碑节点（只有 MLA KV，无状态）",
        "checkpoint node": "检查点节点",
        "checkpoint nodes": "检查点节点",
        "tombstone": "墓碑节点",
        "tombstones": "墓碑节点",
        "branch point": "分叉点",
        "branch points": "分叉点",
        "branch point (prompts diverge)": "分叉点（提示词在此分开）",
        "branch at": "分叉于",
        "edge (parent → child)": "边（父 → 子）",
        "locked (thick outline: in use)": "已锁定（粗边框：使用中）",
        "root": "根",
        "branch": "分支",
        "node": "节点",
        "depth": "深度",
        "children": "子节点",
        "locks": "锁",
        "LRU age": "LRU 年龄",
        "ticks": "时钟刻",
        # replay
        "Replay step": "重放步",
        "Replay of request": "重放：请求",
        "position": "位置",
        "= the token match": "= token 匹配点",
        "tokens before the match": "个 token 后到达匹配点",
        "distance": "距离",
        "distance to S_match": "到 S_match 的距离",
        "S_match vs uncached": "S_match 与不走缓存相比",
        "state S": "状态 S",
        "value channel v": "值通道 v",
        "key channel k": "键通道 k",
        "key": "键",
        "relative distance (1 = norm of S)": "相对距离（1 = S 的范数）",
        "(all KDA layers)": "（所有 KDA 层）",
        "this step": "当前步",
        "step position": "当前步位置",
        "nothing restored: no checkpoint on this request's path (cold prefill)": (
            "未恢复任何状态：此请求的路径上没有检查点（冷启动预填充）"
        ),
        "No replay for this request (it restored nothing).": "此请求没有重放（未恢复任何状态）。",
        "Step": "步",
        "state at match vs uncached": "匹配点状态与不走缓存相比",
        "state at match vs uncached prefill": "匹配点状态与不走缓存的预填充相比",
        # pools
        "Pools after each request (cumulative)": "每个请求之后的池（累计）",
        "after request": "请求之后",
        "checkpoint slots used": "已用检查点槽位",
        "COW copies (restores)": "COW 复制（恢复）",
        "donations (track slot -> pool)": "捐赠（跟踪槽 → 池）",
        "evicted states": "被驱逐的状态",
        "active slots (peak)": "活跃槽位（峰值）",
        "checkpoint pool capacity": "检查点池容量",
        "count (slots / events)": "计数（槽位 / 事件）",
        "Pools": "池",
        # drift
        "Logit drift of the inconsistent restore": "不一致恢复的 logit 偏离",
        "Logit drift": "logit 偏离",
        "logit drift vs an uncached run": "相对不走缓存的运行的 logit 偏离",
        "inconsistent keeps": "不一致恢复保留",
        "greedy tokens": "个贪心 token",
        "inconsistent: MLA at the match, KDA at the checkpoint": (
            "不一致：MLA 在匹配点，KDA 在检查点"
        ),
        "no replay": "不重放",
        "INT8 checkpoint + exact replay": "INT8 检查点 + 精确重放",
        "exact restore + replay": "精确恢复 + 重放",
        "generated token (index)": "生成的 token（序号）",
        "generated token": "生成的 token",
        "max |logit − uncached logit| (log scale)": "max |logit − 不走缓存的 logit|（对数坐标）",
        "same token": "相同 token",
        "different token": "不同 token",
        "as the uncached run": "（与不走缓存的运行相比）",
        "restores at its match": "在匹配点恢复",
        "nothing is replayed, so the inconsistent restore is the exact one": (
            "没有重放，因此不一致恢复就是精确恢复"
        ),
        "restores no checkpoint": "没有恢复任何检查点",
        "it recomputes from an empty state, so there is no parked state to misuse": (
            "它从空状态重新计算，没有可被误用的停放状态"
        ),
        "requests whose restore differs from their match": "恢复点与匹配点不同的请求",
        "(Request to inspect)": "（查看的请求）",
        "no request of this session restores short of its match: nothing can drift here": (
            "本会话没有请求在匹配点之前恢复：这里不会产生偏离"
        ),
        "interval": "间隔",
        "sglang grid": "sglang 网格",
        "vllm block": "vllm 块",
        "slots": "槽位",
        # summary table
        "Request": "请求",
        "prompt": "提示词",
        "longest cached token prefix": "最长的已缓存 token 前缀",
        "restore point": "恢复点",
        "deepest checkpoint on that path": "该路径上最深的检查点",
        "replayed": "重放",
        "prefilled / decoded": "预填充 / 解码",
        "output ids": "输出 id",
        "(random weights · 随机权重)": "（随机权重）",
        "checkpoints parked": "停放的检查点",
        "relative, all layers": "相对值，所有层",
        "pools: active slots": "池：活跃槽位",
        "pools: checkpoint slots": "池：检查点槽位",
        "pools: COW copies / donations": "池：COW 复制 / 捐赠",
        "pools: evictions": "池：驱逐",
        "track writes": "跟踪写入",
        "(default)": "（默认）",
        "session": "会话",
        "state hits": "状态命中",
        "prefill saved": "节省的预填充",
        "KV tokens": "KV token",
        "states": "状态",
        "empty session: send a request or load a scenario": "空会话：发送一个请求或载入场景",
        "*(empty session)*": "*（空会话）*",
        "Replay": "重放",
        # radio options
        "while the request holds its restore lock": "请求持有恢复锁期间",
        "after the request (inserted)": "请求之后（已插入）",
        "Cache settings": "缓存设置",
        "System prompt + tools, two user branches": "系统提示词 + 工具，两个用户分支",
        "Multi-turn chat (English and Chinese)": "多轮对话（中英文）",
        "Long document, several questions": "长文档，多个问题",
        "Replay state heatmap": "重放状态热图",
        # pools: real concurrency (the batch run)
        "per request, one at a time": "逐个请求",
        "the batch run at its peak step": "批处理运行的峰值步",
        "real concurrency": "真实并发",
        "state slots at the peak": "峰值时的状态槽位",
        "peak running requests": "峰值并发请求",
        "serve the batch below to see real concurrency": "在下方服务批处理以查看真实并发",
        # batch view
        "Batch: each request's phase per scheduler step": "批处理：每个请求在各调度步的阶段",
        "scheduler step": "调度步",
        "not arrived": "尚未到达",
        "waiting": "等待",
        "prefill chunk": "预填充分块",
        "decode": "解码",
        "retracted": "被撤回",
        "finished": "已完成",
        "rejected": "被拒绝",
        "One state pool over time": "同一个状态池随时间的变化",
        "slots held by running requests": "运行中请求占用的槽位",
        "cached checkpoints": "缓存的检查点",
        "free slots": "空闲槽位",
        "state slots": "状态槽位",
        "running requests": "并发请求",
        "max running requests": "最大并发请求数",
        "capped by the state pool": "被状态池限制",
        "running": "运行中",
        "peak": "峰值",
        "Batch summary": "批处理摘要",
        "Batch": "批处理",
        "Batch view": "批处理视图",
        "Batch swimlane": "批处理泳道图",
        "Batch pool": "批处理状态池",
        "steps": "步",
        "retractions": "撤回",
        "KV pool": "KV 池",
        "steps with a retraction": "发生撤回的步数",
        "(SGLang's retract_decode)": "（SGLang 的 retract_decode）",
        "the KV pool could not hold the next decode tokens, so the running request with the "
        "fewest new tokens (then the longest prompt) went back to waiting, to be redone later": (
            "KV 池放不下下一步的解码 token，于是新 token 最少（其次提示词最长）的运行中请求"
            "退回等待，稍后重做"
        ),
        "The state pool caps concurrency.": "状态池限制了并发。",
        "restored tokens from the tree": "从树中恢复的 token",
        "pool size": "池大小",
        "running / max": "运行中 / 上限",
        "requests": "个请求",
        "SGLang would print": "SGLang 会打印",
        "no cap: the workload never reached": "没有触顶：负载从未达到",
    },
)


def _n(k: int, noun: str) -> str:
    """'1 tombstone', '2 tombstones'."""
    return f"{k} {noun}" if k == 1 else f"{k} {noun}s"


def short(text: str, n: int = 28) -> str:
    """One line, at most ``n`` characters (the tail kept: prompts differ at the end)."""
    t = text.replace("\n", "⏎")
    return t if len(t) <= n else "…" + t[-(n - 1) :]


def _esc(text: str) -> str:
    t = html.escape(text.replace("\n", "⏎"))
    return t.replace("|", "&#124;").replace("*", "&#42;").replace("_", "&#95;")


def _code(text: str) -> str:
    """Readable bytes as inline code inside a markdown table cell."""
    return "`" + text.replace("`", "'").replace("|", "¦") + "`"


def settings_label(policy: str, spacing: int, slots: int | None, int8: bool) -> str:
    """'interval 32', 'sglang grid 32', 'vllm block 32', 'marconi' + slots + INT8."""
    what = {"interval": "interval", "sglang": "sglang grid", "vllm": "vllm block"}
    text = f"{what[policy]} {spacing}" if policy in what else policy
    if slots is not None:
        text += f", {slots} slots"
    return text + (", INT8" if int8 else "")


def summary_markdown(res: pr.ScenarioResult, req: int, slots: int | None, policy: str) -> str:
    """The inspected request's numbers (``slots``: the reader's checkpoint budget or None)."""
    r = res.requests[req]
    t, p = r.timeline, r.pools
    cap = str(p.checkpoint_capacity) + ("" if slots else " (default)")
    rows = [
        ("prompt", f"{t.prompt_len} tokens", i18n.verbatim(_esc(short(r.prompt, 60)))),
        ("token match", f"{t.token_match}", "longest cached token prefix"),
        ("**restore point**", f"**{t.restore_at}**", "deepest checkpoint on that path"),
        ("**replayed**", f"**{t.token_match - t.restore_at}**", f"tokens [{t.restore_at}, "
                                                               f"{t.token_match})"),
        ("prefilled / decoded", f"{t.prompt_len - t.token_match} / {t.decode[1] - t.decode[0]}",
         f"output {_code(r.output_readable)} ({len(r.output_tokens)} byte tokens)"),
        ("checkpoints parked", f"{len(t.checkpoints)}", ", ".join(map(str, t.checkpoints))),
        ("state at match vs uncached", f"{r.replay_steps.uncached_error:.1e}",
         "relative, all layers"),
        ("pools: active slots", f"peak {p.active_peak} / {p.active_capacity}", policy),
        ("pools: checkpoint slots", f"{p.checkpoint_used} / {cap}",
         f"{p.checkpoint_bytes / 1024:.0f} KiB{' INT8' if p.int8 else ''}"),
        ("pools: COW copies / donations", f"{p.copies} / {p.donations}",
         f"track writes {p.track_writes}"),
        ("pools: evictions", f"{p.evicted_states} states", f"{p.evicted_kv_tokens} KV tokens"),
        ("session", f"{len(res.requests)} requests",
         f"state hits {res.state_hits}, replayed {res.replayed_tokens}, prefill saved "
         f"{res.saved_fraction:.0%}"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return f"**Request #{req + 1}**\n\n| quantity | value |\n|---|---|\n" + body


def step_markdown(replay_steps: pr.ReplaySteps, step: int) -> str:
    n = int(replay_steps.positions.size)
    if n == 0:
        return "No replay for this request (it restored nothing)."
    return (
        f"Step **{step} / {n - 1}** · position {int(replay_steps.positions[step])} · "
        f"distance {float(replay_steps.dist[step]):.3g} · state at match vs uncached prefill "
        f"{replay_steps.uncached_error:.1e}"
    )


def batch_markdown(v: bv.BatchView) -> str:
    """Peak vs cap, the capping message when it bites, retractions, rejections, restores."""
    lines = [
        f"**Batch: {len(v.prompts)} requests, {v.n_steps} steps** · {v.strategy}, "
        f"{v.state_slots} state slots"
        + ("" if v.kv_tokens is None else f", KV pool {v.kv_tokens} tokens")
        + f" · peak running requests **{v.peak_running}** / max "
        f"running requests **{v.max_running}** (sizing: {v.planner_max_running})",
    ]
    if v.capped:
        msg = i18n.verbatim(v.capping_message or "")  # as SGLang prints it, in English
        lines.append(f"**The state pool caps concurrency.** SGLang would print:\n\n> {msg}")
    else:
        lines.append(f"no cap: the workload never reached {v.max_running} running requests")
    restored = [f"#{i + 1}: {int(r)}" for i, r in enumerate(v.restore_at) if r > 0]
    if restored:
        lines.append("restored tokens from the tree: " + ", ".join(restored))  # per request
    if v.retractions.sum():
        lines.append(
            f"retractions {int(v.retractions.sum())} · steps with a retraction "
            f"{v.retracted_steps}: the KV "
            "pool could not hold the next decode tokens, so the running request with the "
            "fewest new tokens (then the longest prompt) went back to waiting, to be redone "
            "later (SGLang's retract_decode)"
        )
    if v.n_steps == 0 and v.rejected:
        lines.append(
            "every request was rejected: none fits the KV pool, so no scheduler step ran and "
            "the state pool stayed empty"
        )
    for i, msg in sorted(v.rejected.items()):
        lines.append(f"request #{i + 1} rejected: {msg}")
    return "\n\n".join(lines)
