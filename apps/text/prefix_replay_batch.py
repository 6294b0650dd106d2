"""prefix_replay's batch view and pools panel in words (English / 中文): their catalog
(``BATCH``, a base of ``apps.text.prefix_replay.MSG``) and the batch summary. SGLang's
messages are shown as SGLang prints them."""

from __future__ import annotations

from apps.text.common import COMMON
from apps.ui.catalog import Catalog, T
from kda_core.studies import batch_view as bv

BATCH = Catalog(
    "prefix_replay_batch",
    {
        "acc_batch": ("Batch view: several requests at once", "批处理视图：同时服务多个请求"),
        "f_b_text": (
            "Batch requests (one prompt per line, 1-{n} lines)",
            "批处理请求（每行一个提示词，1-{n} 行）",
        ),
        "f_b_arr": (
            "Arrival steps (one per request, 0-64; empty = all at step 0)",
            "到达步（每个请求一个，0-64；留空 = 全部在第 0 步）",
        ),
        "f_b_new": ("Max new tokens (1-{n})", "最多新 token 数（1-{n}）"),
        "f_b_budget": ("Token budget per step (8-256)", "每步 token 预算（8-256）"),
        "f_b_strategy": ("Strategy", "策略"),
        "f_b_slots": ("State slots (5-64)", "状态槽位（5-64）"),
        "f_b_kv": (
            "KV pool in tokens (0 = no limit; up to {n})",
            "KV 池（token；0 = 不限，最多 {n}）",
        ),
        "b_batch": ("Serve together", "一起服务"),
        "v_new": ("max new tokens", "最多新 token 数"),
        "v_strategy": ("strategy", "策略"),
        "v_b_slots": ("state slots", "状态槽位"),
        "v_budget": ("token budget per step", "每步 token 预算"),
        "v_kv": ("KV pool in tokens (0 = no limit)", "KV 池 token 数（0 = 不限）"),
        "v_arrivals": ("arrival steps", "到达步"),
        "e_b_text": (
            "batch requests (one per line) must be text",
            "批处理请求（每行一个）必须是文本",
        ),
        "e_b_lines": (
            "batch requests (one per line) must hold 1 to {n} non-empty lines, got {got}",
            "批处理请求（每行一个）必须有 1 到 {n} 个非空行，收到 {got}",
        ),
        "e_b_line": (
            "batch requests (one per line): line {i} must be 1 to {n} UTF-8 bytes, got {got}",
            "批处理请求（每行一个）：第 {i} 行必须为 1 到 {n} 个 UTF-8 字节，收到 {got}",
        ),
        "e_b_arr_int": (
            "arrival steps must be integers in [0, {n}] separated by commas, got {got}",
            "到达步必须是 [0, {n}] 内、以逗号分隔的整数，收到 {got}",
        ),
        "e_b_arr_count": (
            "arrival steps must give one step in [0, {n}] per request ({k}) or be empty, got {got}",
            "到达步必须为每个请求（{k} 个）各给一个 [0, {n}] 内的步，或者留空，收到 {got}",
        ),
        "progress_batch": ("serving {n} requests together", "正在一起服务 {n} 个请求"),
        "n_pools": ("pools", "池"),
        "n_phases": ("batch swimlane", "批处理泳道图"),
        "n_bpool": ("batch pool", "批处理状态池"),
        "cnt_checkpoint_used": ("checkpoint slots used", "已用检查点槽位"),
        "cnt_copies": ("COW copies (restores)", "COW 复制（恢复）"),
        "cnt_donations": ("donations (track slot -> pool)", "捐赠（跟踪槽 → 池）"),
        "cnt_evicted_states": ("evicted states", "被驱逐的状态"),
        "h_counter": ("after request {x}<br>{name}: {y}", "请求 {x} 之后<br>{name}：{y}"),
        "st_per_request": ("per request, one at a time", "逐个请求"),
        "st_batch_peak": ("the batch run at its peak step", "批处理运行的峰值步"),
        "cap": ("checkpoint pool capacity {n}", "检查点池容量 {n}"),
        "t_pools": (
            "Pools after each request (cumulative) · real concurrency",
            "每个请求之后的池（累计）· 真实并发",
        ),
        "y_count": ("count (slots / events)", "计数（槽位 / 事件）"),
        "serve_below": (
            "serve the batch below to see real concurrency",
            "在下方服务批处理以查看真实并发",
        ),
        "all_rejected_panel": (
            "the last batch ran no step: every request was rejected",
            "上一批没有运行任何一步：每个请求都被拒绝",
        ),
        "step_n": ("step {n}", "第 {n} 步"),
        "y_peak_slots": ("state slots at the peak", "峰值时的状态槽位"),
        "x_peak": ("{run} running / max {cap}", "运行 {run} / 上限 {cap}"),
        "h_kind": ("{name}: {y} slots", "{name}：{y} 个槽位"),
        "pk_not_arrived": ("not arrived", "尚未到达"),
        "pk_waiting": ("waiting", "等待"),
        "pk_prefill": ("prefill chunk", "预填充分块"),
        "pk_decode": ("decode", "解码"),
        "pk_retracted": ("retracted", "被撤回"),
        "pk_finished": ("finished", "已完成"),
        "pk_rejected": ("rejected", "被拒绝"),
        "h_phase": ("request #{n}<br>{name}: steps {a}-{b}", "请求 #{n}<br>{name}：第 {a}-{b} 步"),
        "h_rejected0": ("request #{n}<br>{name} at admission", "请求 #{n}<br>接纳时{name}"),
        "t_phases": (
            "Batch: each request's phase per scheduler step ({n} requests, {s} steps, peak {p} "
            "running)",
            "批处理：每个请求在各调度步的阶段（{n} 个请求，{s} 步，峰值并发 {p}）",
        ),
        "x_step": ("scheduler step", "调度步"),
        "kind_slots_running": ("slots held by running requests", "运行中请求占用的槽位"),
        "kind_slots_cached": ("cached checkpoints", "缓存的检查点"),
        "kind_slots_free": ("free slots", "空闲槽位"),
        "st_pool": ("state slots (pool size {n})", "状态槽位（池大小 {n}）"),
        "st_running": ("running requests", "并发请求"),
        "h_pool": ("step {x}<br>{name}: {y}", "第 {x} 步<br>{name}：{y}"),
        "l_running": ("running requests", "并发请求"),
        "h_running": ("step {x}<br>{y} running", "第 {x} 步<br>运行 {y} 个"),
        "l_cap": ("max running requests {n}", "最大并发请求数 {n}"),
        "l_cap_capped": (
            "max running requests {n} (capped by the state pool)",
            "最大并发请求数 {n}（被状态池限制）",
        ),
        "t_bpool": (
            "One state pool over time: {s}, peak {p} running (max running requests {m})",
            "同一个状态池随时间的变化：{s}，峰值并发 {p}（最大并发请求数 {m}）",
        ),
        "no_step": (
            "no scheduler step ran: every request was rejected (the pool stayed empty, {n} free "
            "slots)",
            "没有运行任何调度步：每个请求都被拒绝（状态池一直是空的，{n} 个空闲槽位）",
        ),
        "y_slots": ("state slots", "状态槽位"),
        "empty_pools": ("empty session: send a request", "空会话：请发送一个请求"),
        "b_head": (
            "**Batch: {n} requests, {s} steps** · {strategy}, {slots} state slots{kv} · peak "
            "running requests **{peak}** / max running requests **{cap}** (sizing: {plan})",
            "**批处理：{n} 个请求，{s} 步** · {strategy}，{slots} 个状态槽位{kv} · 峰值并发 "
            "**{peak}** / 最大并发请求数 **{cap}**（按容量计算：{plan}）",
        ),
        "b_kv": (", KV pool {n} tokens", "，KV 池 {n} 个 token"),
        "b_capped": (
            "**The state pool caps concurrency.** SGLang would print:",
            "**状态池限制了并发。** SGLang 会打印（原文）：",
        ),
        "b_no_cap": (
            "no cap: the workload never reached {n} running requests",
            "没有触顶：负载从未达到 {n} 个并发请求",
        ),
        "b_restored": ("restored tokens from the tree: {list}", "从树中恢复的 token：{list}"),
        "b_retractions": (
            "retractions {n} · steps with a retraction {s}: the KV pool could not hold the next "
            "decode tokens, so the running request with the fewest new tokens (then the longest "
            "prompt) went back to waiting, to be redone later (SGLang's retract_decode)",
            "撤回 {n} 次 · 发生撤回的步数 {s}：KV 池放不下下一步的解码 token，于是新 token 最少"
            "（其次提示词最长）的运行中请求退回等待，稍后重做（SGLang 的 retract_decode）",
        ),
        "b_all_rejected": (
            "every request was rejected: none fits the KV pool, so no scheduler step ran and the "
            "state pool stayed empty",
            "每个请求都被拒绝：没有一个放得进 KV 池，所以没有运行任何调度步，状态池一直是空的",
        ),
        "b_rejected": (
            "request #{n} rejected: {msg}",
            "请求 #{n} 被拒绝，SGLang 风格的原话：{msg}",
        ),
    },
    COMMON,
)


