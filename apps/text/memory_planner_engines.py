"""memory_planner's words for the engine view and the log panel (English / 中文): SGLang and vLLM
side by side, and a server log read back. Every number comes from ``studies.planner.Plan``,
``studies.planner_engines.VllmSide`` and ``sizing.LogReport``; the engines' own lines are shown
as they are printed (code spans), the reader's sentences in the page's language
(``memory_planner_reasons``)."""

from __future__ import annotations

import gradio as gr

from apps.text.memory_planner_reasons import REASON_MSG, reason_text
from apps.ui import guard
from apps.ui.catalog import Catalog, T
from kda_core.sizing import LogReport
from kda_core.sizing.logread import join_reasons
from kda_core.sizing.sglang import sglang_min_hit
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe

ENGINE_MSG = Catalog(
    "memory_planner_engines",
    {
        # inputs
        "acc_config": (
            "config.json (model = config.json): paste it or upload the file (at most 1 MiB)",
            "config.json（模型 = config.json）：粘贴内容或上传文件（最多 1 MiB）",
        ),
        "o_config": ("config.json (pasted or uploaded)", "config.json（粘贴或上传）"),
        "f_config_text": ("config.json text", "config.json 文本"),
        "f_config_file": ("upload config.json", "上传 config.json"),
        "f_page": ("page size (--page-size)", "页大小（--page-size）"),
        "f_replayssm": ("ReplaySSM ring (L = 16)", "ReplaySSM 环（L = 16）"),
        "f_requested": ("max running requests (0 = unset)", "最大并发请求数（0 = 不设）"),
        "f_max_num_seqs": ("vLLM max_num_seqs", "vLLM max_num_seqs"),
        "f_prefix": ("vLLM prefix caching", "vLLM 前缀缓存"),
        "b_k3": ("K3 write-up example", "K3 文章中的例子"),
        "v_page": ("page size", "页大小"),
        "v_requested": ("max running requests", "最大并发请求数"),
        "v_max_num_seqs": ("max_num_seqs", "max_num_seqs"),
        "v_log_ratio": ("ratio of the log (0 = unknown)", "日志的比例（0 = 未知）"),
        "v_log_page": ("page size of the log (0 = from the log)", "日志的页大小（0 = 从日志读）"),
        "v_log_tp": ("TP of the log (0 = inferred)", "日志的 TP（0 = 推断）"),
        "e_heads": (
            "TP must divide the {heads} recurrent-state heads; got TP={tp}",
            "TP 必须整除 {heads} 个递推状态头；收到 TP={tp}",
        ),
        "e_log_custom": (
            "a log is read against a shipped model or a config.json, not the custom numbers",
            "日志只能按内置模型或 config.json 读取，不能按自定义数字读取",
        ),
        "f_vllm_logs": ("What vLLM would print", "vLLM 会打印的日志"),
        # the engines table
        "eng_th": (
            "| same GPU budget, TP and dtypes | SGLang | vLLM |",
            "| 相同显存预算、TP 与精度 | SGLang | vLLM |",
        ),
        "eng_slots": (
            "state slots (vLLM: blocks shared with KV)",
            "状态槽（vLLM：与 KV 共用的块）",
        ),
        "eng_per_req": ("state slots per request", "每请求状态槽"),
        "eng_per_req_v": ("{m} mamba + {a} attention blocks", "{m} 个 mamba 块 + {a} 个注意力块"),
        "eng_running": ("**max running requests**", "**最大并发请求数**"),
        "eng_refuses": ("0: refuses to start (max_num_seqs)", "0：无法启动（max_num_seqs）"),
        "eng_kv": ("KV tokens", "KV token 数"),
        "eng_block": ("attention block size (tokens)", "注意力块大小（token）"),
        "eng_hit": ("smallest prompt that can hit the prefix cache", "能命中前缀缓存的最短提示"),
        "eng_hit_off": ("prefix caching off", "前缀缓存关闭"),
        "eng_tokens": ("{n:,} tokens", "{n:,} 个 token"),
        "eng_page": ("page {n}", "页 {n}"),
        "eng_note": (
            "One budget for both: SGLang's profiled rest of the GPU and vLLM's \"Available KV "
            "cache memory\"; vLLM's requests are {n:,} tokens long (max_model_len = input + "
            "output).",
            "两者用同一预算：SGLang 测得的剩余显存与 vLLM 的“Available KV cache memory”；"
            "vLLM 的请求长 {n:,} 个 token（max_model_len = 输入 + 输出）。",
        ),
        # the log panel
        "log_title": ("## Paste your server's log", "## 粘贴你的服务器日志"),
        "log_intro": (
            "A SGLang or vLLM log, or any piece of one (a capping line, the ready line, per-batch "
            "lines, a `/metrics` scrape), is read back against the model chosen above: each "
            "number is rebuilt from the config and the flags the log implies, and what the "
            "piece cannot pin is named.",
            "SGLang 或 vLLM 的日志，或其中任意一段（限流行、就绪行、每批次日志、`/metrics` 抓取），"
            "会按上方所选模型读回：每个数字都由配置和日志所隐含的参数重新算出，这一段定不出的"
            "也会指明。",
        ),
        "f_log": ("server log", "服务器日志"),
        "f_log_ratio": (
            "mamba-full-memory-ratio (0 = unknown)",
            "mamba-full-memory-ratio（0 = 未知）",
        ),
        "f_log_page": ("page size (0 = from the log)", "页大小（0 = 从日志读）"),
        "f_log_tp": ("TP (0 = inferred)", "TP（0 = 推断）"),
        "b_read": ("Read the log", "读取日志"),
        "examples": ("Real logs (one click):", "真实日志（一键载入）："),
        "rep_title": (
            "**{engine} log of {model}**: {counts}",
            "**{model} 的 {engine} 日志**：{counts}",
        ),
        "rep_count": ("{n} {status}", "{status} {n} 行"),
        "st_reproduced": ("reproduced", "已复现"),
        "st_different": ("different", "不同"),
        "st_input": ("input", "输入"),
        "st_not understood": ("not understood", "无法理解"),
        "st_skipped": ("skipped", "跳过"),
        "vd_state_slots": ("**Verdict: bound by the state slots**", "**结论：受限于状态槽**"),
        "vd_kv_tokens": ("**Verdict: bound by the KV tokens**", "**结论：受限于 KV token**"),
        "vd_request_pool": ("**Verdict: bound by the request cap**", "**结论：受限于请求数上限**"),
        "vd_max_num_seqs": ("**Verdict: bound by max_num_seqs**", "**结论：受限于 max_num_seqs**"),
        "vd_prefix_inert": (
            "**Verdict: prefix caching inert below one block**",
            "**结论：短于一个块的提示无法命中前缀缓存**",
        ),
        "why": ("The reader's reasoning:", "读取器的推理："),
        "lines_th": (
            "| # | status | line | logged → rebuilt |",
            "| # | 状态 | 日志行 | 日志值 → 重算值 |",
        ),
        "inferred": ("Inferred flags:", "推断出的参数："),
        "log_none": (
            "Paste a log and press **Read the log**, or load one of the real logs.",
            "粘贴日志后点击**读取日志**，或载入一份真实日志。",
        ),
        "log_refused": ("**Not read:** {message}", "**未读取：**{message}"),
        "e_log_empty": ("paste a log first", "请先粘贴日志"),
        "vd_other_model": ("**Verdict: is it this model?**", "**结论：确定是这个模型吗？**"),
        "vd_nothing_known": (
            "**Verdict: no line the reader knows**",
            "**结论：没有读取器认识的行**",
        ),
        "vd_unknown": (
            "**Verdict: the paste does not say what bounds concurrency**",
            "**结论：粘贴的内容没有说明并发受什么限制**",
        ),
        "running_th": ("Requested vs effective:", "请求值与实际值："),
        "held_th": ("Held vs reserved:", "占用与预留："),
        "missing_th": ("Not in the paste:", "粘贴的内容里没有："),
        "fix_th2": (
            "| flag change | effect | reaches the target | what it costs |",
            "| 参数修改 | 效果 | 达到目标 | 代价 |",
        ),
        "yes": ("yes", "是"),
        "no": ("no", "否"),
        "on": ("on", "开"),
        "off": ("off", "关"),
        "lines_skipped": (
            "{n:,} lines skipped: not lines the reader knows (not listed)",
            "跳过 {n:,} 行：读取器不认识这些行（未列出）",
        ),
        "f_log_requested": (
            "requested max running requests (0 = from the log)",
            "请求的最大并发数（0 = 从日志读）",
        ),
        "f_log_target": ("target running requests (0 = none)", "目标并发数（0 = 不设）"),
        "v_log_requested": ("requested max running requests", "请求的最大并发数"),
        "v_log_target": ("target running requests", "目标并发数"),
        "not_planned_fig": ("not planned", "未规划"),
        "not_planned": (
            "**Not planned** — the model was refused: {message}",
            "**未规划**——模型被拒绝：{message}",
        ),
        "hit_radix_off": ("none: the radix cache is off", "无：radix 缓存已关闭"),
        "hit_no_buffer": (
            "{n} tokens: `no_buffer` saves a state where each prefill step ends",
            "{n} 个 token：`no_buffer` 在每个预填充步结束处保存状态",
        ),
        "hit_grid": (
            "{n} tokens: states are saved every {grid} tokens (max(mamba chunk {chunk}, page))",
            "{n} 个 token：每 {grid} 个 token 保存一次状态（max(mamba 块 {chunk}, 页)）",
        ),
    },
    REASON_MSG,
)


