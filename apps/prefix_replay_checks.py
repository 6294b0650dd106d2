"""prefix_replay's input checks: Gradio ``validator=`` functions and the callbacks' own checks.

Same names and ranges as the callbacks (``apps.prefix_replay_session``), so a rejected input
leaves every output as it was. Session-aware checks read the tab's ``TabState`` by duck type
(``prompts``, ``result``, ``req``, ``n_steps``): this module imports no callback code.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.ui import guard
from kda_core.model import encode
from kda_core.studies import prefix_replay as pr

POLICIES = pr.POLICIES
SCENARIOS = pr.SCENARIO_NAMES
STAGES = ("while the request holds its restore lock", "after the request (inserted)")
EMPTY = "the session is empty: send a request or load a scenario first"


def _is_state(session: object) -> bool:
    """A served-or-empty ``TabState`` (not the initial ``None`` of ``gr.State``)."""
    return hasattr(session, "prompts") and hasattr(session, "result")


def check_text(text: object) -> str:
    """A request text: non-empty, at most ``MAX_PROMPT_TOKENS`` UTF-8 bytes."""
    if not isinstance(text, str) or not text.strip():
        raise gr.Error(
            "request text must be non-empty (1 to 1024 UTF-8 bytes)", print_exception=False
        )
    nbytes = len(encode(text))
    if nbytes > pr.MAX_PROMPT_TOKENS:
        raise gr.Error(
            f"request text must be 1 to {pr.MAX_PROMPT_TOKENS} UTF-8 bytes (tokens), got {nbytes}",
            print_exception=False,
        )
    return text


def check_room(session: object) -> None:
    """At most ``MAX_PROMPTS`` requests per session (``session``: a ``TabState`` or None)."""
    if len(getattr(session, "prompts", ())) >= pr.MAX_PROMPTS:
        raise gr.Error(
            f"a session holds at most {pr.MAX_PROMPTS} requests; load a scenario "
            "or press Reset to start over",
            print_exception=False,
        )


def request_api_info() -> dict:
    return {
        "type": "integer",
        "description": "0-based index of a request of this session (-1 = the last)",
    }


def scenario_check(v: object) -> None:
    ui.check_choice("scenario", v, SCENARIOS)


def settings_checks() -> list:
    """Checks aligned with ``settings`` = policy, spacing, slots, int8, inconsistent, layer,
    head, delta, stage (the same ranges as ``_settings`` / ``_view``)."""
    return [
        lambda v: ui.check_choice("policy", v, POLICIES),
        lambda v: ui.check_int("checkpoint spacing (tokens)", v, 1, 1024),
        lambda v: ui.check_int("checkpoint slots (0 = default 256)", v, 0, 4096),
        None,
        None,
        lambda v: ui.check_int("KDA layer", v, 0, pr.kda_shape()[0] - 1),
        lambda v: ui.check_int("head", v, 0, pr.kda_shape()[1] - 1),
        None,
        lambda v: ui.check_choice("tree snapshot", v, STAGES),
    ]


def room_cross(*values: object) -> tuple[int, str] | None:
    try:
        check_room(values[-2])
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


def nonempty_cross(n_settings: int):  # noqa: ANN202
    def cross(*values: object) -> tuple[int, str] | None:
        session = values[n_settings]
        if _is_state(session) and not session.prompts:
            return 0, EMPTY
        return None

    return cross


def request_cross(request: object, *values: object) -> tuple[int, str] | None:
    session = values[-2]
    if not _is_state(session) or session.result is None:
        return 0, EMPTY
    n = len(session.prompts)
    try:
        ui.check_int("request", -1 if request is None else request, -n, n - 1)
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None


def step_cross(step: object, session: object, *_: object) -> tuple[int, str] | None:
    if not _is_state(session) or session.result is None:
        return 0, EMPTY
    n = session.n_steps
    if n == 0:
        return 0, f"request #{session.req + 1} has no replay steps (it restored nothing)"
    try:
        ui.check_int("step", step, 0, n - 1)
    except gr.Error as e:
        return 0, guard.message_of(e)
    return None
