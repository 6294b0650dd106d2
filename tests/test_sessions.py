"""What a browser tab leaves on the server (``apps.ui.bound_sessions``): every ``gr.State``
gets a time-to-live, the number of sessions kept is capped, and a closed tab's session is
deleted by the page's unload event, at once. The 50-tab RSS check in a browser is
tests/e2e/test_e2e_sessions.py; here the mechanism, with a ``gradio_client`` session."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
from gradio_client import Client

from apps import prefix_replay, ui
from apps.prefix_replay.session import TabState


def _unload_fns(demo: gr.Blocks) -> list:
    return [f.fn for f in demo.fns.values() if any(t[1] == "unload" for t in f.targets)]


def test_every_state_has_a_time_to_live_and_the_sessions_a_cap() -> None:
    demo = ui.bound_sessions(prefix_replay.build())
    states = [b for b in demo.blocks.values() if isinstance(b, gr.State)]
    assert len(states) >= 2 and all(s.time_to_live == ui.SESSION_TTL_S for s in states)
    assert demo.state_session_capacity == ui.SESSION_CAPACITY == 64
    assert len(_unload_fns(demo)) == 1
    assert ui.bound_sessions(demo) is demo and len(_unload_fns(demo)) == 1  # idempotent


def test_a_closed_tab_is_forgotten_at_once() -> None:
    demo = prefix_replay.build()
    with ui.launched(demo) as url:
        assert demo.state_holder.capacity == ui.SESSION_CAPACITY  # launch took the cap
        c = Client(url, verbose=False)
        c.predict(api_name="/prefix_replay_load")
        h = c.session_hash
        session = demo.state_holder.session_data[h]
        tabs = [v for v in session.state_data.values() if isinstance(v, TabState)]
        assert len(tabs) == 1 and tabs[0].result is not None
        # the scenario's engine is shared, not forked per tab (forked only to send a request)
        assert tabs[0].study is prefix_replay.pr.serve(fork=False)
        (forget,) = _unload_fns(demo)
        forget(SimpleNamespace(session_hash=h))  # what Gradio runs when the tab disconnects
        assert h not in demo.state_holder.session_data
        forget(SimpleNamespace(session_hash=None))  # nothing to forget: no error
