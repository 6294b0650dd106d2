"""memory_planner's words: the explanation (EN / 中文), the 中文 phrase table, the text panels.

Panels: the plan's sizes table, what SGLang would print, this tab's plan history and the live
run next to the planner's number. All numbers come from ``studies.planner.Plan`` /
``studies.batch_view.BatchView``.
"""

from __future__ import annotations

from apps.ui import i18n
from apps.ui.i18n import COMMON, Translator
from kda_core import sizing
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl

EN = """**One GPU's cache budget for a KDA hybrid.** Every running request needs its own
*fixed-size* KDA state (recurrent state + short-conv window, red) however long the context,
while the MLA layers' KV cache (blue) grows with every token. SGLang splits the budget with
`--mamba-full-memory-ratio`, and with radix caching each request *reserves several state slots*
(live state + ping-pong track slots). **Look at:** which side caps *max running requests*
(the two curves in the middle figure cross at the balancing ratio), where MLA KV overtakes the
KDA slot on the context axis, the message SGLang prints when the state cache is the limit, and
the **live run**: a scaled pool served by the engine's scheduler, whose peak running requests
match the planner's number."""

ZH = """**一块 GPU 上 KDA 混合模型的缓存预算。** 每个正在运行的请求都需要一份*固定大小*的 KDA 状态
（递推状态 + 短卷积窗口，红色），与上下文长度无关；而 MLA 层的 KV 缓存（蓝色）随每个 token 增长。
SGLang 用 `--mamba-full-memory-ratio` 划分显存；开启 radix 缓存时每个请求要*预留多个状态槽*
（活动状态 + 乒乓跟踪槽）。**请看：** 是哪一侧限制了*最大并发请求数*
（中间图两条曲线在平衡比例处相交），在上下文轴上 MLA KV 在何处超过一个 KDA 槽位，
以及状态缓存成为瓶颈时 SGLang 打印的提示；最后是**实时运行**：引擎的调度器在缩放后的状态池上
服务请求，其峰值并发与规划器给出的数字一致。"""


def _gib(n: float) -> str:
    return f"{n / sizing.GIB:.2f} GiB"


def _mib(n: float) -> str:
    return f"{n / sizing.MIB:.1f} MiB"


TR = Translator(
    COMMON,
    {
        "note": "说明",
        "KDA recurrent state / slot": "KDA 递推状态 / 槽",
        "conv window / slot": "卷积窗口 / 槽",
        "one state slot": "一个状态槽",
        "MLA KV outweighs it from": "MLA KV 超过它，自",
        "MLA KV / token": "MLA KV / token",
        "layers": "层",
        "kernel": "卷积核",
        "state slots (max_mamba_cache_size)": "状态槽（max_mamba_cache_size）",
        "KV tokens": "KV token 数",
        "slots reserved / held per request": "每请求预留 / 持有的槽",
        "max running requests": "最大并发请求数",
        "limited by": "受限于",
        "one request does not fit": "一个请求都放不下",
        "it needs": "它需要",
        "KV tokens, the KV pool holds": "个 KV token，KV 池只能容纳",
        "(more memory, a lower ratio or a shorter request)": "（加显存、降低比例或缩短请求）",
        "it holds": "它占用",
        "state slots, the pool has": "个状态槽，池中只有",
        "(more memory or a higher ratio)": "（加显存或提高比例）",
        "balancing ratio for this workload": "此负载的平衡比例",
        "tokens / request": "token / 请求",
        "checkpoints per request": "每请求检查点数",
        "chunk + decode track": "分块 + 解码跟踪",
        "ReplaySSM rings (all slots)": "ReplaySSM 环（全部槽位）",
        "per-draft states instead": "改用每草稿完整状态",
        "MLA > KDA from": "MLA > KDA，自",
        "One request's memory on one GPU vs context": "单卡上一个请求的显存随上下文的变化",
        "context length (tokens, log scale)": "上下文长度（token，对数坐标）",
        "memory per request (MiB, log scale)": "每请求显存（MiB，对数坐标）",
        "MLA KV (grows per token)": "MLA KV（按 token 增长）",
        "KDA state + conv window (one slot, flat)": "KDA 状态 + 卷积窗口（一个槽，不变）",
        "balanced": "平衡点",
        "Max running requests vs --mamba-full-memory-ratio": (
            "最大并发请求数随 --mamba-full-memory-ratio 的变化"
        ),
        "mamba-full-memory-ratio (state : KV bytes, log scale)": (
            "mamba-full-memory-ratio（状态 : KV 字节，对数坐标）"
        ),
        "running requests": "并发请求",
        "limit from state slots": "状态槽决定的上限",
        "limit from KV": "KV 决定的上限",
        "tokens/request": "token/请求",
        "this plan": "本方案",
        "strategy": "策略",
        "slots per request": "每请求槽位",
        "state slots per request": "每请求状态槽",
        "max running from": "最大并发，按",
        "Radix strategies: slots per request and the concurrency they allow": (
            "Radix 策略：每请求槽位与允许的并发"
        ),
        "slots reserved / request": "预留槽 / 请求",
        "slots held / request": "持有槽 / 请求",
        "max running requests (state cap)": "最大并发请求数（状态上限）",
        "Plans in this session": "本会话的方案",
        "model": "模型",
        "ratio / slots": "比例 / 槽位",
        "max running": "最大并发",
        "kv": "KV",
        "Memory vs context": "显存与上下文",
        "Running requests vs ratio": "并发请求与比例",
        "Strategies": "策略",
        "Plan": "方案",
        "Custom config (model = custom)": "自定义配置（模型 = custom）",
        # the live run
        "Live run summary": "实时运行摘要",
        "Live run": "实时运行",
        "Live run on a scaled pool": "缩放后状态池上的实时运行",
        "state slots": "状态槽",
        "requests": "个请求",
        "peak": "峰值",
        "running": "运行中",
        "planner": "规划器",
        "scheduler step": "调度步",
        "running requests per step": "每步并发请求",
        "what the live run admitted": "实时运行接纳的请求",
        "the planner's max running requests": "规划器的最大并发请求数",
        "no live run": "没有实时运行",
        "the engine always keeps a radix cache": "引擎始终保留 radix 缓存",
        "SGLang would print": "SGLang 会打印",
        "live run": "实时运行",
        "this plan at full scale": "本方案在完整规模下",
        "requests waiting": "个请求等待",
        "the engine runs the overlap scheduler with the decode lock": (
            "引擎使用重叠调度器并保留解码锁"
        ),
    },
)


