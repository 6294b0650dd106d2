"""prefix_replay in words (English / 中文): the page and its figures (``_PAGE``; a policy's code
``pol_<policy>``, a timeline phase ``ph_<phase>``), a scenario's title (``scen_<name>``, the
codes of ``kda_core.studies.prefix_replay.SCENARIOS``), what only the static figure
``plots/plot_prefix_replay.py`` says (``_FIGURES``, keys ``fig_*``; its terms are the page's:
token 匹配点, 停放的检查点), and its panels' catalogs as bases: the batch view and the pools
panel (``words.prefix_replay_batch.BATCH``), vLLM's block table
(``words.prefix_replay_blocks.BLOCKS``)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON
from words.prefix_replay_batch import BATCH
from words.prefix_replay_blocks import BLOCKS

_INTRO_EN = (
    "**A prefix hit is not a state hit.** The radix cache matches your prompt token by token, "
    "but a KDA layer can only resume where its *recurrent state and conv window* were saved "
    "together with the MLA KV: at a checkpoint. The engine restores the deepest checkpoint on "
    "the matched path and **replays** the tokens from there up to the token match (violet), "
    "then prefills the rest (green). **Look at:** the gap between the checkpoint diamond and "
    "the match line on the timeline; the tree (pink nodes hold a checkpoint, blue ones are "
    "MLA-KV-only tombstones, black outlines are locked; hover a node for its locks and LRU "
    "ages); then press **Play**: the state heatmap converges and its distance to the uncached "
    "state falls to **exactly 0** at the match. Tick *inconsistent restore* to see what "
    "skipping the replay does to the logits. Below, the **batch view** serves several requests "
    "*at once* on one state pool: who waits, prefills, decodes or is retracted in each "
    "scheduler step, and where the pool caps concurrency.\n*TinyHybrid is trained on Python's "
    "docstrings: its output is shown as decoded text.*"
)
_INTRO_ZH = (
    "**前缀命中不等于状态命中。** radix 缓存逐 token 匹配你的提示词，但 KDA 层只能从*递推状态与"
    "卷积窗口*和 MLA KV 一起保存的位置——检查点——继续。引擎恢复匹配路径上最深的检查点，然后从"
    "那里**重放**到 token 匹配点（紫色），再预填充剩余部分（绿色）。**请看：** 时间线上检查点"
    "菱形与匹配线之间的距离；radix 树（粉色节点带检查点，蓝色是只有 MLA KV 的墓碑节点，黑框表示"
    "被锁定；悬停查看锁与 LRU 年龄）；然后按**播放**：状态热图逐步收敛，它与不走缓存的状态之间的"
    "距离在匹配点**精确降为 0**。勾选*不一致恢复*，看跳过重放会让 logits 偏离多远。下方的"
    "**批处理视图**在同一个状态池上*同时*服务多个请求：每个调度步里谁在等待、预填充、解码或被"
    "撤回，以及状态池在何处限制并发。\n*TinyHybrid 在 Python 文档字符串上训练过：输出以解码后的"
    "文本显示。*"
)
_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Prefix replay", "前缀命中与重放"),
    "blurb": (
        "Send requests through the KDA-aware cache and step through the replay to the match.",
        "把请求送进 KDA 感知的缓存，逐 token 观察从检查点重放到匹配点。",
    ),
    "intro": (_INTRO_EN, _INTRO_ZH),
    # inputs
    "f_scenario": ("Example scenario", "示例场景"),
    "b_load": ("Load scenario", "载入场景"),
    "f_text": (
        "Your request (free text, 中文 works; 1-1024 UTF-8 bytes)",
        "你的请求（任意文本，可写中文；1-1024 个 UTF-8 字节）",
    ),
    "b_send": ("Send", "发送"),
    "b_reset": ("Reset session", "重置会话"),
    "acc_cache": ("Cache settings", "缓存设置"),
    "f_policy": ("Checkpoint policy", "检查点策略"),
    "f_spacing": ("Checkpoint spacing (1-1024 tokens)", "检查点间隔（1-1024 个 token）"),
    "f_slots": (
        "Checkpoint slots (0 = default 256, max 4096)",
        "检查点槽位（0 = 默认 256，最多 4096）",
    ),
    "f_int8": ("INT8 parking", "INT8 停放"),
    "f_inconsistent": ("Inconsistent restore", "不一致恢复"),
    "b_apply": ("Apply settings", "应用设置"),
    "f_request": ("Request to inspect", "查看的请求"),
    "f_layer": ("KDA layer", "KDA 层"),
    "f_head": ("Head", "头"),
    "f_delta": ("show S − S_match (difference)", "显示 S − S_match（差值）"),
    "b_prev": ("◀ Prev", "◀ 上一步"),
    "b_play": ("▶ Play", "▶ 播放"),
    "b_pause": ("❚❚ Pause", "❚❚ 暂停"),
    "b_next": ("Next ▶", "下一步 ▶"),
    "f_step": (
        "Replay step (0 = restore point; Enter to go)",
        "重放步（0 = 恢复点；回车跳转）",
    ),
    "f_stage": ("Tree snapshot", "树快照"),
    "stage_0": ("while the request holds its restore lock", "请求持有恢复锁期间"),
    "stage_1": ("after the request (inserted)", "请求之后（已插入）"),
    "pol_interval": ("interval", "固定间隔"),
    "pol_sglang": ("sglang", "sglang"),
    "pol_marconi": ("marconi", "marconi"),
    "pol_vllm": ("vllm", "vllm"),
    "req_choice": ("#{n} {text}", "#{n} {text}"),
    # the names the checks use and their messages
    "v_policy": ("policy", "策略"),
    "v_spacing": ("checkpoint spacing (tokens)", "检查点间隔（token）"),
    "v_slots": ("checkpoint slots (0 = default 256)", "检查点槽位（0 = 默认 256）"),
    "v_layer": ("KDA layer", "KDA 层"),
    "v_head": ("head", "头"),
    "v_stage": ("tree snapshot", "树快照"),
    "v_scenario": ("scenario", "场景"),
    "v_request": ("request", "请求"),
    "v_step": ("step", "步"),
    "e_text_empty": (
        "request text must be non-empty (1 to 1024 UTF-8 bytes)",
        "请求文本不能为空（1 到 1024 个 UTF-8 字节）",
    ),
    "e_text_long": (
        "request text must be 1 to {n} UTF-8 bytes (tokens), got {got}",
        "请求文本必须为 1 到 {n} 个 UTF-8 字节（token），收到 {got}",
    ),
    "e_room": (
        "a session holds at most {n} requests; load a scenario or press Reset to start over",
        "一个会话最多 {n} 个请求；请载入场景或按“重置会话”重新开始",
    ),
    "e_empty": (
        "the session is empty: send a request or load a scenario first",
        "会话是空的：请先发送一个请求或载入场景",
    ),
    "e_request": (
        "request must be one of this session's requests, #1 to #{n} in the list (through "
        "the API an index in [{lo}, {hi}], -1 = the last), got {got}",
        "请求必须是本会话的请求之一，即列表中的 #1 到 #{n}（通过 API 时为 [{lo}, {hi}] 中的"
        "索引，-1 = 最后一个），收到 {got}",
    ),
    "e_step": (
        "step must be an integer in [0, {hi}] (request #{n}: 0 = the restore point), got {got}",
        "步必须是 [0, {hi}] 中的整数（请求 #{n}：0 = 恢复点），收到 {got}",
    ),
    "e_no_steps": (
        "request #{n} has no replay steps (it restored nothing)",
        "请求 #{n} 没有重放步（它没有恢复任何状态）",
    ),
    "progress_serve": ("serving {n} request(s) through the engine", "引擎正在服务 {n} 个请求"),
    "progress_send": ("serving request #{n} through the engine", "引擎正在服务请求 #{n}"),
    "progress_drift": (
        "restoring exactly, from INT8 and inconsistently",
        "正在精确恢复、从 INT8 恢复和不一致恢复",
    ),
    # figure names (CSV buttons)
    "n_timeline": ("token timeline", "token 时间线"),
    "n_replay": ("replay state heatmap", "重放状态热图"),
    "n_tree": ("radix tree", "radix 树"),
    "n_drift": ("logit drift", "logit 偏离"),
    # timeline
    "ph_restore": ("reused: KV + state from the checkpoint", "复用：检查点中的 KV 与状态"),
    "ph_replay": ("replayed: KV cached, state recomputed", "重放：KV 已缓存，状态重新计算"),
    "ph_prefill": ("fresh prefill (no token match)", "全新预填充（无 token 匹配）"),
    "ph_decode": ("decode (generated tokens)", "解码（生成的 token）"),
    "phs_restore": ("restore", "恢复"),
    "phs_replay": ("replay", "重放"),
    "phs_prefill": ("prefill", "预填充"),
    "phs_decode": ("decode", "解码"),
    "h_span": (
        "request #{n}<br>{ph} [{a}, {b}): {k} tokens",
        "请求 #{n}<br>{ph} [{a}, {b})：{k} 个 token",
    ),
    "l_ckpt": ("checkpoint parked (state + conv)", "停放的检查点（状态 + 卷积）"),
    "h_ckpt": ("checkpoint at {x} tokens", "检查点位于 {x} 个 token 处"),
    "l_match": ("token match", "token 匹配点"),
    "h_match": ("token match at {x} tokens", "token 匹配点位于 {x} 个 token 处"),
    "l_inspected": (
        "{row} = the inspected request (dark, outlined)",
        "{row} = 正在查看的请求（深色、带边框）",
    ),
    "v_cold": ("restore = match = {m} (cold prefill)", "恢复点 = 匹配点 = {m}（冷启动预填充）"),
    "v_nothing": (
        "restore = match = {m} (nothing to replay)",
        "恢复点 = 匹配点 = {m}（无需重放）",
    ),
    "v_restore": ("restore {a}", "恢复点 {a}"),
    "v_match": ("match {m}", "匹配点 {m}"),
    "t_timeline": (
        "Token timeline: request #{n} restores at {a}, replays {r}, prefills {p}",
        "Token 时间线：请求 #{n} 恢复于 {a}，重放 {r} 个，预填充 {p} 个",
    ),
    "x_tokens": ("token position (tokens)", "token 位置（token）"),
    "y_request": ("request", "请求"),
    # tree
    "t_tree_0": (
        "Radix tree while request #{n} holds its lock",
        "请求 #{n} 持有锁期间的 radix 树",
    ),
    "t_tree_1": ("Radix tree after request #{n}", "请求 #{n} 之后的 radix 树"),
    "t_tree": ("{title}: {a}, {b}, {c}", "{title}：{a}，{b}，{c}"),
    "cnt_ckpt_1": ("1 checkpoint node", "1 个检查点节点"),
    "cnt_ckpt_n": ("{n} checkpoint nodes", "{n} 个检查点节点"),
    "cnt_tomb_1": ("1 tombstone", "1 个墓碑节点"),
    "cnt_tomb_n": ("{n} tombstones", "{n} 个墓碑节点"),
    "cnt_branch_1": ("1 branch point", "1 个分叉点"),
    "cnt_branch_n": ("{n} branch points", "{n} 个分叉点"),
    "l_edge": ("edge (parent → child)", "边（父 → 子）"),
    "h_node": (
        "node {id} '{label}'<br>tokens [{a}, {b}) · depth {d} · children {c}<br>locks: KV "
        "{kl}, state {sl}<br>LRU age: KV {ka}, state {sa} ticks",
        "节点 {id} '{label}'<br>token [{a}, {b}) · 深度 {d} · 子节点 {c}<br>锁：KV {kl}，"
        "状态 {sl}<br>LRU 年龄：KV {ka}，状态 {sa} 个时钟刻",
    ),
    "l_root": ("root", "根"),
    "l_ckpt_node": ("checkpoint node (KV + KDA state)", "检查点节点（KV + KDA 状态）"),
    "l_tomb": ("tombstone (MLA KV only, no state)", "墓碑节点（只有 MLA KV，无状态）"),
    "l_branch": ("branch point (prompts diverge)", "分叉点（提示词在此分开）"),
    "h_branch": ("branch at {x} tokens", "分叉于 {x} 个 token 处"),
    "l_locked": ("locked (thick outline: in use)", "已锁定（粗边框：使用中）"),
    "y_branch": ("branch", "分支"),
    "lane": ("b{r}", "分支 {r}"),
    # replay
    "st_S": (
        "{what} (KDA layer {layer}, head {head})",
        "{what}（KDA 第 {layer} 层，头 {head}）",
    ),
    "st_S_delta": ("S − S_match", "S − S_match"),
    "st_S_state": ("state S", "状态 S"),
    "st_dist": ("distance to S_match", "到 S_match 的距离"),
    "cb_value": ("value", "数值"),
    "h_cell": ("key k={y}, value v={x}<br>{z}", "key k={y}，value v={x}<br>{z}"),
    "l_dist": (
        "‖S − S_match‖ / ‖S_match‖ (all KDA layers)",
        "‖S − S_match‖ / ‖S_match‖（所有 KDA 层）",
    ),
    "h_dist": (
        "position {x} (token '{tok}')<br>distance {y}",
        "位置 {x}（token '{tok}'）<br>距离 {y}",
    ),
    "l_this_step": ("this step", "当前步"),
    "h_this_step": ("step position {x}<br>distance {y}", "当前步位置 {x}<br>距离 {y}"),
    "t_replay_base": ("Replay step", "重放步"),
    "x_value": ("value channel v", "value 通道 v"),
    "y_key": ("key channel k", "key 通道 k"),
    "y_rel": ("relative distance (1 = norm of S)", "相对距离（1 = S 的范数）"),
    "at_match": ("= the token match", "= token 匹配点"),
    "at_before": ("{n} tokens before the match", "距匹配点还有 {n} 个 token"),
    "t_replay": (
        "Replay step {s}/{n}: position {pos} (token '{tok}'), {at}; distance {d:.3g}",
        "重放步 {s}/{n}：位置 {pos}（token '{tok}'），{at}；距离 {d:.3g}",
    ),
    "t_replay_none": ("Replay of request #{n}", "请求 #{n} 的重放"),
    "replay_none": (
        "nothing restored: no checkpoint on this request's path (cold prefill)",
        "未恢复任何状态：此请求的路径上没有检查点（冷启动预填充）",
    ),
    # drift
    "t_drift_plain": ("Logit drift of the inconsistent restore", "不一致恢复的 logit 偏离"),
    "why_at_match": (
        "request #{n} restores at its match ({m} tokens): nothing is replayed, so the "
        "inconsistent restore is the exact one",
        "请求 #{n} 在匹配点（{m} 个 token）恢复：没有重放，所以不一致恢复就是精确恢复",
    ),
    "why_none": (
        "request #{n} restores no checkpoint (restore 0, match {m}): it recomputes from an "
        "empty state, so there is no parked state to misuse",
        "请求 #{n} 没有恢复任何检查点（恢复点 0，匹配点 {m}）：它从空状态重新计算，没有可被"
        "误用的停放状态",
    ),
    "pick": (
        "requests whose restore differs from their match: {others} (Request to inspect)",
        "恢复点与匹配点不同的请求：{others}（在“查看的请求”中选择）",
    ),
    "pick_none": (
        "no request of this session restores short of its match: nothing can drift here",
        "本会话没有请求在匹配点之前恢复：这里不会产生偏离",
    ),
    "arm_inconsistent": (
        "inconsistent: MLA at the match, KDA at the checkpoint, no replay",
        "不一致：MLA 在匹配点，KDA 在检查点，不重放",
    ),
    "arm_inconsistent8": (
        "inconsistent: MLA at the match, KDA at the checkpoint (INT8), no replay",
        "不一致：MLA 在匹配点，KDA 在检查点（INT8），不重放",
    ),
    "arm_int8": ("INT8 checkpoint + exact replay", "INT8 检查点 + 精确重放"),
    "arm_exact": ("exact restore + replay", "精确恢复 + 重放"),
    "same": ("same token", "相同 token"),
    "different": ("different token", "不同 token"),
    "h_drift": (
        "generated token {x}<br>max |Δlogit| {y}<br>{agree} as the uncached run",
        "生成的第 {x} 个 token<br>max |Δlogit| {y}<br>与不走缓存的运行相比：{agree}",
    ),
    "t_drift": (
        "Request #{n}: logit drift vs an uncached run; inconsistent keeps {k}/{m} greedy "
        "tokens<br><span style='font-size:12px'>{settings}; restore {a}, match {b}</span>",
        "请求 #{n}：相对不走缓存运行的 logit 偏离；不一致恢复保留 {k}/{m} 个贪心 token"
        "<br><span style='font-size:12px'>{settings}；恢复点 {a}，匹配点 {b}</span>",
    ),
    "x_generated": ("generated token (index)", "生成的 token（序号）"),
    "y_drift": (
        "max |Δlogit| vs uncached (log)",
        "相对不走缓存的 max |Δlogit|（对数）",
    ),
    "set_interval": ("interval {k}", "固定间隔 {k}"),
    "set_sglang": ("sglang grid {k}", "sglang 网格 {k}"),
    "set_vllm": ("vllm block {k}", "vllm 块 {k}"),
    "set_marconi": ("marconi", "marconi"),
    "set_slots": ("{s}, {n} slots", "{s}，{n} 个槽位"),
    "set_int8": ("{s}, INT8", "{s}，INT8"),
    # summary table
    "th": ("| quantity | value |", "| 量 | 值 |"),
    "s_request": ("**Request #{n}**", "**请求 #{n}**"),
    "r_prompt": ("prompt", "提示词"),
    "r_tokens": ("{n} tokens", "{n} 个 token"),
    "r_match": ("token match", "token 匹配点"),
    "r_match_n": ("longest cached token prefix", "最长的已缓存 token 前缀"),
    "r_restore": ("**restore point**", "**恢复点**"),
    "r_restore_n": ("deepest checkpoint on that path", "该路径上最深的检查点"),
    "r_replayed": ("**replayed**", "**重放**"),
    "r_replayed_n": ("tokens [{a}, {b})", "token [{a}, {b})"),
    "r_prefilled": ("prefilled / decoded", "预填充 / 解码"),
    "r_output": ("output {out} ({n} byte tokens)", "输出 {out}（{n} 个字节 token）"),
    "r_parked": ("checkpoints parked", "停放的检查点"),
    "r_uncached": ("state at match vs uncached", "匹配点状态与不走缓存相比"),
    "r_relative": ("relative, all layers", "相对值，所有层"),
    "r_active": ("pools: active slots", "池：活跃槽位"),
    "r_peak": ("peak {a} / {b}", "峰值 {a} / {b}"),
    "r_ckpt_slots": ("pools: checkpoint slots", "池：检查点槽位"),
    "r_default": ("{n} (default)", "{n}（默认）"),
    "r_cow": ("pools: COW copies / donations", "池：COW 复制 / 捐赠"),
    "r_track": ("track writes {n}", "跟踪写入 {n}"),
    "r_evictions": ("pools: evictions", "池：驱逐"),
    "r_states": ("{n} states", "{n} 个状态"),
    "r_kv_tokens": ("{n} KV tokens", "{n} 个 KV token"),
    "r_session": ("session", "会话"),
    "r_session_n": (
        "state hits {h}, replayed {r}, prefill saved {s:.0%}",
        "状态命中 {h}，重放 {r}，节省的预填充 {s:.0%}",
    ),
    "empty_md": ("*(empty session)*", "*（空会话）*"),
    "empty_fig": (
        "empty session: send a request or load a scenario",
        "空会话：发送一个请求或载入场景",
    ),
    # step text
    "step_none": (
        "No replay for this request (it restored nothing).",
        "此请求没有重放（没有恢复任何状态）。",
    ),
    "step_md": (
        "Step **{s} / {n}** · position {pos} · distance {d:.3g} · state at match vs uncached "
        "prefill {e:.1e}",
        "第 **{s} / {n}** 步 · 位置 {pos} · 距离 {d:.3g} · 匹配点状态与不走缓存的预填充相比 "
        "{e:.1e}",
    ),
}
_SCENARIOS: dict[str, tuple[str, str]] = {
    "scen_system_tools_branches": (
        "System prompt + tools, two user branches",
        "系统提示词 + 工具，两个用户分支",
    ),
    "scen_multi_turn": ("Multi-turn chat (English and Chinese)", "多轮对话（中英文）"),
    "scen_long_document": ("Long document, several questions", "长文档，多个问题"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "A token hit is not a state hit: restore, replay, then prefill",
        "token 命中不等于状态命中：恢复、重放，再预填充",
    ),
    "fig_title_tl": (
        "{title}: a checkpoint every {k} tokens",
        "{title}：每 {k} 个 token 一个检查点",
    ),
    "fig_turn": ("turn {i}", "第 {i} 轮"),
    "fig_tokens": ("position in the conversation (tokens)", "对话中的位置（token）"),
    "fig_replay_x": (
        "token position (tokens): replay {r} → {m}",
        "token 位置（token）：重放 {r} → {m}",
    ),
    "fig_restore": ("restored from a checkpoint", "从检查点恢复"),
    "fig_replay": ("replayed (checkpoint → token match)", "重放（检查点 → token 匹配点）"),
    "fig_prefill": ("prefilled", "预填充"),
    "fig_decode": ("decoded", "解码"),
    "fig_ckpt": ("checkpoint parked", "停放的检查点"),
    "fig_match": ("token match", "token 匹配点"),
    "fig_row": ("restore {r} · match {m}", "恢复 {r} · 匹配 {m}"),
    "fig_title_dist": (
        "Turn {i}: replay reaches the uncached state",
        "第 {i} 轮：重放到达未缓存状态",
    ),
    "fig_dist": ("relative distance of all KDA states", "全部 KDA 状态的相对距离"),
    "fig_title_drift": (
        "Turn {i}: logits vs an uncached run",
        "第 {i} 轮：与未缓存运行的 logit 差",
    ),
    "fig_gen": ("generated token", "生成的 token"),
    "fig_diff": ("max |Δ logit|", "max |Δ logit|"),
    "fig_exact": ("exact restore + replay", "精确恢复 + 重放"),
    "fig_int8": ("INT8 checkpoint + replay", "INT8 检查点 + 重放"),
    "fig_bad": (
        "MLA at match, KDA at checkpoint, no replay",
        "MLA 在匹配点、KDA 在检查点、不重放",
    ),
    "fig_source": (
        "Data: the lab's caching engine serving TinyHybrid (trained k3-mini, greedy "
        "decoding), a checkpoint every {k} tokens",
        "数据：本实验室的缓存引擎运行 TinyHybrid（训练后的 k3-mini，贪心解码），"
        "每 {k} 个 token 一个检查点",
    ),
}
MSG = Catalog("prefix_replay", {**_PAGE, **_SCENARIOS, **_FIGURES}, BATCH, BLOCKS, COMMON)

__all__ = ["MSG"]
