"""Play / Pause over a ``gr.Timer``: one mechanism for every app that animates.

Play turns the timer on and Pause turns it off; a tick never turns it on again: it returns
``gr.skip()`` for the timer while there is more to show and ``Timer(active=False)`` at the end.
A tick that is already running when Pause is pressed is delivered after Pause; if ticks
answered ``Timer(active=True)`` that late answer would restart the animation.

    player.wire(timer, play_btn, pause_btn, tick_fn, inputs, outputs)   # outputs end in timer
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr


def started() -> gr.Timer:
    return gr.Timer(active=True)


def stopped() -> gr.Timer:
    return gr.Timer(active=False)


def after_tick(done: bool) -> Any:
    """What a tick returns for the timer: stop at the end, otherwise leave it as it is."""
    return stopped() if done else gr.skip()


def wire(
    timer: gr.Timer,
    play: gr.Button,
    pause: gr.Button,
    tick: Callable[..., Any],
    inputs: list[Any],
    outputs: list[Any],
    *,
    on_play: Callable[..., Any] | None = None,
    play_inputs: list[Any] | None = None,
    play_outputs: list[Any] | None = None,
) -> None:
    """Play (``on_play``'s outputs end in the timer; default: just start it), Pause, and the
    tick (``outputs`` end in the timer; ``tick`` returns ``after_tick(done)`` there)."""
    if on_play is None:
        play.click(started, None, timer, api_visibility="private")
    else:
        play.click(on_play, play_inputs, play_outputs, api_visibility="private")
    pause.click(stopped, None, timer, api_visibility="private", show_progress="hidden")
    timer.tick(tick, inputs, outputs, api_visibility="private", show_progress="hidden")


__all__ = ["after_tick", "started", "stopped", "wire"]
