"""memory_planner's words for the engine view and the log panel (English / 中文): SGLang and vLLM
side by side, and a server log read back. Every number comes from ``studies.planner.Plan``,
``studies.planner_engines.VllmSide`` and ``sizing.LogReport``; the engines' own lines and the
reader's sentences are shown as they are written (English, in code spans)."""

from __future__ import annotations

from apps.ui.catalog import Catalog, T
from kda_core.sizing import LogReport
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
            "A SGLang or vLLM startup log (per-batch lines and a `/metrics` scrape too) is read "
            "back against the model chosen above: each number is rebuilt from the config and "
            "the flags the log implies.",
            "SGLang 或 vLLM 的启动日志（也可包含每批次日志与 `/metrics` 抓取）会按上方所选模型"
            "逐行读回：每个数字都由配置和日志所隐含的参数重新算出。",
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
        "why": ("The reader's reasoning:", "读取器的推理（原文）："),
        "fix_th": ("| flag change | predicted effect |", "| 参数修改 | 预测效果 |"),
        "lines_th": (
            "| # | status | line | logged → rebuilt |",
            "| # | 状态 | 日志行 | 日志值 → 重算值 |",
        ),
        "inferred": ("Inferred flags:", "推断出的参数："),
        "log_none": (
            "Paste a log and press **Read the log**, or load one of the real logs.",
            "粘贴日志后点击**读取日志**，或载入一份真实日志。",
        ),
    },
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
        (t("eng_hit"), t("na"), hit or t("eng_hit_off")),
    ]
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return f"{t('eng_th')}\n|---|---:|---:|\n{body}\n\n{t('eng_note', n=q.max_model_len)}"


def vllm_log_text(v: pe.VllmSide) -> str:
    """vLLM's own startup lines for this plan, as vLLM prints them."""
    return "\n".join(v.log_lines)


def _cell(text: str, limit: int = 200) -> str:
    """A log line or the reader's words inside a table cell: a code span, pipes escaped, cut
    to ``limit`` characters (a vLLM args line runs to a thousand)."""
    return "`" + text.replace("`", "'").replace("|", "\\|")[:limit] + "`"


def report_markdown(r: LogReport | None, t: T) -> str:
    """The verdict, the flag changes with their predicted effect, and the inferred flags."""
    if r is None:
        return t("log_none")
    c = t.catalog
    counts = tuple(c("rep_count", n=n, status=c(f"st_{s}")) for s, n in r.counts().items() if n)
    out = [t("rep_title", engine=r.engine, model=r.model, counts=counts)]
    out.append(t(f"vd_{r.verdict}"))
    out.append(f"{t('why')} {_cell(r.explanation)}")
    if r.remedies:
        rows = "\n".join(f"| {_cell(f)} | {_cell(e)} |" for f, e in r.remedies)
        out.append(f"{t('fix_th')}\n|---|---|\n{rows}")
    flags = ", ".join(f"{k}={v}" for k, v in r.inferred.items())
    out.append(f"{t('inferred')} {_cell(flags, 2000)}")
    return "\n\n".join(out)


def lines_markdown(r: LogReport | None, t: T) -> str:
    """One row per log line: its status and, where compared, the logged and rebuilt numbers."""
    if r is None:
        return ""
    rows = []
    for v in r.lines:
        nums = "; ".join(f"{f}: {a:g} → {b:g}" for f, a, b in (v.diffs or v.checks))
        nums = nums or ", ".join(v.inputs)
        status = t(f"st_{v.status}")
        rows.append(
            f"| {v.line_no} | {status} | {_cell(v.text, 160)} | {_cell(nums) if nums else ''} |"
        )
    return f"{t('lines_th')}\n|---|---|---|---|\n" + "\n".join(rows)
