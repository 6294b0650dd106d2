"""The texts of apps.state_transfer in English and 中文: the intro, the figure phrases (``T``),
the markdown tables and summaries drawn from the study results, the Chinese input labels
(``LABELS_ZH``) and the phrase table for what the switch translates by label (``TR``: the
figure-slot and CSV-button names)."""

from __future__ import annotations

from apps.ui.i18n import COMMON, Translator
from kda_core.studies import transfer as st
from kda_core.studies.transfer import MAX_NEW, MAX_TEXT

EN = """**A decode instance needs three things at one boundary.** With KDA, a prefix is resumable
only where the MLA KV, the KDA recurrent state and the conv window were saved together, from the
same weights, tokenizer and tensor-parallel layout. So serving across instances moves *model-state
objects*: the three parts plus metadata (token range, prefix hash, fingerprints, layout, dtypes),
here as safetensors. A store (embedded, or Mooncake Store) moves the bytes by prefix hash without
understanding them; the receiving instance validates every field and refuses a mismatch.
**Look at:** the object's parts at K3 scale; the timeline (prefill publishes, decode fetches the
longest jointly restorable prefix and matches one instance exactly); which field each mismatch
is refused on; how far a forced splice drifts; what host and remote tiers add on the real trace."""
ZH = (
    "**Decode 实例需要同一边界上的三样东西。** 对 KDA 来说，只有 MLA K"
    "V、KDA 递归状态和卷积窗口在同一边界一起保存、且来自同一权重、同一分词器、同一张量并"
    "行布局时，前缀才能被恢复。因此跨实例服务搬运的是*模型状态对象*：三个部分加上元数据（t"
    "oken 范围、前缀哈希、指纹、布局、精度），这里用 safetensors 保存。存储"
    "（内嵌存储或Mooncake Store）按前缀哈希搬运字节而不理解内容；接收方逐字段校"
    "验，不匹配就拒绝。**请看**：K3 规模下对象的各个部分；时间线（prefill 发布"
    "，decode 取回最长可联合恢复前缀，结果与单实例完全一致）；每种不匹配被哪个字段拒绝"
    "；强行拼接会漂移多远；在真实 trace 上 host与远端层级带来多少收益。"
)
T = {
    "en": {
        "anat": "One object's parts: Kimi K3 per GPU (TP{tp}, bf16, {tokens:,} tokens) "
        "vs the tiny model",
        "part": "part",
        "bytes": "bytes (log)",
        "k3": "Kimi K3 per GPU",
        "tiny": "tiny model ({n} tokens)",
        "tl": "Transfer timeline: prefill (●) publishes, decode (◆) fetches and restores; "
        "numbers: boundary (tokens)",
        "boundary": "boundary (tokens)",
        "time": "time since prefill started (ms)",
        "spl": "Forced splice: MLA KV of prefix A + KDA state of prefix B ({n} tokens)",
        "step": "decoded token",
        "drift": "max |Δlogit| vs one instance (log)",
        "clean": "clean restore",
        "splice": "spliced restore",
        "tiers": "State tiers on the Mooncake trace ({n} requests, {d} device / {h} host ckpts)",
        "hit": "state hit rate",
        "ttft": "mean TTFT (s)",
        "moved": "loaded (GB)",
        "names": {"mla_kv": "MLA KV", "kda_state": "KDA state", "conv_window": "conv window"},
        "setups": {"device": "device", "device+host": "+ host", "device+host+remote": "+ remote"},
        "kinds": {"host_load": "host load", "offload": "offload to host"},
        "tiers_names": {"host": "host", "remote": "remote"},
        "sources": {},
        "meta": "safetensors header of the tiny object",
        "kv": ("key", "value"),
        "mismatch": {},
    },
    "zh": {
        "anat": "一个对象的组成：Kimi K3 每卡（TP{tp}，bf16，{tokens:,} token）vs 小模型",
        "part": "部分",
        "bytes": "字节（对数）",
        "k3": "Kimi K3 每卡",
        "tiny": "小模型（{n} 个 token）",
        "tl": "传输时间线：prefill（●）发布，decode（◆）取回并恢复；数字为边界（token）",
        "boundary": "边界（token）",
        "time": "自 prefill 开始的时间（毫秒）",
        "spl": "强行拼接：前缀 A 的 MLA KV + 前缀 B 的 KDA 状态（{n} 个 token）",
        "step": "已解码 token",
        "drift": "与单实例的最大 |Δlogit|（对数）",
        "clean": "正确恢复",
        "splice": "拼接恢复",
        "tiers": "Mooncake trace 上的状态层级（{n} 个请求，设备 {d} / host {h} 个检查点）",
        "hit": "状态命中率",
        "ttft": "平均首 token 时间（秒）",
        "moved": "加载量（GB）",
        "names": {"mla_kv": "MLA KV", "kda_state": "KDA 状态", "conv_window": "卷积窗口"},
        "setups": {"device": "仅设备", "device+host": "+ host", "device+host+remote": "+ 远端"},
        "kinds": {
            "publish": "发布",
            "fetch": "取回",
            "lookup": "查找",
            "restore": "恢复",
            "refuse": "拒绝",
            "serve": "服务",
            "host_load": "host 加载",
            "offload": "卸载到 host",
        },
        "tiers_names": {"host": "host", "remote": "远端"},
        "sources": {"store": "存储", "host": "host", "device": "设备", "none": "（无）"},
        "meta": "小模型对象的 safetensors 头",
        "kv": ("键", "值"),
        # the study's mismatch kinds (its refusal messages stay as the instance prints them)
        "mismatch": {
            "weights": "权重不同",
            "tokenizer": "分词器不同",
            "layout": "TP 布局不同",
            "corrupt": "数据损坏",
            "truncated": "文件截断",
            "foreign": "非状态对象文件",
        },
    },
}
LABELS_ZH = {
    "text": f"提示（1-{MAX_TEXT} 个字符）",
    "n_new": f"新 token 数（1-{MAX_NEW}）",
    "tp": "K3 张量并行 TP（整除 96）",
    "pd_btn": "Prefill → decode",
    "mis_btn": "交给不匹配的实例",
    "text_b": "拼接：提示 B（留空 = 把提示 A 反转）",
    "spl_btn": "强行拼接",
    "n_req": "trace 请求数（100-12031）",
    "dev": "设备检查点数（1-4096）",
    "ratio": "host / 设备 比例（0.1-64）",
    "tier_btn": "模拟层级",
    "acc": "Mooncake trace 上的存储层级",
}
MIS_PLACEHOLDER = {
    "en": "*Press “Offer to mismatched instances”.*",
    "zh": "*请按“交给不匹配的实例”。*",
}
SPLICE_PLACEHOLDER = {
    "en": ("Forced splice", "Press “Force a splice”"),
    "zh": ("强行拼接", "请按“强行拼接”"),
}
TR = Translator(
    COMMON,
    {
        "Object anatomy": "对象组成",
        "Transfer timeline": "传输时间线",
        "Splice drift": "拼接漂移",
        "Tiers": "存储层级",
    },
)


