"""prefix_replay's input checks: Gradio ``validator=`` functions and the callbacks' own checks.

Same names and ranges as the callbacks (``session``), so a rejected input
leaves every output as it was. Session-aware checks read the tab's ``TabState`` by duck type
(``prompts``, ``result``, ``req``, ``n_steps``): this module imports no callback code.
"""

from __future__ import annotations

from apps import ui
from apps.ui.catalog import Msg, UserError
from apps.ui.checks import fail
from kda_core.model import encode
from kda_core.studies import prefix_replay as pr
from words.prefix_replay import MSG

POLICIES = pr.POLICIES
SCENARIOS = tuple(pr.SCENARIOS)
STAGES = ("while the request holds its restore lock", "after the request (inserted)")
EMPTY = MSG("e_empty")


def _is_state(session: object) -> bool:
    """A served-or-empty ``TabState`` (not the initial ``None`` of ``gr.State``)."""
    return hasattr(session, "prompts") and hasattr(session, "result")


def check_text(text: object) -> str:
    """A request text: non-empty, at most ``MAX_PROMPT_TOKENS`` UTF-8 bytes."""
    if not isinstance(text, str) or not text.strip():
        raise fail("e_text_empty", MSG)
    nbytes = len(encode(text))
    if nbytes > pr.MAX_PROMPT_TOKENS:
        raise fail("e_text_long", MSG, n=pr.MAX_PROMPT_TOKENS, got=nbytes)
    return text


def check_room(session: object) -> None:
    """At most ``MAX_PROMPTS`` requests per session (``session``: a ``TabState`` or None)."""
    if len(getattr(session, "prompts", ())) >= pr.MAX_PROMPTS:
        raise fail("e_room", MSG, n=pr.MAX_PROMPTS)


def request_api_info() -> dict:
    return {
        "type": "integer",
        "description": "0-based index of a request of this session (-1 = the last)",
    }


def scenario_check(v: object) -> None:
    ui.check_choice(MSG("v_scenario"), v, SCENARIOS)


def settings_checks() -> list:
    """Checks aligned with ``settings`` = policy, spacing, slots, int8, inconsistent, layer,
    head, delta, stage (the same ranges as ``_settings`` / ``_view``)."""
    return [
        lambda v: ui.check_choice(MSG("v_policy"), v, POLICIES),
        lambda v: ui.check_int(MSG("v_spacing"), v, 1, 1024),
        lambda v: ui.check_int(MSG("v_slots"), v, 0, 4096),
        None,
        None,
        lambda v: ui.check_int(MSG("v_layer"), v, 0, pr.kda_shape()[0] - 1),
        lambda v: ui.check_int(MSG("v_head"), v, 0, pr.kda_shape()[1] - 1),
        None,
        lambda v: ui.check_choice(MSG("v_stage"), v, STAGES),
    ]


def room_cross(*values: object) -> tuple[int, Msg] | None:
    try:
        check_room(values[-2])
    except UserError as e:
        return 0, e.msg
    return None


def nonempty_cross(n_settings: int):  # noqa: ANN202
    def cross(*values: object) -> tuple[int, Msg] | None:
        session = values[n_settings]
        if _is_state(session) and not session.prompts:
            return 0, EMPTY
        return None

    return cross


def check_request(request: object, n: int) -> int:
    """A request of a session of ``n``: its 0-based index (negative from the end), as the
    list's value or typed; the message names the list's #1 to #n and the API's range."""
    value = -1 if request is None else request
    try:
        return ui.check_int(MSG("v_request"), value, -n, n - 1)
    except UserError:
        raise fail("e_request", MSG, n=n, lo=-n, hi=n - 1, got=ui.clip_text(value)) from None


def check_step(step: object, n_steps: int, req: int) -> int:
    """A replay step of request ``req`` (0-based) with ``n_steps`` steps (at least one)."""
    try:
        return ui.check_int(MSG("v_step"), step, 0, n_steps - 1)
    except UserError:
        raise fail("e_step", MSG, hi=n_steps - 1, n=req + 1, got=ui.clip_text(step)) from None


def request_cross(request: object, *values: object) -> tuple[int, Msg] | None:
    session = values[-2]
    if not _is_state(session) or session.result is None:
        return 0, EMPTY
    try:
        check_request(request, len(session.prompts))
    except UserError as e:
        return 0, e.msg
    return None


def step_cross(step: object, session: object, *_: object) -> tuple[int, Msg] | None:
    if not _is_state(session) or session.result is None:
        return 0, EMPTY
    n = session.n_steps
    if n == 0:
        return 0, MSG("e_no_steps", n=session.req + 1)
    try:
        check_step(step, n, session.req)
    except UserError as e:
        return 0, e.msg
    return None
