"""apps.prefix_replay: callbacks against the prefix_replay study, stepping, sessions, the API."""

from __future__ import annotations

import csv
import html
import re

import gradio as gr
import numpy as np
import pytest

from apps import prefix_replay as app
from apps.prefix_replay import figures as figs
from apps.prefix_replay import tables
from apps.ui import COLORS, SERIES
from kda_core.studies import prefix_replay as pr

# output positions of the full render (see build(): all_out)
SUMMARY, TL, TL_CSV, TREE, TREE_CSV, REPLAY, REPLAY_CSV, STEP_MD, STEP, DRIFT, DRIFT_CSV = range(11)
REQUEST, POOLS, POOLS_CSV, SESSION = 11, 12, 13, 14


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def default_out():
    return app.load_scenario(progress=None)


@pytest.fixture(scope="module")
def study():
    return pr.run_scenario()


def test_default_session_is_the_study(default_out, study):
    s = default_out[SESSION]
    assert s.prompts == pr.SCENARIOS["system_tools_branches"].prompts
    assert s.result is study and s.req == 2 and s.step == 0
    t = study.requests[2].timeline
    a, b = t.restore_at, t.token_match
    assert 0 < a < b < t.prompt_len  # the worked default restores, replays and prefills
    summary = default_out[SUMMARY]
    assert summary.startswith("**Request #3**")
    assert f"| **restore point** | **{a}**<br>" in summary
    assert f"| **replayed** | **{b - a}**<br><small>tokens [{a}, {b})</small> |" in summary
    assert f"state hits {study.state_hits}, replayed {study.replayed_tokens}" in summary
    assert default_out[REQUEST]["choices"][2][1] == 2 and default_out[REQUEST]["value"] == 2


def test_timeline_figure(default_out, study):
    fig, path = default_out[TL], default_out[TL_CSV]
    bars = [d for d in fig.data if d.type == "bar"]
    segs = [seg for r in study.requests for seg in r.timeline.segments]
    assert [(int(b.base[0]), int(b.base[0] + b.x[0])) for b in bars] == [(a, b) for a, b, _ in segs]
    match = next(d for d in fig.data if d.name == "token match")
    assert list(match.x) == [r.timeline.token_match for r in study.requests]
    t = study.requests[2].timeline
    a, b, n = t.restore_at, t.token_match, t.prompt_len
    assert f"restores at {a}, replays {b - a}, prefills {n - b}" in fig.layout.title.text
    rows = _rows(path)
    assert rows[0] == ["request", "phase", "start", "end"]
    assert ["3", "replay", str(a), str(b)] in rows


def test_tree_figure_during_and_after(default_out, study):
    fig = default_out[TREE]
    snap = study.requests[2].tree_during
    ck = next(d for d in fig.data if d.name.startswith("checkpoint node"))
    tomb = next(d for d in fig.data if d.name.startswith("tombstone"))
    assert len(ck.x) == snap.states and len(tomb.x) == snap.tombstones
    assert snap.tombstones == 1  # singular: "1 tombstone", not "1 tombstones"
    assert f"{snap.states} checkpoint nodes, 1 tombstone" in fig.layout.title.text
    assert ck.marker.color == COLORS["checkpoint"] and tomb.marker.color == COLORS["kv"]
    locked = (snap.kv_lock > 0) | (snap.state_lock > 0)
    assert locked.sum() >= 1  # the restore path is locked while the request runs
    assert _thick(fig) == int(locked[1:].sum())  # one thick outline per locked non-root node
    # a tree, not bars: one edge polyline per non-root node, lanes = leaves, a branch point
    edges = next(d for d in fig.data if d.name.startswith("edge"))
    assert sum(v is None for v in edges.x) == snap.node_id.size - 1
    assert len(fig.layout.yaxis.tickvals) == int(snap.is_leaf.sum())
    bp = next(d for d in fig.data if d.name.startswith("branch point"))
    assert len(bp.x) >= 1 and set(bp.x) <= set(snap.end.tolist())
    rows = _rows(default_out[TREE_CSV])
    assert len(rows) == 1 + snap.node_id.size and rows[0][5:8] == [
        "has_state",
        "kv_lock",
        "state_lock",
    ]
    after = app.inspect(2, 0, 0, True, app.STAGES[1], False, default_out[SESSION])
    snap2 = study.requests[2].tree_after
    assert f"{snap2.states} checkpoint nodes" in after[TREE].layout.title.text
    locked2 = (snap2.kv_lock > 0) | (snap2.state_lock > 0)
    assert _thick(after[TREE]) == int(locked2[1:].sum()) == 0  # the lock was released


