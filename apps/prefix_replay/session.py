"""prefix_replay's per-tab state and its callbacks (the page, ``apps.prefix_replay``, wires them).

``TabState`` (in ``gr.State``) holds this tab's request texts, settings, the study's
``ServingSession`` (the engine that served them), its result, the view (request, layer, head,
replay step, tree snapshot) and the last batch run; two tabs never see each other's requests.
**Send** forks that engine (a deep copy, ~10 ms) and serves only the new request; **Load** and
**Apply settings** re-serve the texts on a fresh engine (deterministic, cached). Callbacks
never mutate a state they were given: they return a new one. Stepping through the replay (go to
a step, previous / next, play) is ``replay``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import gradio as gr

from apps import ui
from apps.prefix_replay.batch_view import fig_pools
from apps.prefix_replay.checks import STAGES, check_request, check_room, check_text
from apps.prefix_replay.figures import (
    can_drift,
    drifting,
    fig_drift,
    fig_no_drift,
    fig_timeline,
    fig_tree,
)
from apps.prefix_replay.replay_view import fig_replay, step_markdown
from apps.prefix_replay.tables import short, summary_markdown
from apps.ui.checks import fail
from kda_core.studies import batch_view as bv
from kda_core.studies import prefix_replay as pr
from words.catalog import T as Lang
from words.prefix_replay import MSG

POLICIES = pr.POLICIES
SCENARIOS = tuple(pr.SCENARIOS)


@dataclass(slots=True)
class TabState:
    """One browser tab: its request texts, settings, the served result, the view, the batch."""

    prompts: tuple[str, ...]
    scenario: str  # a built-in name, or "custom" once the reader sent own texts
    policy: str = "interval"
    spacing: int = 32
    slots: int | None = None
    int8: bool = False
    result: pr.ScenarioResult | None = None
    study: pr.ServingSession | None = None  # the engine that served `prompts` (fork before sending)
    req: int = 0
    step: int = 0
    layer: int = 0
    head: int = 0
    delta: bool = True
    stage: int = 0
    batch: bv.BatchView | None = None  # the last batch run (the pools panel shows it)

    @property
    def request(self) -> pr.RequestView:
        assert self.result is not None
        return self.result.requests[self.req]

    @property
    def n_steps(self) -> int:
        return int(self.request.replay_steps.positions.size)


def _t(language: object) -> Lang:
    return MSG.lang(language)


def _serve(s: TabState, progress: gr.Progress | None = None, lang: str = "en") -> TabState:
    if progress is not None:
        progress(0.0, desc=MSG("progress_serve", n=len(s.prompts)).render(lang))
    study = pr.serve(
        s.scenario if s.scenario in SCENARIOS else "custom",
        prompts=None if s.scenario in SCENARIOS else s.prompts,
        policy=s.policy,
        spacing=s.spacing,
        int8=s.int8,
        checkpoint_slots=s.slots,
        fork=False,  # shared, not copied per tab: ``_send_one`` forks it before sending
    )
    res = study.result()
    return replace(s, result=res, study=study, req=len(res.requests) - 1, step=0)


def _send_one(
    base: TabState, text: str, s: TabState, progress: gr.Progress | None, lang: str = "en"
) -> TabState:
    """``s`` (= base + text) served incrementally: fork base's engine, serve only ``text``."""
    assert base.study is not None
    if progress is not None:
        progress(0.0, desc=MSG("progress_send", n=len(s.prompts)).render(lang))
    study = base.study.fork("custom")
    study.send(text)
    res = study.result()
    return replace(s, result=res, study=study, req=len(res.requests) - 1, step=0)


def _settings(policy: object, spacing: object, slots: object, int8: object) -> dict:
    return {
        "policy": ui.check_choice(MSG("v_policy"), policy, POLICIES),
        "spacing": ui.check_int(MSG("v_spacing"), spacing, 1, 1024),
        "slots": ui.check_int(MSG("v_slots"), slots, 0, 4096) or None,
        "int8": bool(int8),
    }


