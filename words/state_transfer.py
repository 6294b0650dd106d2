"""state_transfer in words (English / 中文): the page and its figures (``_PAGE``; a study's
names worded by prefix: ``part_``, ``kind_``, ``inst_``, ``setup_``, ``src_``, ``mis_``), and
what only the static figure ``plots/plot_state_tiers.py`` says (``_FIGURES``, keys ``fig_*``;
it names the setups and the state hit rate as the page does)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("State transfer", "跨实例状态传输"),
    "blurb": (
        "Model-state objects across instances: prefill to decode, refusals, splices, tiers.",
        "跨实例的模型状态对象：prefill 到 decode、拒绝不匹配、拼接漂移、存储层级。",
    ),
    "intro": (
        "**A decode instance needs three things at one boundary.** With KDA, a prefix is "
        "resumable only where the MLA KV, the KDA recurrent state and the conv window were "
        "saved together, from the same weights, tokenizer and tensor-parallel layout. So "
        "serving across instances moves *model-state objects*: the three parts plus "
        "metadata (token range, prefix hash, fingerprints, layout, dtypes), here as "
        "safetensors. A store (embedded, or Mooncake Store) moves the bytes by prefix hash "
        "without understanding them; the receiving instance validates every field and "
        "refuses a mismatch. **Look at:** the object's parts at K3 scale; the timeline "
        "(prefill publishes, decode fetches the longest jointly restorable prefix and "
        "matches one instance exactly); which field each mismatch is refused on; how far a "
        "forced splice drifts; what host and remote tiers add on the real trace.",
        "**Decode 实例需要同一边界上的三样东西。** 对 KDA 来说，只有 MLA KV、KDA 递推状态和"
        "卷积窗口在同一边界一起保存、且来自同一权重、同一分词器、同一张量并行布局时，前缀才能"
        "被恢复。因此跨实例服务搬运的是*模型状态对象*：三个部分加上元数据（token 范围、前缀"
        "哈希、指纹、布局、精度），这里用 safetensors 保存。存储（内嵌存储或 Mooncake Store）"
        "按前缀哈希搬运字节而不理解内容；接收方逐字段校验，不匹配就拒绝。**请看：** K3 规模下"
        "对象的各个部分；时间线（prefill 发布，decode 取回最长可联合恢复的前缀，结果与单实例"
        "完全一致）；每种不匹配被哪个字段拒绝；强行拼接会漂移多远；在真实 trace 上主机内存与"
        "远端层级带来多少收益。",
    ),
    "f_text": ("Prompt (1-{n:,} characters)", "提示词（1-{n:,} 个字符）"),
    "f_new": ("New tokens (1-{n})", "新 token 数（1-{n}）"),
    "f_tp": ("K3 TP (divides 96)", "K3 张量并行 TP（整除 96）"),
    "b_pd": ("Prefill → decode", "预填充 → 解码"),
    "clipped": ("{text}… ({n:,} chars)", "{text}…（共 {n:,} 个字符）"),
    "b_mis": ("Offer to mismatched instances", "交给不匹配的实例"),
    "f_text_b": (
        "Splice: prompt B (empty = the prompt reversed)",
        "拼接：提示词 B（留空 = 把提示词反转）",
    ),
    "b_spl": ("Force a splice", "强行拼接"),
    "acc_tiers": ("Tiers on the Mooncake trace", "Mooncake trace 上的存储层级"),
    "f_req": ("Trace requests (100-12031)", "trace 请求数（100-12031）"),
    "f_dev": ("Device checkpoints (1-4096)", "设备检查点数（1-4096）"),
    "f_ratio": ("Host / device ratio (0.1-64)", "主机 / 设备 比例（0.1-64）"),
    "b_tiers": ("Simulate tiers", "模拟存储层级"),
    # the names the checks use
    "v_prompt": ("prompt", "提示词"),
    "v_prompt_b": ("prompt B", "提示词 B"),
    "v_the_prompt": ("the prompt", "提示词"),
    "v_new": ("new tokens", "新 token 数"),
    "v_tp": ("TP", "TP"),
    "v_req": ("trace requests", "trace 请求数"),
    "v_dev": ("device checkpoints", "设备检查点数"),
    "v_ratio": ("host / device ratio", "主机 / 设备 比例"),
    "e_prompt": (
        "{name} must be 1 to {n:,} characters (at least 4 UTF-8 bytes), got {got}",
        "{name}必须为 1 到 {n:,} 个字符（至少 4 个 UTF-8 字节），收到 {got}",
    ),
    "got_chars": ("{n:,} characters", "{n:,} 个字符"),
    "got_bytes": ("{n} bytes", "{n} 个字节"),
    "e_splice": (
        "{b} must differ from {a} within their common length",
        "{b}与{a}在共同长度内必须不同",
    ),
    "e_tp": (
        "TP must divide K3's 96 KDA heads, got {tp}",
        "TP 必须整除 K3 的 96 个 KDA 头，收到 {tp}",
    ),
    "n_anatomy": ("object anatomy", "对象组成"),
    "n_timeline": ("transfer timeline", "传输时间线"),
    "n_splice": ("splice drift", "拼接漂移"),
    "n_tiers": ("tiers", "存储层级"),
    # anatomy
    "t_anat": (
        "One object's parts: Kimi K3 per GPU (TP{tp}, bf16, {tokens:,} tokens) vs the tiny model",
        "一个对象的组成：Kimi K3 每卡（TP{tp}，bf16，{tokens:,} 个 token）对比小模型",
    ),
    "x_part": ("part", "部分"),
    "y_bytes": ("bytes (log)", "字节（对数）"),
    "l_k3": ("Kimi K3 per GPU", "Kimi K3 每卡"),
    "l_tiny": ("tiny model ({n} tokens)", "小模型（{n} 个 token）"),
    "part_mla_kv": ("MLA KV", "MLA KV"),
    "part_kda_state": ("KDA state", "KDA 状态"),
    "part_conv_window": ("conv window", "卷积窗口"),
    # timeline
    "t_tl": (
        "Transfer timeline: prefill (●) publishes, decode (◆) fetches and restores; "
        "numbers: boundary (tokens)",
        "传输时间线：prefill（●）发布，decode（◆）取回并恢复；数字为边界（token）",
    ),
    "x_time": ("time since prefill started (ms)", "自 prefill 开始的时间（毫秒）"),
    "kind_publish": ("publish", "发布"),
    "kind_fetch": ("fetch", "取回"),
    "kind_lookup": ("lookup", "查找"),
    "kind_restore": ("restore", "恢复"),
    "kind_refuse": ("refuse", "拒绝"),
    "kind_serve": ("serve", "服务"),
    "kind_host_load": ("host load", "从主机加载"),
    "kind_offload": ("offload to host", "卸载到主机"),
    "inst_prefill": ("prefill", "prefill"),
    "inst_decode": ("decode", "decode"),
    "h_event": (
        "{inst}: {kind}<br>boundary = {b} tokens<br>{nbytes} B<br>{detail}<br>{x} ms",
        "{inst}：{kind}<br>边界 = {b} 个 token<br>{nbytes} B<br>{detail}<br>{x} 毫秒",
    ),
    # splice
    "t_spl": (
        "Forced splice: MLA KV of prefix A + KDA state of prefix B ({n} tokens)",
        "强行拼接：前缀 A 的 MLA KV + 前缀 B 的 KDA 状态（{n} 个 token）",
    ),
    "x_step": ("decoded token", "已解码 token"),
    "y_drift": ("max |Δlogit| vs one instance (log)", "与单实例的最大 |Δlogit|（对数）"),
    "l_clean": ("clean restore", "正确恢复"),
    "l_splice": ("spliced restore", "拼接恢复"),
    "t_spl_none": ("Forced splice", "强行拼接"),
    "spl_press": ("Press “Force a splice”", "请按“强行拼接”"),
    # tiers
    "t_tiers": (
        "State tiers on the Mooncake trace ({n} requests, {d} device / {h} host ckpts)",
        "Mooncake trace 上的状态层级（{n} 个请求，设备 {d} / 主机 {h} 个检查点）",
    ),
    "st_hit": ("state hit rate", "状态命中率"),
    "st_ttft": ("mean TTFT (s)", "平均首 token 时间（秒）"),
    "st_moved": ("loaded (GB)", "加载量（GB）"),
    "setup_device": ("device", "仅设备"),
    "setup_device+host": ("+ host", "+ 主机"),
    "setup_device+host+remote": ("+ remote", "+ 远端"),
    "tier_host": ("host", "主机"),
    "tier_remote": ("remote", "远端"),
    "tiers_why_none": (
        "**Why “+ host” adds nothing here:** the host keeps only each request's last state "
        "(written through when the request ends, least recently used out first), {h} of them "
        "at this ratio. {w:,} were written, and no later request found a longer restorable "
        "prefix there than on the device (0 host hits). A larger host / device ratio keeps "
        "more of them.",
        "**为什么“+ 主机”在这里毫无收益：** 主机只保存每个请求的最后一个状态（请求结束时直写，"
        "最久未用的先淘汰），此比例下最多 {h} 个。共写入 {w:,} 个，但之后没有任何请求在主机上"
        "找到比设备上更长的可恢复前缀（主机命中 0 次）。更大的主机 / 设备比例能保留更多状态。",
    ),
    "tiers_why_some": (
        "The host keeps only each request's last state (written through when the request "
        "ends, least recently used out first), {h} of them at this ratio: {k:,} requests "
        "restored from it.",
        "主机只保存每个请求的最后一个状态（请求结束时直写，最久未用的先淘汰），此比例下最多 "
        "{h} 个：{k:,} 个请求从主机恢复。",
    ),
    # markdown
    "meta_title": (
        "**safetensors header of the tiny object** ({n:,} bytes; {shapes})",
        "**小模型对象的 safetensors 头**（{n:,} 字节；{shapes}）",
    ),
    "meta_th": ("| key | value |", "| 键 | 值 |"),
    "pd_md": (
        "**decode restored from the {source} at token {at}** (prompt {n} tokens; prefill "
        "published at {pub}) · fetched {moved:,} bytes · tokens {same} one instance, max "
        "|Δlogit| = {d:.1e}",
        "**decode 从{source}恢复到第 {at} 个 token**（提示词 {n} 个 token；prefill 在 {pub} "
        "发布）· 取回 {moved:,} 字节 · token {same}单实例，最大 |Δlogit| = {d:.1e}",
    ),
    "same_yes": ("identical to", "一致于"),
    "same_no": ("DIFFERENT from", "不同于"),
    "src_store": ("store", "存储"),
    "src_host": ("host", "主机"),
    "src_device": ("device", "设备"),
    "src_none": ("(none)", "（无）"),
    "mis_placeholder": (
        "*Press “Offer to mismatched instances”.*",
        "*请按“交给不匹配的实例”。*",
    ),
    "mis_th": (
        "| mismatch | refused on | message | still serves correctly |",
        "| 不匹配 | 拒绝字段 | 信息（原文） | 仍正确服务 |",
    ),
    "mis_weights": ("weights differ", "权重不同"),
    "mis_tokenizer": ("tokenizer differs", "分词器不同"),
    "mis_layout": ("TP layout differs", "TP 布局不同"),
    "mis_corrupt": ("corrupted data", "数据损坏"),
    "mis_truncated": ("truncated file", "文件截断"),
    "mis_foreign": ("not a state object", "非状态对象文件"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "Where a KDA state is found: device, host, Mooncake Store",
        "KDA 状态在哪里命中：设备、主机与 Mooncake Store",
    ),
    "fig_ttft": ("TTFT (s)", "首 token 时间（秒）"),
    "fig_mean": ("mean", "平均"),
    "fig_p95": ("p95", "p95"),
    "fig_moved": ("bytes loaded", "加载的字节数"),
    "fig_from_host": ("from host", "来自主机"),
    "fig_from_remote": ("from remote", "来自远端"),
    "fig_source": (
        "Data: Mooncake conversation trace, first {n:,} requests; Kimi K3 TP8, "
        "{d} device / {h} host checkpoints of {ck}",
        "数据：Mooncake 对话 trace 前 {n:,} 个请求；Kimi K3 TP8，"
        "设备 {d} / 主机 {h} 个检查点（每个 {ck}）",
    ),
}
MSG = Catalog("state_transfer", {**_PAGE, **_FIGURES}, COMMON)

__all__ = ["MSG"]