def _thick(fig) -> int:
    """Nodes drawn with the thick 'locked' outline."""
    n = 0
    for d in fig.data:
        drawn = d.mode == "markers" and d.x is not None and len(d.x) and d.x[0] is not None
        if drawn and not d.name.startswith("branch point"):
            w = d.marker.line.width
            n += sum(1 for x in (w if isinstance(w, (list, tuple)) else [w] * len(d.x)) if x == 3)
    return n


def test_replay_heatmap_and_distance(default_out, study):
    tr = study.requests[2].replay_steps
    fig = default_out[REPLAY]
    np.testing.assert_array_equal(fig.data[0].z, pr.heatmap(tr, 0, 0, 0, delta=True))
    np.testing.assert_array_equal(fig.data[1].y, tr.dist)
    assert fig.data[2].y[0] == tr.dist[0] > 0.1
    n = tr.positions.size
    assert n == study.requests[2].timeline.token_match - study.requests[2].timeline.restore_at + 1
    # no maximum on the field: a step past the match reaches the validator, which marks it
    assert "maximum" not in default_out[STEP] and default_out[STEP]["value"] == 0
    assert default_out[REPLAY_CSV]["visible"] is True
    rows = _rows(default_out[REPLAY_CSV]["value"])
    assert len(rows) == 1 + 32 * 32 + n


def test_stepping_reaches_zero_at_the_match(default_out, study):
    s = default_out[SESSION]
    tr = study.requests[2].replay_steps
    last = tr.positions.size - 1
    out = app.prev_step(s)  # clamped at the restore point
    assert out[-1].step == 0
    for k in range(1, last + 1):
        out = app.next_step(out[-1])
        assert out[-1].step == k
        assert out[0].data[2].y[0] == tr.dist[k]
    assert out[0].data[2].y[0] == 0.0 and tr.dist[-1] == 0.0
    assert "= the token match" in out[0].layout.title.text
    np.testing.assert_array_equal(out[0].data[0].z, np.zeros((32, 32)))  # S - S_match
    assert app.next_step(out[-1])[-1].step == last  # clamped at the match
    k = last - 1
    sk = app.go_to_step(k, s)
    assert sk[-1].step == k and f"Step **{k} / {last}** · position {tr.positions[k]}" in sk[2]
    raw = app.inspect(2, 1, 2, False, app.STAGES[0], False, sk[-1])
    np.testing.assert_array_equal(raw[REPLAY].data[0].z, tr.states[k, 1, 2])
    assert s.step == 0  # sessions are replaced, never mutated


def test_play_timer(default_out):
    """Play turns the timer on; a tick never turns it back on (it leaves the timer alone until
    the match, then stops it), so a tick in flight when Pause is pressed cannot restart it."""
    s = default_out[SESSION]
    last = s.n_steps - 1
    out = app.play(s)
    assert out[-1].active is True and out[-2].step == 0
    for _ in range(last):
        out = app.play_tick(out[-2])
        if out[-2].step < last:
            assert not isinstance(out[-1], gr.Timer)  # gr.skip(): the timer stays as it is
    assert out[-2].step == last and out[-1].active is False
    restart = app.play(out[-2])  # at the match: play starts over from the restore point
    assert restart[-2].step == 0 and restart[-1].active is True


def test_pause_after_play_stays_paused(default_out):
    """The race of the issue: Pause (timer off) lands while a tick is in flight; the tick's
    result must not switch the timer back on. Same mechanism as unified_memory's."""
    from apps import unified_memory as um
    from apps.ui import player

    s = default_out[SESSION]
    out = app.play(s)
    paused = player.stopped()
    in_flight = app.play_tick(out[-2])  # computed before Pause, delivered after it
    timer_after = in_flight[-1] if isinstance(in_flight[-1], gr.Timer) else paused
    assert timer_after.active is False
    assert um.tick.__module__ == "apps.unified_memory"
    um_out = um.run(ratios="1", progress=lambda *a, **k: None)
    tick = um.tick(0, um_out[10])[-1]
    assert not isinstance(tick, gr.Timer) or tick.active is False