def _view(layer: object, head: object, delta: object, stage: object) -> dict:
    return {
        "layer": ui.check_int(MSG("v_layer"), layer, 0, pr.kda_shape()[0] - 1),
        "head": ui.check_int(MSG("v_head"), head, 0, pr.kda_shape()[1] - 1),
        "delta": bool(delta),
        "stage": STAGES.index(ui.check_choice(MSG("v_stage"), stage, STAGES)),
    }


def request_choices(s: TabState, t: Lang) -> list[tuple[str, int]]:
    """One option per request: '#n' and the tail of its prompt (the reader's text as typed)."""
    return [(t("req_choice", n=i + 1, text=short(p, 22)), i) for i, p in enumerate(s.prompts)]


def _step_slider(s: TabState) -> dict:
    """The replay step field: its value. No ``maximum`` on the component: Gradio would refuse
    a step past it with its own toast before the validator could mark the field."""
    n = s.n_steps
    return gr.update(value=s.step, interactive=n > 1)


def replay_outputs(s: TabState, t: Lang) -> tuple:
    """(figure, CSV button, step text, step field); the CSV button hides without a replay."""
    fig, csv = fig_replay(s.request.replay_steps, s.step, s.layer, s.head, s.delta, s.req, t)
    has = s.n_steps > 0
    btn = gr.update(value=csv if has else None, visible=has)
    return fig, btn, step_markdown(s.request.replay_steps, s.step, t), _step_slider(s)


def _drift_outputs(s: TabState, inconsistent: bool, t: Lang) -> tuple:
    """The drift panel (plot, CSV button): hidden until 'Inconsistent restore' is ticked; a note
    instead of curves when the inspected request replayed nothing (item: never suggest that a
    wrong restore is harmless)."""
    if not inconsistent or s.result is None:
        return gr.update(value=None, visible=False), gr.update(value=None, visible=False)
    tl = s.request.timeline
    if not can_drift(tl):
        fig = fig_no_drift(s.req, tl, drifting(s.result), t)
        return gr.update(value=fig, visible=True), gr.update(value=None, visible=False)
    d = _drift(s)
    if not 0 < d.restore_at < d.token_match:  # the drift study's own serving differed
        fig = fig_no_drift(s.req, tl, drifting(s.result), t)
        return gr.update(value=fig, visible=True), gr.update(value=None, visible=False)
    fig, csv = fig_drift(d, t)
    return gr.update(value=fig, visible=True), gr.update(value=csv, visible=True)


def _drift(s: TabState) -> pr.DriftStudy:
    return pr.restore_drift(
        s.scenario if s.scenario in SCENARIOS else "custom",
        s.req,
        prompts=None if s.scenario in SCENARIOS else s.prompts,
        policy=s.policy,
        spacing=s.spacing,
        checkpoint_slots=s.slots,
        int8=s.int8,
    )


def _inspect_outputs(s: TabState, inconsistent: bool, t: Lang) -> tuple:
    assert s.result is not None
    r = s.request
    snap = (r.tree_during, r.tree_after)[s.stage]
    title = t(f"t_tree_{s.stage}", n=s.req + 1)
    return (
        summary_markdown(s.result, s.req, s.slots, s.policy, t),
        *fig_timeline(s.result, s.req, t),
        *fig_tree(snap, title, t),
        *replay_outputs(s, t),
        *_drift_outputs(s, inconsistent, t),
        gr.update(choices=request_choices(s, t), value=s.req),
        s,
    )


def _all_outputs(s: TabState, inconsistent: bool, t: Lang) -> tuple:
    out = _inspect_outputs(s, inconsistent, t)
    assert s.result is not None
    return (*out[:-1], *fig_pools(s.result, s.slots is not None, s.batch, t), out[-1])


