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

from types import SimpleNamespace

import gradio as gr

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
from apps.ui import CSV_ZH, figure_slot, guard, header, i18n, main, player
from kda_core.studies import prefix_replay as pr

NAME = "prefix_replay"
POLICIES = pr.POLICIES
PLAY_INTERVAL_S = 0.4


def build() -> gr.Blocks:
    ui = SimpleNamespace()  # every component, by name: the layout helpers fill it, wiring reads it
    with gr.Blocks(title="Prefix replay · KDA State Lab") as demo:
        ui.lang = header(NAME, "Prefix replay · 前缀命中与重放", EN, ZH)
        ui.session = gr.State(None)
        ui.timer = gr.Timer(PLAY_INTERVAL_S, active=False)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                _controls(ui)
            with gr.Column(scale=2):
                _views(ui)
        pb.batch_panel(ui, NAME)
        _outputs(ui)
        _wire_session(demo, ui)
        _wire_view(ui)
        _wire_batch(demo, ui)
        _labels(ui)
    return demo


def _controls(ui: SimpleNamespace) -> None:
    """The left column: scenario, the reader's request, cache settings, the request summary."""

    ui.scenario = gr.Dropdown(
        [(pr.SCENARIOS[n].title, n) for n in SCENARIOS], value=SCENARIOS[0],
        label="Example scenario", elem_id=f"{NAME}-scenario",
    )  # fmt: skip
    ui.load = gr.Button("Load scenario", elem_id=f"{NAME}-load")
    ui.text = gr.Textbox(
        label="Your request (free text, 中文 works; 1-1024 UTF-8 bytes)",
        lines=3, elem_id=f"{NAME}-text",
        value=pr.SCENARIOS[SCENARIOS[0]].prompts[0].rsplit("User:", 1)[0]
        + "User: 明天上海的天气怎么样？\nAssistant:",
    )  # fmt: skip
    with gr.Row():
        ui.send = gr.Button("Send", variant="primary", elem_id=f"{NAME}-send")
        ui.reset = gr.Button("Reset session", elem_id=f"{NAME}-reset")
    with gr.Accordion("Cache settings", open=True) as ui.cache_box:
        ui.policy = gr.Radio(
            list(POLICIES),
            value="interval",
            label="Checkpoint policy",
            elem_id=f"{NAME}-policy",
        )
        with gr.Row():
            ui.spacing = gr.Number(
                32,
                label="Checkpoint spacing (1-1024 tokens)",
                elem_id=f"{NAME}-spacing",
            )
            ui.slots = gr.Number(
                0,
                label="Checkpoint slots (0 = default 256, max 4096)",
                elem_id=f"{NAME}-slots",
            )
        with gr.Row():
            ui.int8 = gr.Checkbox(False, label="INT8 parking", elem_id=f"{NAME}-int8")
            ui.inconsistent = gr.Checkbox(
                False, label="Inconsistent restore", elem_id=f"{NAME}-inconsistent"
            )
        ui.apply = gr.Button("Apply settings", elem_id=f"{NAME}-apply")
    ui.summary = gr.Markdown(
        label="Request summary",
        elem_id=f"{NAME}-summary",
        elem_classes=["kda-metrics"],
    )


