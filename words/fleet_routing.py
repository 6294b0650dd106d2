"""fleet_routing in words (English / 中文): the page and its figures (``_PAGE``; a router's code
``r_<router>``, ``kda_core.fleet.ROUTERS``; why a replica gave other than counted
``g_<reason>``, ``kda_core.fleet.GAP_REASONS``; an engine ``en_<engine>``), and what only the
static figure ``plots/plot_fleet_routing.py`` says (``_FIGURES``, keys ``fig_*``; it names the
routers, the reasons, the replicas and the two rates as the page does)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("Fleet routing", "多副本路由"),
    "blurb": (
        "N replicas behind a router fed by KV events: what KV-only routers promise a hybrid.",
        "由 KV 事件驱动的路由器后面有 N 个副本：只看 KV 的路由器对混合模型多估了什么。",
    ),
    "r_round_robin": ("round-robin", "轮询"),
    "r_least_loaded": ("least loaded", "最少负载"),
    "r_sglang_cache_aware": ("SGLang cache-aware", "SGLang 缓存感知"),
    "r_kv_events": ("KV events (attention groups)", "KV 事件（仅注意力组）"),
    "r_kv_events_all_groups": ("KV events (all groups)", "KV 事件（全部组）"),
    "r_state_aware": ("state-aware", "状态感知"),
    "g_as_expected": ("as counted", "与估计一致"),
    "g_kv_without_state": ("KV held, no state that deep", "KV 在，但那么深处没有状态"),
    "g_not_held": ("counted blocks not held", "计入的块并不在副本上"),
    "g_unexpected_hit": ("more than counted", "比估计的多"),
    "intro": (
        "**Routing a hybrid model across replicas.** Cache-aware routers (SGLang's router, "
        "NVIDIA Dynamo's KV router, llm-d's indexer) send a request to the replica that "
        "caches the longest part of its prefix, learning what each replica holds from the "
        "engines' **KV events** (vLLM / SGLang `BlockStored`, `BlockRemoved`). They index "
        "**KV blocks**. For a KDA hybrid a KV prefix is only a hit up to the deepest block "
        "whose **state** the "
        "replica still holds, so a KV-only router counts hits the replica cannot give. Here "
        "N replicas, each the lab's single-server model, publish events in the engines' own "
        "wire format; every router reads only those (or its own history). **Look at:** the "
        "hit rates side by side (what each router counted against what the replicas gave), "
        "the requests the KV-only router over-promised, and the load per replica over time "
        "(a router that only chases cache pins one replica).",
        "**在多个副本之间路由混合模型。** 缓存感知路由器（SGLang 路由器、NVIDIA Dynamo 的 KV "
        "路由器、llm-d 的索引器）把请求发往缓存了其最长前缀的副本，并从引擎的 **KV 事件**"
        "（vLLM / SGLang 的 `BlockStored`、`BlockRemoved`）得知每个副本缓存了什么。它们索引"
        "的是 **KV 块**。对 KDA 混合模型而言，KV 前缀只在副本仍持有**状态**的最深块以内才算"
        "命中，所以只看 KV 的路由器会算上副本给不出的命中。这里 N 个副本各是实验室的单机模型，"
        "以引擎自己的格式发布事件；每个路由器只读这些事件（或自己的路由历史）。**请看**："
        "各路由器并排的命中率（路由器估计的与副本实际给出的）、只看 KV 的路由器多估的请求，"
        "以及各副本随时间的负载（只追缓存的路由器会把流量压在一个副本上）。",
    ),
    "f_trace": ("Trace", "请求轨迹"),
    "tr_conversation": (
        "Mooncake conversation (first N requests)",
        "Mooncake 对话（前 N 个请求）",
    ),
    "tr_chat": ("multi-turn sessions (synthetic)", "多轮会话（合成）"),
    "tr_upload": ("my file (below)", "我上传的文件（下方）"),
    "f_requests": ("Requests N (100-12031)", "请求数 N（100-12031）"),
    "f_file": (
        "Trace file (any load_trace format, ≤ {mib} MiB, ≤ {n} requests)",
        "轨迹文件（load_trace 支持的任一格式，≤ {mib} MiB，≤ {n} 个请求）",
    ),
    "f_replicas": ("Replicas (1-16)", "副本数（1-16）"),
    "f_router": ("Router drawn over time", "画负载曲线的路由器"),
    "f_weight": ("Overlap weight w (0-100)", "重叠权重 w（0-100）"),
    "f_engine": ("Engine rules", "引擎规则"),
    "en_vllm": ("vLLM 0.33 (block 768)", "vLLM 0.33（块 768）"),
    "en_sglang": ("SGLang 0.5.23", "SGLang 0.5.23"),
    "f_budget": (
        "State budget per replica, GiB per GPU (0 = unlimited)",
        "每副本状态预算，每 GPU GiB（0 = 不限）",
    ),
    "b_run": ("Route", "路由"),
    "v_requests": ("requests N", "请求数 N"),
    "v_replicas": ("replicas", "副本数"),
    "v_weight": ("overlap weight w", "重叠权重 w"),
    "v_budget": ("state budget (GiB)", "状态预算（GiB）"),
    "v_trace": ("trace", "请求轨迹"),
    "v_router": ("router", "路由器"),
    "v_engine": ("engine", "引擎"),
    "e_no_file": ("choose a trace file first", "请先选择轨迹文件"),
    "e_big": (
        "the file is {size} MiB, the cap is {cap} MiB",
        "文件大小为 {size} MiB，上限为 {cap} MiB",
    ),
    "n_rates": ("hit rates per router", "各路由器命中率"),
    "n_load": ("load per replica over time", "各副本负载随时间"),
    "n_over": ("over-promised requests", "多估的请求"),
    "t_rates": (
        "Hit rates per router ({n} requests, {k} replicas, {engine})",
        "各路由器的命中率（{n} 个请求，{k} 个副本，{engine}）",
    ),
    "l_given": ("given by the replica (restored)", "副本实际给出（可恢复）"),
    "l_counted": ("counted by the router", "路由器估计"),
    "l_kv": ("KV prefix held (token match)", "持有的 KV 前缀（token 匹配）"),
    "l_best": ("best replica at each decision", "每次决策时最好的副本"),
    "y_rate": ("share of input tokens", "占输入 token 的比例"),
    "h_rate": ("{router}: {what} {y}", "{router}：{what} {y}"),
    "t_load": ("In flight per replica: {router}", "各副本在途请求数：{router}"),
    "x_time": ("time (s)", "时间（秒）"),
    "y_load": ("requests in flight", "在途请求数"),
    "l_replica": ("replica {k}", "副本 {k}"),
    "h_load": ("replica {k} at {x} s: {y} in flight", "副本 {k}，{x} 秒：在途 {y} 个"),
    "t_over": (
        "KV-only router: counted vs given ({n} requests over-promised)",
        "只看 KV 的路由器：估计与实际（{n} 个请求被多估）",
    ),
    "x_counted": ("tokens the router counted as cached", "路由器估计的已缓存 token"),
    "y_given": ("tokens the replica restored", "副本实际恢复的 token"),
    "h_over": (
        "request {i}: counted {x}, given {y} ({reason})",
        "请求 {i}：估计 {x}，实际 {y}（{reason}）",
    ),
    "l_diag": ("counted = given", "估计 = 实际"),
    "s_head": (
        "**`{trace}`**, {n} requests, {k} replicas, {engine}, w = {w}",
        "**`{trace}`**，{n} 个请求，{k} 个副本，{engine}，w = {w}",
    ),
    "s_cols": (
        "| router | given | counted | over-promised | skew | regret | TTFT p50 / p99 (s) |",
        "| 路由器 | 实际命中 | 估计命中 | 多估 | 负载偏斜 | 损失 | TTFT p50 / p99（秒） |",
    ),
    "s_gain": (
        "State-aware vs KV events (attention groups): **{gain:+.1f} percentage points** of "
        "input tokens restored, {over} fewer tokens over-promised.",
        "状态感知相对 KV 事件（仅注意力组）：恢复的输入 token 占比 **{gain:+.1f} 个百分点**，"
        "多估的 token 少 {over} 个。",
    ),
    "s_note": (
        "*given*: the replicas' restore points (the prefill skipped), as a share of the input "
        "tokens; *counted*: what the router scored; *over-promised*: tokens counted and not "
        "given; *skew*: the busiest replica's requests over the mean; *regret*: tokens lost "
        "against the best replica at each decision. *KV events (all groups)* is the index before "
        "Infera#98's fix (state groups' events indexed too); it scores as the attention-groups "
        "index unless a state group's event lands on an attention block's hash, as under "
        "vLLM's rules with a state budget.",
        "*实际命中*：副本的恢复点（省下的 prefill），占输入 token 的比例；*估计命中*：路由器"
        "打分时算的；*多估*：算了却没给出的 token；*负载偏斜*：最忙副本的请求数与平均之比；"
        "*损失*：与每次决策时最好的副本相比少得的 token。*KV 事件（所有组）* 是 Infera#98 修复前"
        "的索引（状态组的事件也被索引）；只有当状态组的事件落在某个注意力块的哈希上时（如 vLLM "
        "规则加状态预算），它的打分才与仅注意力组的索引不同。",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "Four replicas, six routers: hits counted vs given\n(Kimi K3, SGLang rules)",
        "四个副本、六种路由器：估计的命中与实际的命中\n（Kimi K3，SGLang 规则）",
    ),
    "fig_rates": ("Hit rates per router", "各路由器的命中率"),
    "fig_over": (
        "KV-only router:\n{n:,} requests over-promised",
        "只看 KV 的路由器：\n{n:,} 个请求被多估",
    ),
    "fig_x_over": ("tokens counted (thousands)", "估计的 token（千）"),
    "fig_y_over": ("tokens restored (thousands)", "实际恢复的 token（千）"),
    "fig_load": (
        "State-aware router:\nrequests in flight per replica",
        "状态感知路由器：\n各副本的在途请求数",
    ),
    "fig_x_load": ("time (min)", "时间（分钟）"),
    "fig_source": (
        "Data: Mooncake conversation trace, {n:,} requests; {k} replicas, Kimi K3 TP8, {gib:g} "
        "GiB of states per GPU; events in SGLang 0.5.23's format",
        "数据：Mooncake 对话 trace，{n:,} 个请求；{k} 个副本，Kimi K3 TP8，每 GPU {gib:g} GiB "
        "状态；事件为 SGLang 0.5.23 的格式",
    ),
}
MSG = Catalog("fleet_routing", {**_PAGE, **_FIGURES}, COMMON)

__all__ = ["MSG"]
