"""prefix_replay's replay stepping: go to a step (0 = the restore point, the last = the token
match), one step back or forward, and play (a timer tick a step, stopped at the match). Each
returns the replay outputs (``session.replay_outputs``) and a new ``TabState``."""

from __future__ import annotations

from dataclasses import replace

import gradio as gr
import numpy as np

from apps import ui
from apps.prefix_replay.checks import check_step
from apps.prefix_replay.session import TabState, need, replay_outputs
from apps.ui import player
from apps.ui.checks import fail
from words.prefix_replay import MSG


@ui.study_errors
def go_to_step(step: float, session: TabState | None = None, language: str = "English") -> tuple:
    """Show replay step ``step`` (0 = the restore point, last = the token match)."""
    s = need(session)
    n = s.n_steps
    if n == 0:
        raise fail("e_no_steps", MSG, n=s.req + 1)
    s = replace(s, step=check_step(step, n, s.req))
    return (*replay_outputs(s, MSG.lang(language)), s)


@ui.study_errors
def step_by(delta: int, session: TabState | None, language: str = "English") -> tuple:
    s = need(session)
    n = s.n_steps
    s = replace(s, step=int(np.clip(s.step + delta, 0, max(n - 1, 0))))
    return (*replay_outputs(s, MSG.lang(language)), s)


def prev_step(session: TabState | None = None, language: str = "English") -> tuple:
    return step_by(-1, session, language)


def next_step(session: TabState | None = None, language: str = "English") -> tuple:
    return step_by(+1, session, language)


def play_tick(session: TabState | None, language: str = "English") -> tuple:
    """Timer tick: one step forward; stops the timer at the match."""
    if session is None or session.result is None or session.n_steps == 0:
        return (gr.skip(),) * 5 + (player.stopped(),)
    s = replace(session, step=min(session.step + 1, session.n_steps - 1))
    done = s.step >= s.n_steps - 1
    return (*replay_outputs(s, MSG.lang(language)), s, player.after_tick(done))


@ui.study_errors
def play(session: TabState | None, language: str = "English") -> tuple:
    """Start playing (from the restore point if already at the match)."""
    s = need(session)
    if s.n_steps and s.step >= s.n_steps - 1:
        s = replace(s, step=0)
        return (*replay_outputs(s, MSG.lang(language)), s, player.started())
    return (gr.skip(),) * 4 + (s, player.started() if s.n_steps > 1 else player.stopped())