def batch_markdown(v: bv.BatchView, t: T) -> str:
    """Peak vs cap, the capping message when it bites, retractions, rejections, restores."""
    kv = "" if v.kv_tokens is None else t("b_kv", n=v.kv_tokens)
    lines = [
        t("b_head", n=len(v.prompts), s=v.n_steps, strategy=v.strategy, slots=v.state_slots,
          kv=kv, peak=v.peak_running, cap=v.max_running, plan=v.planner_max_running),
    ]  # fmt: skip
    if v.capped:  # as SGLang prints it, in English
        lines.append(f"{t('b_capped')}\n\n> {v.capping_message or ''}")
    else:
        lines.append(t("b_no_cap", n=v.max_running))
    restored = [f"#{i + 1}: {int(r)}" for i, r in enumerate(v.restore_at) if r > 0]
    if restored:
        lines.append(t("b_restored", list=", ".join(restored)))
    if v.retractions.sum():
        lines.append(t("b_retractions", n=int(v.retractions.sum()), s=v.retracted_steps))
    if v.n_steps == 0 and v.rejected:
        lines.append(t("b_all_rejected"))
    for i, msg in sorted(v.rejected.items()):
        lines.append(t("b_rejected", n=i + 1, msg=f"“{msg}”" if t.zh else msg))
    return "\n\n".join(lines)