def test_send_custom_requests_chinese():
    out = app.send_request("你好，世界！今天天气很好。", progress=None)
    s = out[SESSION]
    assert s.scenario == "custom" and len(s.prompts) == 1 and s.result.requests[0].timeline
    assert "| prompt | 39 tokens<br>" in out[SUMMARY]  # 13 CJK characters x 3 bytes
    assert out[REPLAY].layout.annotations[0].text.startswith("nothing restored")
    assert out[REPLAY_CSV] == {"__type__": "update", "value": None, "visible": False}
    out2 = app.send_request("你好，世界！明天呢？", session=s, progress=None)
    t = out2[SESSION].result.requests[1].timeline
    ref = pr.run_scenario("custom", prompts=("你好，世界！今天天气很好。", "你好，世界！明天呢？"))
    assert t == ref.requests[1].timeline and t.token_match == 18  # the shared 18 bytes
    assert len(s.prompts) == 1  # the first session value is untouched


def test_the_readers_text_is_shown_as_typed():
    """Markdown in a request stays text in the summary: no link, no code span, no emphasis
    (each markup character a character reference, which the page shows as that character)."""
    typed = "[link](http://x) `code` *b* _i_ a|b $$x$$ <b>"
    out = app.send_request(typed, progress=None)
    row = next(r for r in out[SUMMARY].splitlines() if r.startswith("| prompt |"))
    cell = row.split("<br><small>")[1].removesuffix("</small> |")
    assert html.unescape(cell) == typed  # what the browser shows
    assert not re.search(r"[\[\]()`*_|$<>]", cell)  # nothing Markdown could read as syntax


def _same_views(got: pr.ScenarioResult, ref: pr.ScenarioResult) -> None:
    assert len(got.requests) == len(ref.requests)
    for name in ("state_hits", "restored_tokens", "replayed_tokens", "prefilled_tokens"):
        assert getattr(got, name) == getattr(ref, name)
    for a, b in zip(got.requests, ref.requests):
        assert (a.index, a.prompt, a.output) == (b.index, b.prompt, b.output)
        assert a.timeline == b.timeline and a.pools == b.pools
        np.testing.assert_array_equal(a.replay_steps.states, b.replay_steps.states)
        np.testing.assert_array_equal(a.replay_steps.dist, b.replay_steps.dist)
        for x, y in ((a.tree_during, b.tree_during), (a.tree_after, b.tree_after)):
            assert x.label == y.label
            for f in ("node_id", "start", "end", "has_state", "state_lock", "kv_age"):
                np.testing.assert_array_equal(getattr(x, f), getattr(y, f))


def test_send_is_incremental_and_equals_the_study(default_out):
    """Send serves only the new request on a fork of the session's engine: same values as
    re-serving every text; the session it was given is untouched."""
    s0 = default_out[SESSION]
    texts = ("System: You are Kimi, a concise assistant. 你好！", s0.prompts[0])
    s1 = app.send_request(texts[0], session=s0, progress=None)[SESSION]
    out = app.send_request(texts[1], session=s1, progress=None)
    s2 = out[SESSION]
    prompts = (*s0.prompts, *texts)
    assert s2.prompts == prompts and s2.study.prompts == prompts and s2.req == 4
    ref = pr.run_scenario(prompts=prompts)
    _same_views(s2.result, ref)
    assert s2.result.requests[:3] == s0.result.requests  # the served views are reused
    assert s2.result.requests[4].timeline.restore_at > 0  # a repeat restores deep
    assert len(s0.study.views) == 3 and s0.study.engine.stats().requests == 3
    assert len(s1.study.views) == 4 and s2.study.engine is not s1.study.engine
    s2.study.engine.check_integrity()
    t = ref.requests[4].timeline
    assert f"restores at {t.restore_at}" in out[TL].layout.title.text
    assert [r[0] for r in out[REQUEST]["choices"]][-1].startswith("#5 ")
    # new settings in the form: every text re-served on a fresh engine under them
    q = app.send_request(texts[0], spacing=16, session=s1, progress=None)[SESSION]
    _same_views(q.result, pr.run_scenario(prompts=(*prompts[:4], texts[0]), spacing=16))
    assert q.spacing == 16 and q.result.spacing == 16


