"""prefix_replay: a token prefix hit is not a state hit; watch the replay close the gap.

Draws ``kda_core.studies.prefix_replay``: requests (a built-in scenario or the reader's own
texts, Chinese included) served one by one through the real caching engine on TinyHybrid. Per
request: the token timeline, the radix tree, the replay stepped token by token with the KDA
state heatmap (its distance to the uncached state is exactly 0 at the token match) and, on
request, the logit drift of an inconsistent restore. The batch view
(``kda_core.studies.batch_view``) serves several requests at once on one state pool: each
request's phase per scheduler step, the pool by kind over time and the cap when it bites; the
pools panel shows that real concurrency. Its two engine options: one byte buffer for the
states and the KV (the border per step) and decode on captured batch sizes (the index table,
the padding and the sink per step). Concept: docs/prefix_replay.md.

The page (layout, event wiring). Callbacks: ``session`` (one tab's requests) and ``replay`` (the
replay stepping); checks: ``checks``; figures: ``figures``, ``replay_view``; tables: ``tables``;
panels: ``batch`` (+ ``batch_view``, ``batch_options_view``, ``batch_tables``) and ``blocks``
(+ ``blocks_view``); every word is in ``words.prefix_replay`` (and its panels' catalogs).
Public actions (api_name): ``prefix_replay_load``, ``_send``, ``_apply``, ``_reset``,
``_inspect``, ``_step``, ``_prev``, ``_next``, ``_batch``, ``_vllm_blocks``.
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from apps.prefix_replay import batch as pb
from apps.prefix_replay import checks
from apps.prefix_replay.batch import redraw_batch, serve_batch
from apps.prefix_replay.blocks import blocks_panel
from apps.prefix_replay.checks import STAGES
from apps.prefix_replay.replay import go_to_step, next_step, play, play_tick, prev_step
from apps.prefix_replay.session import (
    SCENARIOS,
    TabState,
    apply_settings,
    inspect,
    load_scenario,
    redraw,
    request_choices,
    reset_session,
    send_request,
)
from apps.ui import guard, player
from apps.ui.page import Page
from kda_core.studies import prefix_replay as pr
from words.prefix_replay import MSG

NAME = "prefix_replay"
POLICIES = pr.POLICIES
PLAY_INTERVAL_S = 0.4
EXAMPLE_TURN = "User: 明天上海的天气怎么样？\nAssistant:"  # the reader's request field, filled in


def build() -> gr.Blocks:
    ui = SimpleNamespace()  # every component, by name: the layout helpers fill it, wiring reads it
    with gr.Blocks(title="Prefix replay · KDA State Lab") as demo:
        ui.page = Page(NAME, MSG)
        ui.lr = ui.page.radio
        ui.session = gr.State(None)
        ui.timer = gr.Timer(PLAY_INTERVAL_S, active=False)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                _controls(ui)
            with gr.Column(scale=2):
                _views(ui)
        pb.batch_panel(ui, NAME, ui.page)
        blocks_panel(ui.page, demo)
        _outputs(ui)
        _wire_session(demo, ui)
        _wire_view(ui)
        _wire_batch(demo, ui)
        ui.page.finish()
    return demo


def _controls(ui: SimpleNamespace) -> None:
    """The left column: scenario, the reader's request, cache settings, the request summary."""
    L, page = ui.page.label, ui.page
    pick = gr.Dropdown(list(SCENARIOS), value=SCENARIOS[0], elem_id=f"{NAME}-scenario")
    ui.scenario = page.choices(L(pick, "f_scenario"), [(f"scen_{n}", n) for n in SCENARIOS])
    ui.load = L(gr.Button(elem_id=f"{NAME}-load"), "b_load")
    default = pr.SCENARIOS[SCENARIOS[0]].prompts[0].rsplit("User:", 1)[0]
    text = gr.Textbox(default + EXAMPLE_TURN, lines=3, elem_id=f"{NAME}-text")
    ui.text = L(text, "f_text")
    with gr.Row():
        ui.send = L(gr.Button(variant="primary", elem_id=f"{NAME}-send"), "b_send")
        ui.reset = L(gr.Button(elem_id=f"{NAME}-reset"), "b_reset")
    with gr.Accordion(open=True) as ui.cache_box:
        ui.policy = page.choices(
            L(gr.Radio(list(POLICIES), value="interval", elem_id=f"{NAME}-policy"), "f_policy"),
            [(f"pol_{p}", p) for p in POLICIES],
        )
        with gr.Row():
            ui.spacing = L(gr.Number(32, elem_id=f"{NAME}-spacing"), "f_spacing")
            ui.slots = L(gr.Number(0, elem_id=f"{NAME}-slots"), "f_slots")
        with gr.Row():
            ui.int8 = L(gr.Checkbox(False, elem_id=f"{NAME}-int8"), "f_int8")
            box = gr.Checkbox(False, elem_id=f"{NAME}-inconsistent")
            ui.inconsistent = L(box, "f_inconsistent")
        ui.apply = L(gr.Button(elem_id=f"{NAME}-apply"), "b_apply")
    L(ui.cache_box, "acc_cache")
    ui.summary = gr.Markdown(
        label="Request summary",
        elem_id=f"{NAME}-summary",
        elem_classes=["kda-metrics"],
    )


