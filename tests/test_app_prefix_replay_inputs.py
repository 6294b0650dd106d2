"""apps.prefix_replay: bad input, the session cap, api names, the client over every endpoint,
drift edge cases, labels, palette and readability."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import prefix_replay as app
from apps import ui as common
from apps.prefix_replay import figures as figs
from apps.ui import COLORS, SERIES
from kda_core.studies import prefix_replay as pr
from words.prefix_replay import MSG

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


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: app.load_scenario("nope", progress=None), "scenario must be one of"),
        (
            lambda s: app.load_scenario(spacing=0, progress=None),
            "checkpoint spacing (tokens) must be an integer in [1, 1024], got 0",
        ),
        (
            lambda s: app.apply_settings(slots=5000, session=s, progress=None),
            "checkpoint slots (0 = default 256) must be an integer in [0, 4096], got 5000",
        ),
        (
            lambda s: app.apply_settings(policy="lru", session=s, progress=None),
            "policy must be one of ['interval', 'sglang', 'vllm', 'marconi']",
        ),
        (
            lambda s: app.inspect(3, session=s),
            "request must be one of this session's requests, #1 to #3 in the list (through the "
            "API an index in [-3, 2], -1 = the last), got 3",
        ),
        (lambda s: app.inspect(0, layer=6, session=s), "KDA layer must be an integer in [0, 5]"),
        (lambda s: app.inspect(0, head=1.5, session=s), "head must be an integer in [0, 3]"),
        (lambda s: app.go_to_step(99, s), "step must be an integer in [0, 7] (request #3: "),
        (lambda s: app.go_to_step(2, app.inspect(0, session=s)[-1]), "has no replay steps"),
        (lambda s: app.send_request("", session=s, progress=None), "must be non-empty"),
        (
            lambda s: app.send_request("x" * 1025, session=s, progress=None),
            "request text must be 1 to 1024 UTF-8 bytes (tokens), got 1025",
        ),
        (lambda s: app.send_request("中" * 342, session=s, progress=None), "got 1026"),
    ],
)
def test_bad_inputs_raise_gr_error(default_out, call, message):
    with pytest.raises(gr.Error) as e:
        call(default_out[SESSION])
    assert message in e.value.message


def test_step_and_request_are_marked_on_their_field(default_out):
    """Step 99 of a request with 8 steps and request 9999: the validator refuses them on the
    field itself (no component bound makes Gradio answer with its own toast first)."""
    from apps.prefix_replay import checks

    s = default_out[SESSION]
    bad = checks.step_cross(99, s, "English")
    assert bad is not None and bad[0] == 0  # the step field
    msg = bad[1].render("en")
    assert msg == "step must be an integer in [0, 7] (request #3: 0 = the restore point), got 99"
    bad = checks.request_cross(9999, 0, 0, True, app.STAGES[0], False, s, "English")
    assert bad is not None and bad[0] == 0 and "got 9999" in bad[1].render("en")
    assert "请求必须是本会话的请求之一" in bad[1].render("zh")
    assert checks.request_cross("2", 0, 0, True, app.STAGES[0], False, s, "English") is None
    cfg = app.build().get_config_file()
    step = next(c for c in cfg["components"] if c["props"].get("elem_id") == "prefix_replay-step")
    assert step["props"].get("maximum") is None and step["props"].get("minimum") is None


def test_session_request_cap():
    s = app.TabState(tuple(f"q{i}" for i in range(pr.MAX_PROMPTS)), "custom")
    with pytest.raises(gr.Error, match="at most 12 requests"):
        app.send_request("one more", session=s, progress=None)


def test_api_names():
    cfg = app.build().get_config_file()
    public = sorted(d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public")
    assert public == sorted(
        f"prefix_replay_{n}"
        for n in (
            "load",
            "send",
            "apply",
            "reset",
            "inspect",
            "step",
            "prev",
            "next",
            "batch",
            "vllm_blocks",
        )
    )
    timer = [d for d in cfg["dependencies"] if any(t[1] == "tick" for t in d["targets"])]
    assert timer and all(d["api_visibility"] == "private" for d in timer)


@pytest.mark.slow
def test_client_every_endpoint_and_sessions(tmp_path):
    from gradio_client import Client

    def client() -> Client:
        return Client(url, verbose=False, download_files=str(tmp_path))

    with common.launched(app.build()) as url:
        c = client()
        out = c.predict("long_document", api_name="/prefix_replay_load")
        study = pr.run_scenario("long_document")
        t = study.requests[2].timeline
        assert f"| **restore point** | **{t.restore_at}**<br>" in out[0]
        fig = common.plot_from_client(out[5])
        assert fig["data"][1]["y"] == study.requests[2].replay_steps.dist.tolist()
        nxt = c.predict(api_name="/prefix_replay_next")  # the session persists on this client
        assert f"Step **1 / {t.token_match - t.restore_at}**" in nxt[2]
        stp = c.predict(3, api_name="/prefix_replay_step")
        assert "Step **3 / " in stp[2]
        prv = c.predict(api_name="/prefix_replay_prev")
        assert "Step **2 / " in prv[2]
        ins = c.predict(1, 2, 1, False, app.STAGES[1], False, api_name="/prefix_replay_inspect")
        assert ins[0].startswith("**Request #2**")
        dflt = c.predict(api_name="/prefix_replay_inspect")  # every input has a default
        assert dflt[0].startswith("**Request #3**")
        app_ = c.predict("vllm", 16, 0, False, False, api_name="/prefix_replay_apply")
        ref = pr.run_scenario("long_document", policy="vllm", spacing=16)
        assert f"state hits {ref.state_hits}" in app_[0]
        with pytest.raises(Exception, match=r"step must be an integer in \[0, "):
            c.predict(999, api_name="/prefix_replay_step")  # the validator names the range
        with pytest.raises(Exception, match=r"request must be one of this session's requests"):
            c.predict(9999, api_name="/prefix_replay_inspect")
        again = c.predict(api_name="/prefix_replay_next")  # still working after the error
        assert again[2].startswith("Step **1 / ")
        sent = c.predict("Q: 为什么？", api_name="/prefix_replay_send")
        assert sent[0].startswith("**Request #4**")  # appended to this client's 3 requests

        other = client()
        mine = other.predict("hello", api_name="/prefix_replay_send")
        assert mine[0].startswith("**Request #1**")  # never sees the other session
        rst = c.predict(api_name="/prefix_replay_reset")
        assert rst[0] == "*(empty session)*"


def test_drift_of_a_request_that_replayed_nothing(default_out, study):
    """A request with no replay must not show 'inconsistent keeps 16/16' (harmless-
    looking): the panel says it replayed nothing and names the requests that did."""
    replaying = [r.index for r in study.requests if r.timeline.replayed]
    assert study.requests[0].timeline.replayed == 0 and replaying == [1, 2]
    out = app.inspect(0, 0, 0, True, app.STAGES[0], True, default_out[SESSION])
    fig = out[DRIFT]["value"]
    assert out[DRIFT]["visible"] is True and out[DRIFT_CSV]["visible"] is False
    assert not fig.data  # no curves
    note = fig.layout.annotations[0].text
    assert note.startswith("request #1 restores at its match (0 tokens): nothing is replayed")
    assert "requests whose restore differs from their match: #2, #3" in note
    sent = app.send_request("完全不同的新请求。", inconsistent=True, progress=None)
    note = sent[DRIFT]["value"].layout.annotations[0].text
    assert "request #1 restores at its match" in note
    assert "no request of this session restores short of its match: nothing can drift" in note


def test_drift_pointer_skips_a_request_restored_at_zero():
    """Restore 0 with match 21 replays 21 tokens but from an empty state, so
    the three drift lines coincide (checked on the study itself): the app must not offer it
    as 'a request with a replay', and must say why nothing drifts there."""
    ps = ("Hello there, general Kenobi. You are", "Hello there, general Grievous!")
    res = pr.serve("custom", prompts=ps).result()
    t = res.requests[1].timeline
    assert (t.restore_at, t.token_match) == (0, 21)
    assert [r.index for r in res.requests if r.timeline.replayed] == [1]
    d = pr.restore_drift("custom", 1, prompts=ps)
    assert float(np.max(np.abs(d.inconsistent - d.exact))) == 0.0  # nothing can drift
    assert figs.drifting(res) == ()
    out = app.send_request(
        ps[1],
        inconsistent=True,
        session=app.send_request(ps[0], progress=None)[SESSION],
        progress=None,
    )
    note = out[DRIFT]["value"].layout.annotations[0].text
    assert "restores no checkpoint (restore 0, match 21)" in note
    assert "nothing can drift here" in note
    assert not out[DRIFT]["value"].data


def test_timeline_labels_and_selected_legend(default_out, study):
    fig = default_out[TL]
    t = study.requests[2].timeline
    texts = {a.text: a for a in fig.layout.annotations}
    assert texts[f"restore {t.restore_at}"].xanchor == "right"  # left of its line
    assert texts[f"match {t.token_match}"].xanchor == "left"  # right of its line
    assert texts[f"restore {t.restore_at}"].x == t.restore_at
    assert any(d.name == "#3 = the inspected request (dark, outlined)" for d in fig.data)
    first = app.inspect(0, 0, 0, True, app.STAGES[0], False, default_out[SESSION])[TL]
    labels = [a.text for a in first.layout.annotations]
    assert labels == ["restore = match = 0 (cold prefill)"]  # one label, no "restore 0match 0"
    assert any(d.name == "#1 = the inspected request (dark, outlined)" for d in first.data)


def test_tokens_readable_and_palette(default_out, study):
    r = study.requests[2]
    s = default_out[SUMMARY]
    assert (
        "\ufffd" not in s
        and f"output `{r.output_readable.replace('|', '¦')}` ({len(r.output_tokens)} byte" in s
    )
    tree = default_out[TREE]
    assert all("\ufffd" not in (t.text or ()) for t in tree.data if t.type == "bar")
    pools = {t.name: t.marker.color for t in default_out[POOLS].data}
    # no one-at-a-time "active slots (peak)" trace: the batch view shows concurrency
    assert "active slots (peak)" not in pools
    assert pools["checkpoint slots used"] == COLORS["checkpoint"]
    assert pools["donations (track slot -> pool)"] == SERIES[0]
    rep = default_out[REPLAY]
    assert rep.data[2].marker.color == "black"  # "this step": not a semantic colour
    assert len(rep.layout.annotations[1].text) <= 48  # the right subplot title fits


@pytest.mark.parametrize("field", ["spacing", "slots"])
def test_non_integers_are_rejected(default_out, field):
    with pytest.raises(gr.Error, match=r"must be an integer in .*got 3\.5"):
        app.apply_settings(**{field: 3.5}, session=default_out[SESSION], progress=None)
    cfg = app.build().get_config_file()
    nums = [c for c in cfg["components"] if c["type"] == "number"]
    # 2 cache settings, the replay step, 5 batch numbers (max new tokens, token budget, state
    # slots, KV pool, byte buffer), 5 of the vLLM block-table panel (block, unit, prompt,
    # outputs, shared)
    assert len(nums) == 13 and all(c["props"].get("precision") is None for c in nums)


def test_drift_curves_stay_in_view(default_out):
    out = app.inspect(2, 0, 0, True, app.STAGES[0], True, default_out[SESSION])
    fig = out[DRIFT]["value"]
    lo, hi = fig.layout.yaxis.range
    for t in fig.data:
        assert lo <= np.log10(min(t.y)) and np.log10(max(t.y)) <= hi


def test_tree_with_a_hundred_nodes_stays_readable():
    """A 100-node tree (12 requests, spacing 8) is drawn with one lane per
    leaf, nodes of at least 10 px and a height that grows with the lanes, not the nodes."""
    base = "System: You are Kimi. Tools: search, calc, weather. "
    ps = tuple(
        base + f"User{i % 4}: question {i} about topic {i % 3} and more words here to extend {i}"
        for i in range(pr.MAX_PROMPTS)
    )
    snap = pr.serve("custom", prompts=ps, spacing=8).result().requests[-1].tree_after
    assert snap.node_id.size >= 50
    fig, _ = figs.fig_tree(snap, "Radix tree", MSG.lang("English"))
    nodes = [
        d for d in fig.data if (d.name or "").startswith(("checkpoint node", "tombstone", "root"))
    ]
    assert sum(len(d.x) for d in nodes) == snap.node_id.size
    assert all(d.marker.size >= 10 for d in nodes)
    lanes = int(snap.is_leaf.sum())
    assert len(fig.layout.yaxis.tickvals) == lanes < snap.node_id.size / 4
    assert fig.layout.height <= 200 + 34 * lanes