def engines_markdown(p: pl.Plan, v: pe.VllmSide, t: T) -> str:
    """SGLang next to vLLM for one budget: slots, slots per request, running, KV, block size."""
    q = v.plan
    hit = t("eng_tokens", n=q.min_prefix_hit_tokens) if q.min_prefix_hit_tokens else None
    rows = [
        (t("eng_slots"), f"{p.state_slots:,}", f"{q.num_blocks:,}"),
        (
            t("eng_per_req"),
            f"{p.slots_per_request}",
            t("eng_per_req_v", m=v.mamba_blocks_per_request, a=v.attn_blocks_per_request),
        ),
        (
            t("eng_running"),
            f"**{p.max_running:,}**",
            f"**{v.max_running:,}**" if not q.max_num_seqs_error else t("eng_refuses"),
        ),
        (t("eng_kv"), f"{p.kv_tokens:,}", f"{q.kv_cache_tokens:,}"),
        (t("eng_block"), t("eng_page", n=p.page_size), f"{q.block_size:,}"),
        (t("eng_hit"), sglang_hit(p, t), hit or t("eng_hit_off")),
    ]
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return f"{t('eng_th')}\n|---|---:|---:|\n{body}\n\n{t('eng_note', n=q.max_model_len)}"


def sglang_hit(p: pl.Plan, t: T) -> str:
    """SGLang's shortest prompt that can hit the prefix cache, with why (``sglang_min_hit``)."""
    n, _ = sglang_min_hit(p.spec, p.deployment)
    if n is None:
        return t("hit_radix_off")
    if n == 2 and p.strategy == "no_buffer":
        return t("hit_no_buffer", n=n)
    return t("hit_grid", n=n, grid=n - 1, chunk=p.spec.mamba_chunk_size or 64)