def _views(ui: SimpleNamespace) -> None:
    """The right column: request picker, timeline, replay stepping, tree, drift, pools."""
    n_layers, n_heads = pr.kda_shape()  # the served model's KDA layers and heads
    L, page = ui.page.label, ui.page
    first = TabState(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
    # a typed value reaches the validator (``checks.request_cross``), which marks the field;
    # without custom values Gradio refuses one outside the choices with its own toast first
    pick = gr.Dropdown(
        request_choices(first, page.en),
        value=len(first.prompts) - 1,
        allow_custom_value=True,
        elem_id=f"{NAME}-request",
    )
    ui.request = L(pick, "f_request")
    ui.request.api_info = checks.request_api_info  # an index, not the build-time choices
    ui.s_time = page.figure_slot(f"{NAME}-timeline", "n_timeline")
    with gr.Row():
        layer = gr.Slider(0, n_layers - 1, value=0, step=1, elem_id=f"{NAME}-layer")
        ui.layer = L(layer, "f_layer")
        ui.head = L(gr.Slider(0, n_heads - 1, value=0, step=1, elem_id=f"{NAME}-head"), "f_head")
        ui.delta = L(gr.Checkbox(True), "f_delta")
    with gr.Row():
        ui.prev = L(gr.Button(elem_id=f"{NAME}-prev", size="sm"), "b_prev")
        ui.play_btn = L(gr.Button(elem_id=f"{NAME}-play", size="sm", variant="primary"), "b_play")
        ui.pause = L(gr.Button(elem_id=f"{NAME}-pause", size="sm"), "b_pause")
        ui.nxt = L(gr.Button(elem_id=f"{NAME}-next", size="sm"), "b_next")
    # no minimum / maximum: Gradio would refuse a value past them with its own toast before
    # the validator (``checks.step_cross``) could mark the field with the request's range
    ui.step = L(gr.Number(0, step=1, elem_id=f"{NAME}-step"), "f_step")
    ui.step_md = gr.Markdown(label="Replay step details", elem_id=f"{NAME}-step-info")
    ui.s_replay = page.figure_slot(f"{NAME}-replay", "n_replay")
    ui.stage = page.choices(
        L(gr.Radio(list(STAGES), value=STAGES[0], elem_id=f"{NAME}-stage"), "f_stage"),
        [(f"stage_{i}", s) for i, s in enumerate(STAGES)],
    )
    ui.s_tree = page.figure_slot(f"{NAME}-tree", "n_tree")
    ui.s_drift = page.figure_slot(f"{NAME}-drift", "n_drift")
    ui.s_drift.plot.visible = ui.s_drift.csv.visible = False  # until the toggle is on
    ui.s_pools = page.figure_slot(f"{NAME}-pools", "n_pools")


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
    ui.batch_in = [
        ui.b_text,
        ui.b_arr,
        ui.b_new,
        ui.b_strategy,
        ui.b_slots,
        ui.b_budget,
        ui.b_kv,
        ui.b_buffer,
        ui.b_graph,
        ui.session,
        ui.lr,
    ]
    ui.batch_out = [
        ui.b_md,
        *ui.s_phases.outputs,
        *ui.s_bpool.outputs,
        *ui.s_pools.outputs,
        *ui.s_border.outputs,
        *ui.s_graphs.outputs,
        ui.session,
    ]


def _wire_session(demo: gr.Blocks, ui: SimpleNamespace) -> None:
    """Load / send / apply / reset / inspect / step / play: one tab's requests."""

    v_settings = checks.settings_checks()
    load_v = guard.validator(checks.scenario_check, *v_settings)
    ui.load.click(
        load_scenario,
        [ui.scenario, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_load",
        validator=load_v,
    )
    demo.load(
        load_scenario,
        [ui.scenario, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
    ).then(serve_batch, ui.batch_in, ui.batch_out, api_visibility="private")
    ui.send.click(
        send_request,
        [ui.text, *ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_send",
        validator=guard.validator(checks.check_text, *v_settings, cross=checks.room_cross),
    )
    apply_v = guard.validator(*v_settings, cross=checks.nonempty_cross(len(ui.settings)))
    ui.apply.click(
        apply_settings,
        [*ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_name=f"{NAME}_apply",
        validator=apply_v,
    )
    gr.on(
        [ui.policy.input, ui.int8.input, ui.inconsistent.input],
        apply_settings,
        [*ui.settings, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
        validator=apply_v,
    )
    ui.reset.click(reset_session, [ui.lr], ui.all_out, api_name=f"{NAME}_reset")


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
        inspect,
        view_in,
        ui.inspect_out,
        api_name=f"{NAME}_inspect",
        validator=guard.validator(
            None, *v_settings[5:7], None, v_settings[8], cross=checks.request_cross
        ),
    )
    gr.on(
        [ui.step.submit, ui.step.blur],  # Enter goes there; so does leaving the field
        go_to_step,
        [ui.step, ui.session, ui.lr],
        [*ui.replay_out, ui.session],
        api_name=f"{NAME}_step",
        validator=guard.validator(cross=checks.step_cross),
    )
    ui.prev.click(
        prev_step, [ui.session, ui.lr], [*ui.replay_out, ui.session], api_name=f"{NAME}_prev"
    )
    ui.nxt.click(
        next_step, [ui.session, ui.lr], [*ui.replay_out, ui.session], api_name=f"{NAME}_next"
    )
    ins, outs = [ui.session, ui.lr], [*ui.replay_out, ui.session, ui.timer]
    player.wire(
        ui.timer,
        ui.play_btn,
        ui.pause,
        play_tick,
        ins,
        outs,
        on_play=play,
        play_inputs=ins,
        play_outputs=outs,
    )


def _wire_batch(demo: gr.Blocks, ui: SimpleNamespace) -> None:
    """The batch run (also once after the first render) and the language switch."""

    ui.b_run.click(
        serve_batch,
        ui.batch_in,
        ui.batch_out,
        api_name=f"{NAME}_batch",
        validator=pb.batch_validator(),
    )
    ui.lr.change(
        redraw,
        [ui.inconsistent, ui.session, ui.lr],
        ui.all_out,
        api_visibility="private",
        show_progress="hidden",
    ).then(
        redraw_batch,
        [ui.session, ui.lr],
        ui.batch_out,
        api_visibility="private",
        show_progress="hidden",
    )


__all__ = [
    "MSG",
    "STAGES",
    "TabState",
    "apply_settings",
    "build",
    "go_to_step",
    "inspect",
    "load_scenario",
    "next_step",
    "pb",
    "play",
    "play_tick",
    "pr",
    "prev_step",
    "redraw",
    "reset_session",
    "send_request",
    "serve_batch",
]  # what the tests read as app.<name>
