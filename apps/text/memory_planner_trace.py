"""memory_planner's "plan from my trace" panel in words (English / 中文): ``TRACE``, a base of
``apps.text.memory_planner.MSG``, and the panel's summary."""

from __future__ import annotations

from apps.ui.catalog import Catalog, T
from kda_core.studies import plan_trace as pt

TRACE = Catalog(
    "memory_planner_trace",
    {
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
            "**{name}：**{n} 个请求，{pts} 个点（{failed} 个未通过引擎的检查）。",
        ),
        "trace_best": (
            "**Recommended**: point {i}, {objective} with at least {m} running: ratio {r}, "
            "chunk {c}: {run} running, {cached} cached tokens, TTFT p99 {ttft} s.",
            "**推荐：**第 {i} 个点，运行请求至少 {m} 时{objective}：比例 {r}，分块 {c}："
            "运行 {run}，缓存 {cached} token，TTFT p99 {ttft} 秒。",
        ),
        "trace_none": (
            "**No point** reaches {m} running requests: the most is {top}.",
            "**没有点** 达到 {m} 个运行请求：最多 {top} 个。",
        ),
        "trace_cmd": ("Launch it with:", "启动命令："),
        "trace_log": ("At start-up SGLang will print:", "启动时 SGLang 会打印："),
        "bundled_name": ("bundled conversation trace", "内置对话 trace"),
    },
)


def trace_markdown(p: pt.TracePlan | None, t: T) -> str:
    """The summary: the trace, the recommendation (or why none), its command and log lines."""
    if p is None:
        return ""
    s = p.sweep
    name = t("bundled_name") if s.trace_name.startswith("mooncake_conv") else f"`{s.trace_name}`"
    lines = [t("trace_summary", name=name, n=s.n_requests, pts=len(s.points), failed=len(s.failed))]
    m = s.min_running or 0
    if p.best < 0:
        top = int(p.max_running.max()) if len(p.max_running) else 0
        lines.append(t("trace_none", m=m, top=top))
        return "\n\n".join(lines)
    b = p.best
    lines.append(
        t(
            "trace_best",
            i=b,
            objective=t(f"obj_{s.objective}"),
            m=m,
            r=f"{p.ratio[b]:g}",
            c=int(p.chunk[b]),
            run=int(p.max_running[b]),
            cached=f"{p.cached_tokens[b]:,.0f}",
            ttft=f"{p.ttft_p99_s[b]:.3g}",
        )
    )
    lines.append(t("trace_cmd") + f"\n\n```\n{s.launch_command}\n```")
    lines.append(t("trace_log") + "\n\n```\n" + "\n".join(s.log_lines) + "\n```")
    return "\n\n".join(lines)