def _views(ui: SimpleNamespace) -> None:
    """The right column: request picker, timeline, replay stepping, tree, drift, pools."""
    n_layers, n_heads = pr.kda_shape()  # the served model's KDA layers and heads

    first = TabState(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
    ui.request = gr.Dropdown(
        _request_choices(first), value=len(first.prompts) - 1,
        label="Request to inspect", elem_id=f"{NAME}-request",
    )  # fmt: skip
    ui.request.api_info = checks.request_api_info  # an index, not the build-time choices
    ui.s_time = figure_slot(f"{NAME}-timeline", "Token timeline")
    with gr.Row():
        ui.layer = gr.Slider(
            0, n_layers - 1, value=0, step=1, label="KDA layer", elem_id=f"{NAME}-layer"
        )
        ui.head = gr.Slider(0, n_heads - 1, value=0, step=1, label="Head", elem_id=f"{NAME}-head")
        ui.delta = gr.Checkbox(True, label="show S − S_match (difference)")
    with gr.Row():
        ui.prev = gr.Button("◀ Prev", elem_id=f"{NAME}-prev", size="sm")
        ui.play_btn = gr.Button("▶ Play", elem_id=f"{NAME}-play", size="sm", variant="primary")
        ui.pause = gr.Button("❚❚ Pause", elem_id=f"{NAME}-pause", size="sm")
        ui.nxt = gr.Button("Next ▶", elem_id=f"{NAME}-next", size="sm")
    ui.step = gr.Number(
        0, label="Replay step (0 = restore point; Enter to go)", minimum=0,
        maximum=1, elem_id=f"{NAME}-step",
    )  # fmt: skip
    ui.step_md = gr.Markdown(label="Replay step details", elem_id=f"{NAME}-step-info")
    ui.s_replay = figure_slot(f"{NAME}-replay", "Replay state heatmap")
    ui.stage = gr.Radio(
        list(STAGES), value=STAGES[0], label="Tree snapshot", elem_id=f"{NAME}-stage"
    )
    ui.s_tree = figure_slot(f"{NAME}-tree", "Radix tree")
    ui.s_drift = figure_slot(f"{NAME}-drift", "Logit drift")
    ui.s_drift.plot.visible = ui.s_drift.csv.visible = False  # until the toggle is on
    ui.s_pools = figure_slot(f"{NAME}-pools", "Pools")


def _outputs(ui: SimpleNamespace) -> None:
    """The input / output lists the events share (positions: see the tests)."""

    ui.settings = [
        ui.policy,
        ui.spacing,
        ui.slots,
        ui.int8,
        ui.inconsistent,
        ui.layer,
        ui.head,
        ui.delta,
        ui.stage,
    ]
    ui.replay_out = [*ui.s_replay.outputs, ui.step_md, ui.step]
    ui.inspect_out = [
        ui.summary,
        *ui.s_time.outputs,
        *ui.s_tree.outputs,
        *ui.replay_out,
        *ui.s_drift.outputs,
        ui.request,
        ui.session,
    ]
    ui.all_out = [*ui.inspect_out[:-1], *ui.s_pools.outputs, ui.session]
    ui.lr = ui.lang.radio
    ui.batch_in = [
        ui.b_text,
        ui.b_arr,
        ui.b_new,
        ui.b_strategy,
        ui.b_slots,
        ui.b_budget,
        ui.b_kv,
        ui.session,
        ui.lr,
    ]
    ui.batch_out = [
        ui.b_md,
        *ui.s_phases.outputs,
        *ui.s_bpool.outputs,
        *ui.s_pools.outputs,
        ui.session,
    ]


def _loc(fn):  # noqa: ANN001, ANN202 - the callback with the language input
    return i18n.localized(fn, TR)


def _wire_session(demo: gr.Blocks, ui: SimpleNamespace) -> None:
    """Load / send / apply / reset / inspect / step / play: one tab's requests."""

    v_settings = checks.settings_checks()
    load_v = guard.validator(checks.scenario_check, *v_settings)
    ui.load.click(
        _loc(load_scenario),
        [ui.scenario, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_load",
        validator=load_v,
    )
    demo.load(
        _loc(load_scenario),
        [ui.scenario, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
    ).then(_loc(serve_batch), ui.batch_in, ui.batch_out, api_visibility="private")
    ui.send.click(
        _loc(send_request),
        [ui.text, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_send",
        validator=guard.validator(checks.check_text, *v_settings, cross=checks.room_cross),
    )
    apply_v = guard.validator(*v_settings, cross=checks.nonempty_cross(len(ui.settings)))
    ui.apply.click(
        _loc(apply_settings),
        [*ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_apply",
        validator=apply_v,
    )
    gr.on(
        [ui.policy.input, ui.int8.input, ui.inconsistent.input],
        _loc(apply_settings),
        [*ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
        validator=apply_v,
    )
    ui.reset.click(_loc(reset_session), [ui.lr], ui.all_out, api_name=f"{NAME}_reset")


def _wire_view(ui: SimpleNamespace) -> None:
    """Inspect (request / layer / head / view), replay stepping and the play timer."""
    v_settings = checks.settings_checks()
    view_in = [
        ui.request,
        ui.layer,
        ui.head,
        ui.delta,
        ui.stage,
        ui.inconsistent,
        ui.session,
        ui.lr,
    ]
    inspect_btn_triggers = [
        ui.request.input,
        ui.layer.release,
        ui.head.release,
        ui.delta.input,
        ui.stage.input,
    ]
    gr.on(
        inspect_btn_triggers,
        _loc(inspect),
        view_in,
        ui.inspect_out,
        api_name=f"{NAME}_inspect",
        validator=guard.validator(
            None, *v_settings[5:7], None, v_settings[8], cross=checks.request_cross
        ),
    )
    gr.on(
        [ui.step.submit, ui.step.blur],  # Enter goes there; so does leaving the field
        _loc(go_to_step),
        [ui.step, ui.session, ui.lr],
        [*ui.replay_out, ui.session],
        api_name=f"{NAME}_step",
        validator=guard.validator(cross=checks.step_cross),
    )
    ui.prev.click(
        _loc(prev_step), [ui.session, ui.lr], [*ui.replay_out, ui.session], api_name=f"{NAME}_prev"
    )
    ui.nxt.click(
        _loc(next_step), [ui.session, ui.lr], [*ui.replay_out, ui.session], api_name=f"{NAME}_next"
    )
    player.wire(
        ui.timer, ui.play_btn, ui.pause, _loc(play_tick), [ui.session, ui.lr],
        [*ui.replay_out, ui.session, ui.timer], on_play=_loc(play),
        play_inputs=[ui.session, ui.lr], play_outputs=[*ui.replay_out, ui.session, ui.timer],
    )  # fmt: skip


def _wire_batch(demo: gr.Blocks, ui: SimpleNamespace) -> None:
    """The batch run (also once after the first render) and the language switch."""

    ui.b_run.click(
        _loc(serve_batch),
        ui.batch_in,
        ui.batch_out,
        api_name=f"{NAME}_batch",
        validator=pb.batch_validator(),
    )
    ui.lr.change(
        _loc(redraw),
        [ui.inconsistent, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
        show_progress="hidden",
    ).then(
        _loc(redraw_batch),
        [ui.session, ui.lr],
        ui.batch_out,
        api_visibility="private",
        show_progress="hidden",
    )


def _labels(ui: SimpleNamespace) -> None:
    """The 中文 labels of the inputs (the header's switch applies them)."""
    slots = (ui.s_time, ui.s_replay, ui.s_tree, ui.s_drift, ui.s_pools, ui.s_phases, ui.s_bpool)
    ui.lang.labels({
        ui.scenario: "示例场景", ui.text: "你的请求（任意文本，支持中文；1-1024 个 UTF-8 字节）",
        ui.policy: "检查点策略", ui.spacing: "检查点间隔（1-1024 token）",
        ui.slots: "检查点槽位（0 = 默认 256，最多 4096）", ui.int8: "INT8 停放",
        ui.inconsistent: "不一致恢复", ui.request: "查看的请求", ui.layer: "KDA 层",
        ui.head: "头", ui.delta: "显示 S − S_match", ui.stage: "树快照",
        ui.step: "重放步（0 = 恢复点；回车跳转）",
        ui.load: "载入场景", ui.send: "发送", ui.reset: "重置会话", ui.apply: "应用设置",
        ui.prev: "◀ 上一步", ui.play_btn: "▶ 播放", ui.pause: "❚❚ 暂停", ui.nxt: "下一步 ▶",
        ui.cache_box: "缓存设置", ui.batch_box: "批处理视图：同时服务多个请求",
        ui.b_text: f"批处理请求（每行一个提示词，1-{pb.MAX_BATCH} 行）",
        ui.b_arr: "到达步（每个请求一个，0-64；留空 = 全部在第 0 步）",
        ui.b_new: f"最多新 token（1-{pb.MAX_NEW}）", ui.b_budget: "每步 token 预算（8-256）",
        ui.b_strategy: "策略", ui.b_slots: "状态槽位（5-64）", ui.b_run: "一起服务",
        ui.b_kv: f"KV 池（token；0 = 不限，最多 {pb.KV_RANGE[1]}）",
        **{sl.csv: CSV_ZH for sl in slots},
    }, tr=TR)  # fmt: skip


if __name__ == "__main__":
    main(build)
