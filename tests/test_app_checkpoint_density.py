"""apps.checkpoint_density: the figures carry the density study's numbers; bad inputs; the API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import checkpoint_density as app
from apps import ui as common
from kda_core.studies import density as ds
from words import phrases
from words.checkpoint_density import MSG

GIB = float(1 << 30)
NOOP = lambda *a, **k: None  # noqa: E731


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def trace():
    return app.load_workload(app.DEFAULT_WORKLOAD)


@pytest.fixture(scope="module")
def out():
    return app.run(progress=NOOP)


@pytest.fixture(scope="module")
def sweep(trace):
    return ds.density_sweep(trace, (1024, 2048, 4096, 8192, 16384), (8.0, None))


def test_default_workload_is_the_head_of_the_real_trace(trace):
    full = app.load_workload("conversation trace (all 12,031 requests, ~1 min)")
    assert len(trace) == app.HEAD_REQUESTS and len(full) == 12_031
    np.testing.assert_array_equal(trace.input_len, full.input_len[: app.HEAD_REQUESTS])
    np.testing.assert_array_equal(trace.arrival_s, full.arrival_s[: app.HEAD_REQUESTS])


def test_summary_names_the_optimum(out, sweep):
    summary = out[0]
    for j, lab in enumerate(sweep.budget_labels):
        i = int(sweep.optimum[j])
        assert (
            f"| {lab} | **{int(sweep.intervals[i]):,}** | {sweep.ttft_mean_s[i, j]:.3f} s |"
            in summary
        )
    assert f"ideal token hit **{sweep.analytic.ideal_token_hit_rate:.1%}**" in summary
    assert out[-1] == {"__type__": "update", "value": "", "visible": False}  # not stale
    best = [(lab, int(sweep.intervals[int(i)])) for lab, i in zip(sweep.budget_labels,
                                                                   sweep.optimum)]  # fmt: skip
    assert out[-2] == [[1, "conversation[:1000]", 5, best]]
    runs = out[-3]
    assert "<br>".join(f"{lab}: K={k:,}" for lab, k in best) in runs


def test_tradeoff_figure_and_csv(out, sweep):
    fig, path = out[1], out[2]
    np.testing.assert_array_equal(fig.data[0].y, sweep.peak_state_bytes[:, 0] / GIB)
    np.testing.assert_array_equal(fig.data[1].y, sweep.mean_replay_per_hit[:, 0])
    np.testing.assert_array_equal(fig.data[2].y, sweep.ttft_mean_s[:, 0])
    star = fig.data[3]
    assert star.x[0] == sweep.intervals[sweep.optimum[0]] and star.marker.symbol == "star"
    rows = _rows(path)
    assert len(rows) == 1 + sweep.intervals.size * 2
    head = rows[0]
    r = dict(zip(head, rows[1]))
    assert int(r["interval"]) == 1024 and r["budget"] == "8 GiB"
    assert int(r["peak_state_bytes"]) == sweep.peak_state_bytes[0, 0]
    assert sum(row[head.index("optimum")] == "True" for row in rows[1:]) == 2


def test_hit_rate_figures(out, sweep, trace):
    fig = out[3]
    np.testing.assert_array_equal(fig.data[0].y, sweep.state_hit_rate[:, 0])
    np.testing.assert_array_equal(fig.data[1].y, sweep.token_hit_rate[:, 0])
    assert np.all(sweep.state_hit_rate <= sweep.token_hit_rate + 1e-12)  # the app's point
    np.testing.assert_array_equal(fig.data[4].y, sweep.analytic.state_hit_rate)
    tfig, tpath = out[5], out[6]
    tl = ds.hit_timeline(trace, "interval", {"every": 4096}, budget_gib=8.0)
    np.testing.assert_array_equal(tfig.data[0].y, tl.cum_token_hit_rate)
    np.testing.assert_array_equal(tfig.data[1].y, tl.cum_state_hit_rate)
    assert len(_rows(tpath)) == 1 + len(trace)


def test_pareto_and_policies(out, sweep, trace):
    pfig = out[7]
    front = pfig.data[-1]
    m = sweep.pareto.ravel()
    assert len(front.x) == int(m.sum())
    np.testing.assert_array_equal(
        np.sort(front.x), np.sort((sweep.peak_state_bytes / GIB).ravel()[m])
    )
    pol = ds.policies_at_budget(trace, 8.0)
    qfig, qpath = out[9], out[10]
    assert list(qfig.data[0].x) == list(pol.labels)
    np.testing.assert_array_equal(qfig.data[1].y, pol.state_hit_rate[:, 0])
    rows = _rows(qpath)
    assert [r[0] for r in rows[1:]] == list(pol.labels)


def test_synthetic_workload_and_block_multiple():
    o = app.run(
        "multi-turn chat (synthetic)",
        "256, 1024",
        "unlimited",
        4,
        1024,
        ["SGLang", "Marconi"],
        None,
        progress=NOOP,
    )
    assert "block 64 tokens" in o[0] and "chat(n=200,seed=0)" in o[0]
    assert list(o[9].data[0].x) == ["SGLang", "Marconi"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"intervals": "1000"}, "interval K must be a multiple of the block size 512"),
        ({"intervals": "100"}, "interval K must be an integer in [512, 65536], got '100'"),
        ({"intervals": ""}, "intervals: give 1 to 8 comma-separated token counts"),
        ({"budgets": "8, x"}, "budget (GiB) must be a number in [0.5, 1024], got 'x'"),
        ({"budgets": "1,2,3,4,5"}, "budgets: give 1 to 4 comma-separated GiB values"),
        ({"policy_budget": -1}, "policy budget (GiB) must be a number in [0.5, 1024], got -1"),
        ({"timeline_every": 3}, "interval K must be an integer in [512, 65536], got '3'"),
        ({"workload": "mine"}, "workload must be one of"),
        ({"policies": []}, "policies: choose 1 to 5 of"),
        ({"policies": ["SGLang", "LRU"]}, "policies: choose 1 to 5 of"),
    ],
)
def test_bad_inputs(kwargs, message):
    with pytest.raises(gr.Error) as e:
        app.run(progress=NOOP, **kwargs)
    assert message in e.value.message


def test_api_and_client(tmp_path):
    from gradio_client import Client

    demo = app.build()
    cfg = demo.get_config_file()
    public = [d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"]
    assert public == [
        "checkpoint_density_run",
        "checkpoint_density_swa",
        "checkpoint_density_hits",
        "checkpoint_density_hits_explain",
    ]
    with common.launched(demo) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(intervals="2048, 8192", budgets="16", api_name="/checkpoint_density_run")
        assert len(out) == 13 and "| 16 GiB |" in out[0]  # + the (hidden) stale note
        fig = common.plot_from_client(out[1])
        assert fig["data"][0]["x"] == [2048, 8192]
        with pytest.raises(Exception, match="multiple of the block size 512"):
            c.predict(intervals="700", api_name="/checkpoint_density_run")  # the validator
        out = c.predict(intervals="4096", budgets="16", api_name="/checkpoint_density_run")
        assert "| 2 | `conversation[:1000]` | 1 | 16 GiB: K=4,096 |" in out[11]


def test_one_analytic_replay_curve_and_the_flat_note(out, sweep):
    fig = out[1]
    an = [d for d in fig.data if d.name and d.name.startswith("analytic replay")]
    assert len(an) == 1  # ONE analytic replay curve: the study's, as in the static figure
    np.testing.assert_array_equal(an[0].y, sweep.analytic.replay_curve)
    assert not any(d.name and "(K − block)/2" in d.name for d in fig.data)
    # the title and the note state what each curve does, from the data
    assert not np.all(sweep.replay_slope >= 0.5)  # replay does not grow like K
    title = fig.layout.title.text.replace("<br>", " ")  # wrapped to fit: apps/ui/fonts.py
    en = MSG.lang("en")
    assert title.startswith(phrases.headline(ds.replay_notes(sweep), en))
    assert "replay ~K" not in title
    notes = [a.text for a in fig.layout.annotations if "tokens (slope" in a.text]
    want = phrases.replay_note(ds.replay_notes(sweep), en, detail=False)
    assert notes == [want.replace("\n", "<br>")]
    # K ticks are exactly the intervals drawn (no stray log-axis minor labels)
    assert fig.layout.xaxis3.tickvals == tuple(float(k) for k in sweep.intervals)


def test_workload_loading_lives_in_the_study(trace):
    assert trace is ds.load_workload("head", "conversation", app.HEAD_REQUESTS)


def test_long_bad_input_is_echoed_short():
    long = ", ".join(["512"] * 2000)
    with pytest.raises(gr.Error) as e:
        app.run(progress=NOOP, intervals=long)
    assert "intervals: give 1 to 8" in e.value.message and len(e.value.message) < 160
    with pytest.raises(gr.Error) as e:
        app.run(progress=NOOP, timeline_every=4096.5)
    assert "interval K must be an integer" in e.value.message


def test_stale_note_names_the_new_workload():
    en = app.stale_note("multi-turn chat (synthetic)")
    assert en["visible"] is True and "previous workload" in en["value"]
    assert "**multi-turn chat (synthetic)**" in en["value"]
    assert "上一个负载" in app.stale_note("multi-turn chat (synthetic)", "中文")["value"]


def test_chinese_figures_carry_the_studys_own_note(sweep):
    zh = app.run(language="中文", progress=NOOP)
    notes = [a.text for a in zh[1].layout.annotations if "斜率" in a.text]
    want = phrases.replay_note(ds.replay_notes(sweep), MSG.lang("zh"), detail=False)
    assert notes == [want.replace("\n", "<br>")]
    assert zh[3].layout.title.text == "token 命中不等于状态命中"
    assert "| 预算 | 最优 K |" in zh[0] and "| 不限 |" in zh[0]
    assert "随 K 增大而下降" in zh[0]  # the per-curve notes in the summary