def vllm_log_text(v: pe.VllmSide) -> str:
    """vLLM's own startup lines for this plan, as vLLM prints them."""
    return "\n".join(v.log_lines)


def _cell(text: str, limit: int = 200) -> str:
    """A log line or the reader's words inside a table cell: a code span, pipes escaped, cut
    to ``limit`` characters (a vLLM args line runs to a thousand)."""
    return "`" + text.replace("`", "'").replace("|", "\\|")[:limit] + "`"


_SHOWN_FLAGS = (
    "tp",
    "ssm_dtype",
    "kv_dtype",
    "page_size",
    "ratio",
    "ratio_range",
    "max_mamba_cache_size",
    "slots_per_request",
    "strategy",
    "kv_tokens",
    "ring_len",
    "max_num_seqs",
    "max_model_len",
    "num_blocks",
    "block_size",
    "prefix_caching",
)
"""The inferred flags a reader is shown (the rest are the reader's bookkeeping)."""


def _value(v: object, t: T) -> str:
    if isinstance(v, bool):
        return t("on") if v else t("off")
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, tuple) and len(v) == 2:
        return f"{_value(v[0], t)} .. {_value(v[1], t)}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def flags_text(r: LogReport, t: T) -> str:
    """The inferred flags, one code span each (``key=value``; a range ``a .. b``)."""
    shown = [(k, r.inferred[k]) for k in _SHOWN_FLAGS if r.inferred.get(k) is not None]
    return " ".join(_cell(f"{k}={_value(v, t)}") for k, v in shown)


