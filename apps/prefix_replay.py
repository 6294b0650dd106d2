"""prefix_replay: a token prefix hit is not a state hit; watch the replay close the gap.

Draws ``kda_core.studies.prefix_replay``: requests (a built-in scenario or the reader's own
texts, Chinese included) served one by one through the real caching engine on TinyHybrid. Per
request: the token timeline, the radix tree, the replay stepped token by token with the KDA
state heatmap (its distance to the uncached state is exactly 0 at the token match) and, on
request, the logit drift of an inconsistent restore. The batch view
(``kda_core.studies.batch_view``) serves several requests at once on one state pool: each
request's phase per scheduler step, the pool by kind over time and the cap when it bites; the
pools panel shows that real concurrency. Concept: docs/prefix_replay.md.

This module is the layout and the event wiring. Callbacks: ``apps.prefix_replay_session``
(one tab's requests), ``apps.prefix_replay_batch`` (the batch view); checks:
``apps.prefix_replay_checks``; figures: ``apps.figures.prefix_replay*``; words:
``apps.text.prefix_replay``. Public actions (api_name): ``prefix_replay_load``, ``_send``,
``_apply``, ``_reset``, ``_inspect``, ``_step``, ``_prev``, ``_next``, ``_batch``.
"""

from __future__ import annotations

import gradio as gr

from apps import common, guard, i18n
from apps import prefix_replay_batch as pb
from apps import prefix_replay_checks as checks
from apps.prefix_replay_batch import redraw_batch, serve_batch
from apps.prefix_replay_checks import STAGES
from apps.prefix_replay_session import (
    SCENARIOS,
    TabState,
    _request_choices,
    apply_settings,
    go_to_step,
    inspect,
    load_scenario,
    next_step,
    play,
    play_tick,
    prev_step,
    redraw,
    reset_session,
    send_request,
)
from apps.text.prefix_replay import EN, TR, ZH
from kda_core.studies import batch_view as bv
from kda_core.studies import prefix_replay as pr

NAME = "prefix_replay"
POLICIES = pr.POLICIES
PLAY_INTERVAL_S = 0.4
__all__ = [
    "STAGES",
    "TabState",
    "apply_settings",
    "build",
    "go_to_step",
    "inspect",
    "load_scenario",
    "next_step",
    "play",
    "play_tick",
    "prev_step",
    "redraw",
    "redraw_batch",
    "reset_session",
    "send_request",
    "serve_batch",
]


