"""memory_planner's "plan from my trace" panel in words (English / 中文): ``TRACE``, a base of
``words.memory_planner.MSG`` (an objective's code ``obj_<objective>``), and what only the static
figure ``plots/plot_plan.py`` says (``MSG``: ``TRACE`` plus keys ``fig_*``; it names the chunk
sizes, the Pareto front and the axes as the panel does)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PANEL: dict[str, tuple[str, str]] = {
    "acc_trace": ("Plan from my trace", "按我的 trace 规划"),
    "trace_intro": (
        "**Sweep SGLang's flags on your own workload.** Each point (a "
        "`--mamba-full-memory-ratio` and a `--chunked-prefill-size`) is sized as SGLang "
        "0.5.23 sizes it, your trace is replayed through the simulator under that point's "
        "state and KV pools and queued at its concurrency cap. Kimi K3 at TP8. No file: the "
        "bundled Mooncake conversation trace.",
        "**在你自己的负载上扫描 SGLang 的参数。** 每个点（一个 "
        "`--mamba-full-memory-ratio` 与一个 `--chunked-prefill-size`）按 SGLang 0.5.23 "
        "的方式计算显存划分，你的 trace 在该点的状态池与 KV 池下由模拟器回放，"
        "并在其并发上限处排队。"
        "Kimi K3，TP8。不上传文件时使用内置的 Mooncake 对话 trace。",
    ),
    "f_trace_file": (
        "Trace file (at most {mib} MiB; none: the bundled trace)",
        "trace 文件（最多 {mib} MiB；不上传则用内置 trace）",
    ),
    "f_trace_n": ("Requests of the trace to use (1-12031)", "使用的请求数（1-12031）"),
    "f_trace_gib": ("Cache budget per GPU (GiB, 1-4096)", "每卡缓存预算（GiB，1-4096）"),
    "f_trace_ratios": (
        "--mamba-full-memory-ratio values (comma-separated, 1-12)",
        "--mamba-full-memory-ratio 取值（逗号分隔，1-12 个）",
    ),
    "f_trace_objective": ("Objective", "目标"),
    "obj_cached_tokens": ("most cached tokens", "缓存 token 最多"),
    "obj_state_hit_rate": ("highest state hit rate", "状态命中率最高"),
    "obj_ttft_p99_s": ("lowest TTFT p99", "TTFT p99 最低"),
    "f_trace_min": (
        "At least this many running requests (0: any)",
        "运行请求数至少为（0：不限）",
    ),
    "b_trace": ("Plan", "规划"),
    "v_trace_n": ("requests", "请求数"),
    "v_trace_gib": ("cache budget per GPU", "每卡缓存预算"),
    "v_trace_min": ("running requests", "运行请求数"),
    "v_trace_objective": ("objective", "目标"),
    "e_trace_ratios": (
        "ratios: give 1 to {n} comma-separated numbers in (0, 1000], got {got}",
        "比例：请填写 1 到 {n} 个以逗号分隔、位于 (0, 1000] 的数，收到 {got}",
    ),
    "progress_trace": ("point {done} of {total}", "第 {done}/{total} 个点"),
    "n_trace_front": ("Pareto front", "帕累托前沿"),
    "t_trace_front": (
        "Cached tokens against the running cap: each point of the sweep",
        "缓存 token 与运行上限：扫描的每个点",
    ),
    "trace_x": ("max running requests", "最大运行请求数"),
    "trace_y": ("cached tokens (restored prefix)", "缓存 token（恢复的前缀）"),
    "trace_l_chunk": ("--chunked-prefill-size {c}", "--chunked-prefill-size {c}"),
    "trace_l_front": ("Pareto front", "帕累托前沿"),
    "trace_l_best": ("recommended", "推荐点"),
    "trace_h": (
        "ratio {r}, chunk {c}: {x} running, {y} cached tokens",
        "比例 {r}，分块 {c}：运行 {x}，缓存 {y} token",
    ),
    "trace_summary": (
        "**{name}**: {n} requests, {pts} points ({failed} refused by the engine's checks).",
        "**{name}**：{n} 个请求，{pts} 个点（{failed} 个未通过引擎的检查）。",
    ),
    "trace_best": (
        "**Recommended**: point {i}, {objective} with at least {m} running: ratio {r}, "
        "chunk {c}: {run} running, {cached} cached tokens, TTFT p99 {ttft} s.",
        "**推荐**：第 {i} 个点，运行请求至少 {m} 时{objective}：比例 {r}，分块 {c}："
        "运行 {run}，缓存 {cached} token，TTFT p99 {ttft} 秒。",
    ),
    "trace_none": (
        "**No point** reaches {m} running requests: the most is {top}.",
        "**没有点** 达到 {m} 个运行请求：最多 {top} 个。",
    ),
    "trace_cmd": ("Launch it with:", "启动命令："),
    "trace_log": ("At start-up SGLang will print:", "启动时 SGLang 会打印："),
    "bundled_name": ("bundled conversation trace", "内置对话 trace"),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "The memory ratio trades running requests for cached tokens",
        "显存比例在运行请求数与缓存 token 之间取舍",
    ),
    "fig_front": ("cached tokens vs the running cap", "缓存 token 与运行上限"),
    "fig_ttft": ("TTFT p99 (cost model)", "TTFT p99（成本模型）"),
    "fig_x_ratio": ("--mamba-full-memory-ratio", "--mamba-full-memory-ratio"),
    "fig_y_ttft": ("seconds", "秒"),
    "fig_best": ("recommended (>= {m} running)", "推荐点（运行请求 >= {m}）"),
    "fig_source": (
        "Data: Mooncake conversation trace, first {n:,} requests; Kimi K3 TP8, SGLang 0.5.23 "
        "sizing on {gib:g} GiB per GPU; {ok} of {pts} points sized",
        "数据：Mooncake 对话 trace 前 {n:,} 个请求；Kimi K3 TP8，按 SGLang 0.5.23 在每卡 "
        "{gib:g} GiB 上计算；{pts} 个点中 {ok} 个可用",
    ),
}
TRACE = Catalog("memory_planner_trace", _PANEL)
MSG = Catalog("memory_planner_trace", _FIGURES, TRACE, COMMON)

__all__ = ["MSG", "TRACE"]
