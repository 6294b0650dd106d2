"""apps.fleet_routing: the page draws exactly what ``studies.fleet`` returns (the routers' hit
rates, the chosen router's load per replica, the KV-only router's over-promised requests), in
both languages; an uploaded trace routes; bad input is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import numpy as np
import pytest

from apps import fleet_routing as app
from kda_core.fleet import ROUTERS
from kda_core.studies.fleet import SUMMARY_KEYS, fleet_study
from kda_core.workloads import load_trace
from words.fleet_routing import MSG

MOONCAKE = [
    {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
    {"timestamp": 5, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
    {"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]},
    {"timestamp": 12, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
]


def test_default_draws_the_study():
    md, f_rates, c_rates, f_load, c_load, f_over, c_over = app.run()
    s = app.compute_run()
    want = fleet_study(
        app._trace("conversation", 1000), replicas=4, engine="sglang", state_budget_bytes=4 << 30
    )
    np.testing.assert_array_equal(s.rates, want.rates)
    given = f_rates.data[0]
    assert list(given.x) == [MSG.text("en", f"r_{r}") for r in ROUTERS]
    np.testing.assert_allclose(given.y, s.rates[:, SUMMARY_KEYS.index("state_hit_rate")])
    for k in range(4):
        np.testing.assert_array_equal(f_load.data[k].y, s.load[:, k])
    over = sum(len(tr.x) for tr in f_over.data[:-1] if tr.name != MSG.text("en", "g_as_expected"))
    assert over == len(s.over) > 0
    assert "| state-aware |" in md and "State-aware vs KV events" in md
    rate = SUMMARY_KEYS.index("state_hit_rate")
    points = 100 * (
        s.rates[ROUTERS.index("state_aware"), rate] - s.rates[ROUTERS.index("kv_events"), rate]
    )
    assert f"**{points:+.1f} percentage points**" in md  # a difference of rates, in points
    assert all(str(c).endswith(".csv") for c in (c_rates, c_load, c_over))


def test_chinese_page_has_no_english_words_in_the_figures():
    md, f_rates, *_ = app.run(language="中文")
    assert "| 状态感知 |" in md and "各路由器的命中率" in f_rates.layout.title.text
    assert list(f_rates.data[0].x)[0] == "轮询"


def test_upload_routes(tmp_path: Path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    s = app.compute_run("upload", 100, str(path), 2, "kv_events", 1.0, "sglang", 0)
    assert s.chosen.router == "kv_events" and len(s.chosen.input_len) == 4
    want = fleet_study(load_trace(path), replicas=2, router="kv_events", engine="sglang")
    np.testing.assert_array_equal(s.chosen.replica, want.chosen.replica)


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (dict(replicas=0), "replicas must be an integer in [1, 16]"),
        (dict(replicas=17), "replicas"),
        (dict(weight=-1), "overlap weight w must be a number in [0, 100]"),
        (dict(router="random"), "router must be one of"),
        (dict(requests=50), "requests N"),
        (dict(budget_gib=-1), "state budget"),
        (dict(trace="upload"), "choose a trace file first"),
    ],
)
def test_bad_input_is_refused(args, word):
    with pytest.raises(gr.Error) as e:
        app.run(**args)
    assert word in e.value.message


def test_not_a_trace_file_is_refused(tmp_path: Path):
    path = tmp_path / "junk.jsonl"
    path.write_text("not json at all\n")
    with pytest.raises(gr.Error):
        app.run("upload", 100, str(path))


def test_lengths_only_trace_is_refused_plainly(tmp_path: Path):
    path = tmp_path / "lengths.jsonl"
    rows = [{"timestamp": i, "input_length": 900, "output_length": 9} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(gr.Error) as e:
        app.run("upload", 100, str(path))
    assert "cannot be computed from trace" in e.value.message