def _clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, its full length said in closed parentheses."""
    return text if len(text) <= n else f"{text[: n - 1]}… ({len(text):,} chars)"


def metadata_markdown(a: st.Anatomy, lang: str = "en") -> str:
    rows = "\n".join(f"| `{k}` | `{_clip(v, 90)}` |" for k, v in a.metadata)
    shapes = ", ".join(
        f"{p} {list(s)} {d}" for p, s, d in zip(a.parts, a.tiny_shapes, a.tiny_dtypes)
    )
    t = T[lang]
    unit = "字节" if lang == "zh" else "bytes"
    return (
        f"**{t['meta']}** ({a.file_bytes:,} {unit}; {shapes})\n\n"
        f"| {t['kv'][0]} | {t['kv'][1]} |\n|---|---|\n{rows}"
    )


def pd_markdown(r: st.PDRun, lang: str = "en") -> str:
    same = r.tokens == r.reference_tokens
    if lang == "zh":
        return (
            f"**decode 从{T['zh']['sources'].get(r.source, r.source)}"
            f"恢复到第 {r.restore_at} 个 token**"
            f"（提示 {r.prompt_len} 个 token；prefill 在 {list(r.published)} 发布）"
            f" · 取回 {r.bytes_moved:,} 字节 · 与单实例 token {'一致' if same else '不同'}，"
            f"最大 |Δlogit| = {r.max_dlogit:.1e}"
        )
    return (
        f"**decode restored from the {r.source} at token {r.restore_at}** (prompt {r.prompt_len} "
        f"tokens; prefill published at {list(r.published)}) · fetched {r.bytes_moved:,} bytes · "
        f"tokens {'identical to' if same else 'DIFFERENT from'} one instance, max |Δlogit| = "
        f"{r.max_dlogit:.1e}"
    )


def refusals_markdown(m: st.Refusals, lang: str = "en") -> str:
    head = (
        "| 不匹配 | 拒绝字段 | 信息 | 仍正确服务 |"
        if lang == "zh"
        else "| mismatch | refused on | message | still serves correctly |"
    )
    kinds = T[lang]["mismatch"]
    rows = "\n".join(
        f"| {kinds.get(k, k)} | `{f or '—'}` | {_clip(msg, 110)} | {'✓' if ok else '✗'} |"
        for k, f, msg, ok in zip(m.kinds, m.fields, m.messages, m.served_ok)
    )
    return f"{head}\n|---|---|---|---|\n{rows}"