def _fixes(r: LogReport, t: T) -> str:
    rows = []
    for f in r.fixes:
        reach = "" if f.reaches is None else t("yes") if f.reaches else t("no")
        costs = "; ".join(reason_text(c, t) for c in f.costs)
        rows.append(f"| {_cell(f.flag)} | {reason_text(f.effect, t)} | {reach} | {costs} |")
    return f"{t('fix_th2')}\n|---|---|---|---|\n" + "\n".join(rows)


def report_markdown(r: LogReport | str | None, t: T) -> str:
    """The verdict and its reasoning, requested vs effective, held vs reserved, what the paste
    cannot pin, the fixes with their effect and cost, and the inferred flags; a refused log
    (a message) says so instead of keeping an earlier verdict."""
    if r is None:
        return t("log_none")
    if isinstance(r, str):
        return t("log_refused", message=r)
    c = t.catalog
    counts = tuple(c("rep_count", n=n, status=c(f"st_{s}")) for s, n in r.counts().items() if n)
    out = [t("rep_title", engine=r.engine or "?", model=r.model, counts=counts)]
    out.append(t(f"vd_{r.verdict}"))
    out.append(f"{t('why')} {join_reasons(r.reasons, lambda x: reason_text(x, t))}")
    for key, part in (("running_th", r.bounds), ("held_th", r.held), ("missing_th", r.missing)):
        if part:
            out.append(t(key) + "\n" + "\n".join(f"- {reason_text(x, t)}" for x in part))
    if r.fixes:
        out.append(_fixes(r, t))
    if r.inferred:
        out.append(f"{t('inferred')} {flags_text(r, t)}")
    return "\n\n".join(out)


def lines_markdown(r: LogReport | str | None, t: T) -> str:
    """One row per line the reader knows: its status and, where compared, the logged and
    rebuilt numbers; the lines it does not know are counted in one sentence, not listed."""
    if r is None or isinstance(r, str):
        return ""
    rows = []
    for v in r.lines:
        nums = "; ".join(f"{f}: {a:g} → {b:g}" for f, a, b in (v.diffs or v.checks))
        nums = nums or ", ".join(v.inputs)
        status = t(f"st_{v.status}")
        rows.append(
            f"| {v.line_no} | {status} | {_cell(v.text, 160)} | {_cell(nums) if nums else ''} |"
        )
    table = f"{t('lines_th')}\n|---|---|---|---|\n" + "\n".join(rows) if rows else ""
    skipped = t("lines_skipped", n=r.skipped) if r.skipped else ""
    return "\n\n".join(x for x in (table, skipped) if x)


def draw_log(report: LogReport | str | None, t: T) -> tuple:
    """The verdict with its fixes, then the line-by-line comparison."""
    return report_markdown(report, t), lines_markdown(report, t)


def draw_log_check(view: Exception | None, t: T) -> tuple:
    """Before reading: a refused log replaces the earlier verdict (nothing changes else)."""
    if view is None:
        return gr.skip(), gr.skip()
    return draw_log(guard.message_of(view, t.code), t)