def build() -> gr.Blocks:
    with gr.Blocks(title="Prefix replay · KDA State Lab") as demo:
        lang = common.header(NAME, "Prefix replay · 前缀命中与重放", EN, ZH)
        n_layers, n_heads = pr.kda_shape()  # the served model's KDA layers and heads
        session = gr.State(None)
        timer = gr.Timer(PLAY_INTERVAL_S, active=False)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                scenario = gr.Dropdown(
                    [(pr.SCENARIOS[n].title, n) for n in SCENARIOS], value=SCENARIOS[0],
                    label="Example scenario", elem_id=f"{NAME}-scenario",
                )  # fmt: skip
                load = gr.Button("Load scenario", elem_id=f"{NAME}-load")
                text = gr.Textbox(
                    label="Your request (free text, 中文 works; 1-1024 UTF-8 bytes)",
                    lines=3, elem_id=f"{NAME}-text",
                    value=pr.SCENARIOS[SCENARIOS[0]].prompts[0].rsplit("User:", 1)[0]
                    + "User: 明天上海的天气怎么样？\nAssistant:",
                )  # fmt: skip
                with gr.Row():
                    send = gr.Button("Send", variant="primary", elem_id=f"{NAME}-send")
                    reset = gr.Button("Reset session", elem_id=f"{NAME}-reset")
                with gr.Accordion("Cache settings", open=True) as cache_box:
                    policy = gr.Radio(
                        list(POLICIES),
                        value="interval",
                        label="Checkpoint policy",
                        elem_id=f"{NAME}-policy",
                    )
                    with gr.Row():
                        spacing = gr.Number(
                            32,
                            label="Checkpoint spacing (1-1024 tokens)",
                            elem_id=f"{NAME}-spacing",
                        )
                        slots = gr.Number(
                            0,
                            label="Checkpoint slots (0 = default 256, max 4096)",
                            elem_id=f"{NAME}-slots",
                        )
                    with gr.Row():
                        int8 = gr.Checkbox(False, label="INT8 parking", elem_id=f"{NAME}-int8")
                        inconsistent = gr.Checkbox(
                            False, label="Inconsistent restore", elem_id=f"{NAME}-inconsistent"
                        )
                    apply = gr.Button("Apply settings", elem_id=f"{NAME}-apply")
                summary = gr.Markdown(
                    label="Request summary",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
            with gr.Column(scale=2):
                first = TabState(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
                request = gr.Dropdown(
                    _request_choices(first), value=len(first.prompts) - 1,
                    label="Request to inspect", elem_id=f"{NAME}-request",
                )  # fmt: skip
                request.api_info = checks.request_api_info  # an index, not the build-time choices
                s_time = common.figure_slot(f"{NAME}-timeline", "Token timeline")
                with gr.Row():
                    layer = gr.Slider(
                        0, n_layers - 1, value=0, step=1, label="KDA layer", elem_id=f"{NAME}-layer"
                    )
                    head = gr.Slider(
                        0, n_heads - 1, value=0, step=1, label="Head", elem_id=f"{NAME}-head"
                    )
                    delta = gr.Checkbox(True, label="show S − S_match (difference)")
                with gr.Row():
                    prev = gr.Button("◀ Prev", elem_id=f"{NAME}-prev", size="sm")
                    play_btn = gr.Button(
                        "▶ Play", elem_id=f"{NAME}-play", size="sm", variant="primary"
                    )
                    pause = gr.Button("❚❚ Pause", elem_id=f"{NAME}-pause", size="sm")
                    nxt = gr.Button("Next ▶", elem_id=f"{NAME}-next", size="sm")
                step = gr.Slider(0, 1, value=0, step=1, label="Replay step", elem_id=f"{NAME}-step")
                step_md = gr.Markdown(label="Replay step details", elem_id=f"{NAME}-step-info")
                s_replay = common.figure_slot(f"{NAME}-replay", "Replay state heatmap")
                stage = gr.Radio(
                    list(STAGES), value=STAGES[0], label="Tree snapshot", elem_id=f"{NAME}-stage"
                )
                s_tree = common.figure_slot(f"{NAME}-tree", "Radix tree")
                s_drift = common.figure_slot(f"{NAME}-drift", "Logit drift")
                s_drift.plot.visible = s_drift.csv.visible = False  # until the toggle is on
                s_pools = common.figure_slot(f"{NAME}-pools", "Pools")

        with (
            gr.Accordion("Batch view: several requests at once", open=True) as batch_box,
            gr.Row(),
        ):
            with gr.Column(scale=1, min_width=300):
                b_text = gr.Textbox(
                        "\n".join(bv.DEFAULT_PROMPTS), lines=6, max_lines=14,
                        label=f"Batch requests (one prompt per line, 1-{pb.MAX_BATCH} lines)",
                        elem_id=f"{NAME}-batch-text",
                    )  # fmt: skip
                b_arr = gr.Textbox(
                        ", ".join(map(str, bv.DEFAULT_ARRIVALS)),
                        label="Arrival steps (one per request, 0-64; empty = all at step 0)",
                        elem_id=f"{NAME}-batch-arrivals",
                    )  # fmt: skip
                with gr.Row():
                    b_new = gr.Number(
                            8, label=f"Max new tokens (1-{pb.MAX_NEW})", step=1,
                            elem_id=f"{NAME}-batch-new",
                        )  # fmt: skip
                    b_budget = gr.Number(
                            64, label="Token budget per step (8-256)", step=1,
                            elem_id=f"{NAME}-batch-budget",
                        )  # fmt: skip
                b_strategy = gr.Radio(
                        list(pb.BATCH_STRATEGIES), value="extra_buffer", label="Strategy",
                        elem_id=f"{NAME}-batch-strategy",
                    )  # fmt: skip
                b_slots = gr.Number(
                    16, label="State slots (5-64)", step=1, elem_id=f"{NAME}-batch-slots"
                )
                b_run = gr.Button("Serve together", variant="primary", elem_id=f"{NAME}-batch-run")
            with gr.Column(scale=2):
                b_md = gr.Markdown(
                        label="Batch summary", elem_id=f"{NAME}-batch-summary",
                        elem_classes=["kda-metrics"],
                    )  # fmt: skip
                s_phases = common.figure_slot(f"{NAME}-batch-phases", "Batch swimlane")
                s_bpool = common.figure_slot(f"{NAME}-batch-pool", "Batch pool")

        settings = [policy, spacing, slots, int8, inconsistent, layer, head, delta, stage]
        replay_out = [*s_replay.outputs, step_md, step]
        inspect_out = [
            summary,
            *s_time.outputs,
            *s_tree.outputs,
            *replay_out,
            *s_drift.outputs,
            request,
            session,
        ]
        all_out = [*inspect_out[:-1], *s_pools.outputs, session]
        lr = lang.radio

        def loc(fn):  # noqa: ANN001, ANN202 - the callback with the language input
            return i18n.localized(fn, TR)

        v_settings = checks.settings_checks()
        load_v = guard.validator(checks.scenario_check, *v_settings)
        load.click(
            loc(load_scenario), [scenario, *settings, session, lr], all_out,
            api_name=f"{NAME}_load", validator=load_v,
        )  # fmt: skip
        batch_in = [b_text, b_arr, b_new, b_strategy, b_slots, b_budget, session, lr]
        batch_out = [b_md, *s_phases.outputs, *s_bpool.outputs, *s_pools.outputs, session]
        demo.load(
            loc(load_scenario), [scenario, *settings, session, lr], all_out,
            api_visibility="private",
        ).then(loc(serve_batch), batch_in, batch_out, api_visibility="private")  # fmt: skip
        b_run.click(
            loc(serve_batch), batch_in, batch_out, api_name=f"{NAME}_batch",
            validator=pb.batch_validator(),
        )  # fmt: skip
        send.click(
            loc(send_request), [text, *settings, session, lr], all_out, api_name=f"{NAME}_send",
            validator=guard.validator(checks.check_text, *v_settings, cross=checks.room_cross),
        )  # fmt: skip
        apply_v = guard.validator(*v_settings, cross=checks.nonempty_cross(len(settings)))
        apply.click(
            loc(apply_settings), [*settings, session, lr], all_out, api_name=f"{NAME}_apply",
            validator=apply_v,
        )  # fmt: skip
        gr.on(
            [policy.input, int8.input, inconsistent.input],
            loc(apply_settings),
            [*settings, session, lr],
            all_out,
            api_visibility="private",
            validator=apply_v,
        )
        reset.click(loc(reset_session), [lr], all_out, api_name=f"{NAME}_reset")
        view_in = [request, layer, head, delta, stage, inconsistent, session, lr]
        inspect_btn_triggers = [
            request.input,
            layer.release,
            head.release,
            delta.input,
            stage.input,
        ]
        gr.on(
            inspect_btn_triggers, loc(inspect), view_in, inspect_out, api_name=f"{NAME}_inspect",
            validator=guard.validator(None, *v_settings[5:7], None, v_settings[8],
                                      cross=checks.request_cross),
        )  # fmt: skip
        step.release(
            loc(go_to_step), [step, session, lr], [*replay_out, session],
            api_name=f"{NAME}_step", validator=guard.validator(cross=checks.step_cross),
        )  # fmt: skip
        prev.click(loc(prev_step), [session, lr], [*replay_out, session], api_name=f"{NAME}_prev")
        nxt.click(loc(next_step), [session, lr], [*replay_out, session], api_name=f"{NAME}_next")
        play_btn.click(
            loc(play), [session, lr], [*replay_out, session, timer], api_visibility="private"
        )
        pause.click(lambda: gr.Timer(active=False), None, timer, api_visibility="private")
        timer.tick(
            loc(play_tick),
            [session, lr],
            [*replay_out, session, timer],
            api_visibility="private",
            show_progress="hidden",
        )
        lr.change(
            loc(redraw), [inconsistent, session, lr], all_out, api_visibility="private",
            show_progress="hidden",
        ).then(
            loc(redraw_batch), [session, lr], batch_out, api_visibility="private",
            show_progress="hidden",
        )  # fmt: skip
        lang.labels({
            scenario: "示例场景", text: "你的请求（任意文本，支持中文；1-1024 个 UTF-8 字节）",
            policy: "检查点策略", spacing: "检查点间隔（1-1024 token）",
            slots: "检查点槽位（0 = 默认 256，最多 4096）", int8: "INT8 停放",
            inconsistent: "不一致恢复", request: "查看的请求", layer: "KDA 层", head: "头",
            delta: "显示 S − S_match", step: "重放步", stage: "树快照",
            load: "载入场景", send: "发送", reset: "重置会话", apply: "应用设置",
            prev: "◀ 上一步", play_btn: "▶ 播放", pause: "❚❚ 暂停", nxt: "下一步 ▶",
            cache_box: "缓存设置", batch_box: "批处理视图：同时服务多个请求",
            b_text: f"批处理请求（每行一个提示词，1-{pb.MAX_BATCH} 行）",
            b_arr: "到达步（每个请求一个，0-64；留空 = 全部在第 0 步）",
            b_new: f"最多新 token（1-{pb.MAX_NEW}）", b_budget: "每步 token 预算（8-256）",
            b_strategy: "策略", b_slots: "状态槽位（5-64）", b_run: "一起服务",
            **{sl.csv: common.CSV_ZH
               for sl in (s_time, s_replay, s_tree, s_drift, s_pools, s_phases, s_bpool)},
        }, tr=TR)  # fmt: skip
    return demo


if __name__ == "__main__":
    common.main(build)