@ui.study_errors
def load_scenario(
    scenario: str = "system_tools_branches",
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: TabState | None = None,
    language: str = "English",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """A fresh session with the built-in scenario's prompts, served under the settings."""
    t = _t(language)
    name = ui.check_choice(MSG("v_scenario"), scenario, SCENARIOS)
    s = TabState(
        pr.SCENARIOS[name].prompts,
        name,
        **_settings(policy, spacing, slots, int8),
        **_view(layer, head, delta, stage),
        batch=session.batch if session is not None else None,
    )
    return _all_outputs(_serve(s, progress, t.code), bool(inconsistent), t)


@ui.study_errors
def send_request(
    text: str,
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: TabState | None = None,
    language: str = "English",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Append one request (free text) to this session and serve it on the session's engine
    (incremental: one request's cost); with changed settings, re-serve every text."""
    t = _t(language)
    check_text(text)
    prompts = session.prompts if session is not None else ()
    check_room(session)
    settings = _settings(policy, spacing, slots, int8)
    s = TabState(
        prompts + (text,),
        "custom",
        **settings,
        **_view(layer, head, delta, stage),
        batch=session.batch if session is not None else None,
    )
    if (
        session is not None
        and session.study is not None
        and session.study.prompts == prompts
        and all(getattr(session, k) == v for k, v in settings.items())
    ):  # same engine settings: serve the new request only
        s = _send_one(session, text, s, progress, t.code)
    else:  # first request, or new settings: a fresh engine serves every text
        s = _serve(s, progress, t.code)
    return _all_outputs(s, bool(inconsistent), t)


@ui.study_errors
def apply_settings(
    policy: str = "interval",
    spacing: float = 32,
    slots: float = 0,
    int8: bool = False,
    inconsistent: bool = False,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    session: TabState | None = None,
    language: str = "English",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Re-serve this session's requests under new settings (keeps the selected request)."""
    t = _t(language)
    base = session or TabState(pr.SCENARIOS[SCENARIOS[0]].prompts, SCENARIOS[0])
    if not base.prompts:
        raise fail("e_empty", MSG)
    s = replace(base, **_settings(policy, spacing, slots, int8), **_view(layer, head, delta, stage))
    keep = base.req
    s = _serve(s, progress, t.code)
    s.req = min(keep, len(s.prompts) - 1) if session is not None else s.req
    return _all_outputs(s, bool(inconsistent), t)


def reset_session(language: str = "English") -> tuple:
    """An empty session: placeholders until a request is sent."""
    t = _t(language)
    msg = t("empty_fig")
    figs = [ui.empty_figure(t(k), msg) for k in ("n_timeline", "n_tree", "n_replay", "n_drift")]
    return (
        t("empty_md"),
        figs[0],
        None,
        figs[1],
        None,
        figs[2],
        gr.update(value=None, visible=False),
        "",
        gr.update(value=0, interactive=False),
        gr.update(value=None, visible=False),
        gr.update(value=None, visible=False),
        gr.update(choices=[], value=None),
        ui.empty_figure(t("n_pools"), msg),
        None,
        TabState((), "custom"),
    )


def need(session: TabState | None) -> TabState:
    if session is None or session.result is None:
        raise fail("e_empty", MSG)
    return session


@ui.study_errors
def inspect(
    request: float = -1,
    layer: float = 0,
    head: float = 0,
    delta: bool = True,
    stage: str = STAGES[0],
    inconsistent: bool = False,
    session: TabState | None = None,
    language: str = "English",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Choose the request (1-based index shown as #n; value = 0-based), layer, head, view.
    With ``inconsistent`` the drift study of that request runs (~1 s the first time)."""
    t = _t(language)
    s = need(session)
    if inconsistent and progress is not None:
        progress(0.0, desc=t("progress_drift"))
    n = len(s.prompts)
    i = check_request(request, n) % n
    s = replace(s, req=i, step=0 if i != s.req else s.step, **_view(layer, head, delta, stage))
    return _inspect_outputs(s, bool(inconsistent), t)


@ui.study_errors  # the drift panel runs pr.restore_drift when "inconsistent" is ticked
def redraw(
    inconsistent: bool = False, session: TabState | None = None, language: str = "English"
) -> tuple:
    """Every output of the current session again, in ``language`` (the switch)."""
    if session is None or session.result is None:
        return (gr.skip(),) * 15
    return _all_outputs(session, bool(inconsistent), _t(language))