def summary_markdown(p: pl.Plan) -> str:
    rows = [
        ("KDA recurrent state / slot", _mib(p.ssm_bytes), f"{p.spec.n_kda_layers} layers"),
        ("conv window / slot", _mib(p.conv_bytes), f"kernel {p.spec.conv_kernel}"),
        (
            "one state slot",
            _mib(p.slot_bytes),
            f"MLA KV outweighs it from {p.crossover_context:,} tokens",
        ),
        ("MLA KV / token", f"{p.kv_bytes_per_token:,} B", f"{p.spec.n_mla_layers} layers"),
        ("state slots (max_mamba_cache_size)", f"{p.state_slots:,}", _gib(p.split.state_bytes)),
        ("KV tokens", f"{p.kv_tokens:,}", _gib(p.kv_tokens * p.kv_bytes_per_token)),
        (
            "slots reserved / held per request",
            f"{p.slots_per_request} / {p.slots_held}",
            p.strategy,
        ),
        ("**max running requests**", f"**{p.max_running:,}**", _limit_note(p)),
        (
            "balancing ratio for this workload",
            f"{p.balanced_ratio:.4g}",
            f"{p.tokens_per_request:,} tokens / request",
        ),
        ("checkpoints per request", f"{p.checkpoints_per_request}", "chunk + decode track"),
    ]
    if p.draft_tokens:
        ring = sum(p.ring_bytes.values())
        rows.append(("ReplaySSM rings (all slots)", _gib(ring), f"L={p.ring_len}"))
        rows.append(
            ("per-draft states instead", _gib(p.naive_draft_state_bytes), f"D={p.draft_tokens}")
        )
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return "| quantity | value | note |\n|---|---:|---|\n" + body


def _limit_note(p: pl.Plan) -> str:
    """What limits the running requests; at 0, say plainly that one request does not fit."""
    if p.max_running > 0:
        return f"limited by **{p.limited_by}**"
    if p.limited_by == "kv":
        return (
            f"**one request does not fit**: it needs {p.tokens_per_request:,} KV tokens, the "
            f"KV pool holds {p.kv_tokens:,} (more memory, a lower ratio or a shorter request)"
        )
    return (  # the admission cap: max_mamba_cache_size // slots reserved (not held) per request
        f"**one request does not fit**: SGLang reserves {p.slots_per_request} state slots per "
        f"request at admission ({p.slots_held} held while it runs), the pool has "
        f"{p.state_slots:,} (more memory or a higher ratio)"
    )


def log_text(p: pl.Plan) -> str:
    lines = list(p.log_lines)
    if p.capping_message:
        lines.append(p.capping_message)
    return "\n".join(lines)


HISTORY_HEADERS = [
    "#",
    "model",
    "TP",
    "GiB",
    "ratio / slots",
    "strategy",
    "max running",
    "limited by",
]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Plans in this session**\n\n" + head + "\n" + body


def live_markdown(v: bv.BatchView | None, p: pl.Plan) -> str:
    """The live run next to the planner: peak running vs ``sizing.max_running_requests`` on
    the scaled pool, and this plan's own number at full scale."""
    if v is None:
        return f"**Live run:** no live run for {p.strategy} (the engine always keeps a radix cache)"
    same = "=" if v.peak_running == v.planner_max_running else "≠"
    lines = [
        f"**Live run** ({v.strategy}, {v.state_slots} state slots, {len(v.prompts)} requests "
        f"waiting): peak **{v.peak_running}** running {same} the planner's max running "
        f"requests **{v.planner_max_running}** (this plan at full scale: {p.max_running:,}; "
        f"state slots: {p.state_slots:,})"
    ]
    if not p.overlap or p.skip_decode_lock:
        lines.append("(the engine runs the overlap scheduler with the decode lock)")
    if v.capping_message and v.capped:
        msg = i18n.verbatim(v.capping_message)  # as SGLang prints it, in English
        lines.append(f"SGLang would print:\n\n> {msg}")
    return "\n\n".join(lines)