def test_settings_change_the_served_session(default_out):
    s = default_out[SESSION]
    out = app.apply_settings("interval", 32, 2, False, False, session=s, progress=None)
    ref = pr.run_scenario(checkpoint_slots=2)
    assert out[SESSION].result is ref
    ev = ref.requests[-1].pools.evicted_states
    assert ev > 0 and f"| pools: evictions | {ev} states<br>" in out[SUMMARY]
    cap_line = [a for a in out[POOLS].layout.annotations if "capacity" in a.text]
    assert cap_line and cap_line[0].text == "checkpoint pool capacity 2"
    assert "| pools: checkpoint slots | " in out[SUMMARY] and " / 2<br>" in out[SUMMARY]
    assert not any("capacity" in a.text for a in default_out[POOLS].layout.annotations)
    used = s.result.requests[-1].pools.checkpoint_used
    assert f"| pools: checkpoint slots | {used} / 256 (default)<br>" in default_out[SUMMARY]
    q = app.apply_settings("sglang", 32, 0, True, False, session=s, progress=None)
    assert q[SESSION].result is pr.run_scenario(policy="sglang", int8=True)
    assert "INT8" in q[SUMMARY] and q[SESSION].req == 2
    rows = _rows(q[POOLS_CSV])
    assert rows[0][:3] == ["request", "checkpoint slots used", "COW copies (restores)"]


def test_inconsistent_restore_drift(default_out):
    out = app.inspect(2, 0, 0, True, app.STAGES[0], True, default_out[SESSION])
    d = pr.restore_drift(request=2)
    assert out[DRIFT]["visible"] is True and out[DRIFT_CSV]["visible"] is True
    fig = out[DRIFT]["value"]
    names = [t.name for t in fig.data]
    assert names[0].startswith("inconsistent") and names[2].startswith("exact")
    np.testing.assert_array_equal(fig.data[0].y, d.inconsistent)
    assert max(fig.data[2].y) < 1e-12 < 0.1 < min(fig.data[0].y)
    assert [t.line.color for t in fig.data] == [SERIES[2], SERIES[1], SERIES[0]]
    assert f"inconsistent keeps {d.same_tokens('inconsistent')}/16" in fig.layout.title.text
    y = fig.layout.yaxis  # decade ticks (and the exact-zero floor), no stray "2" / "5"
    assert list(y.tickvals) == list(figs.DRIFT_TICKS) and y.ticktext[0] == "0"
    rows = _rows(out[DRIFT_CSV]["value"])
    assert rows[0][:4] == ["token", "exact", "int8", "inconsistent"] and len(rows) == 17
    off = app.inspect(2, 0, 0, True, app.STAGES[0], False, default_out[SESSION])
    assert off[DRIFT]["visible"] is False and off[DRIFT_CSV]["visible"] is False  # no dead panel
    assert default_out[DRIFT]["visible"] is False and default_out[DRIFT_CSV]["visible"] is False


def test_drift_uses_the_session_settings(default_out):
    s = app.apply_settings(
        "sglang", 32, 0, True, False, session=default_out[SESSION], progress=None
    )
    # request #2 replays under SGLang's rules (restore 128, match 145); #3 hits 160 exactly
    out = app.inspect(1, 0, 0, True, app.STAGES[0], True, s[SESSION])
    d = pr.restore_drift(request=1, policy="sglang", spacing=32, int8=True)
    fig = out[DRIFT]["value"]
    assert (d.restore_at, d.token_match) == (128, 145)
    assert "sglang grid 32, INT8; restore 128, match 145" in fig.layout.title.text
    assert fig.data[0].name.startswith("inconsistent") and "(INT8)" in fig.data[0].name
    np.testing.assert_array_equal(fig.data[0].y, np.maximum(d.inconsistent, 1e-17))
    en = app.MSG.lang("English")
    assert tables.settings_label("interval", 8, 4, False, en) == "interval 8, 4 slots"
    assert tables.settings_label("marconi", 8, None, False, en) == "marconi"


def test_reset_and_empty_session():
    out = app.reset_session()
    s = out[-1]
    assert s.prompts == () and s.result is None
    for fn in (
        lambda: app.next_step(s),
        lambda: app.inspect(0, session=s),
        lambda: app.apply_settings(session=s, progress=None),
    ):
        with pytest.raises(gr.Error, match="the session is empty"):
            fn()
    assert app.send_request("hello", session=s, progress=None)[SESSION].prompts == ("hello",)


def test_replay_colour_bar_leaves_the_distance_axis_its_title(default_out):
    from figure_layout import colorbar_crossings

    assert colorbar_crossings(default_out[REPLAY]) == []
