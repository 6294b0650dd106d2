"""apps.unified_memory: figures carry the comparison study's data; step / tick; bad inputs; API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import ui as common
from apps import unified_memory as um
from kda_core.studies import memory as mem

GIB = float(1 << 30)


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def out():
    return um.run(progress=lambda *a, **k: None)


@pytest.fixture(scope="module")
def study():
    wl = mem.shifting_mix(n_chat=300, n_long=15, seed=0)
    return mem.compare(wl, mem.k3_config(), ratios=[0.1, 0.3, 1, 3], mode="eager")


def test_summary_matches_study(out, study):
    summary = out[0]
    u = study.unified
    assert (
        f"| unified (eager) | {u.mean_concurrency:.1f} | {u.peak_concurrency} | "
        f"{u.mean_queue_delay:.1f} | {u.makespan} | {u.blocked_steps} | "
        f"{u.total_moves:,} |"
    ) in summary
    assert f"| best static r={study.best_ratio:.3g} |" in summary
    assert u.mean_concurrency > study.best_static.mean_concurrency  # the point of the app


def test_buffer_figure_opens_on_busiest_step(out, study):
    f0, c0, slider = out[1], out[2], out[9]
    peak = int(np.argmax(study.unified.timeline.running))
    assert slider["value"] == peak and slider["maximum"] == study.unified.makespan - 1
    tl = study.unified.timeline
    live_state = f0.data[0]
    assert live_state.x[0] == tl.state_bytes[peak] / GIB
    assert f0.data[4].x[0] == tl.kv_bytes[peak] / GIB  # MLA KV live
    rows = _rows(c0)
    assert rows[0][:6] == ["pool", "state_live", "state_holes", "free", "kv_holes", "kv_live"]
    assert int(rows[1][1]) == tl.state_bytes[peak]
    # the five segments of each row tile the whole buffer
    for r in rows[1:]:
        assert sum(int(x) for x in r[1:6]) == study.unified.total_bytes
    assert len(rows) == 1 + 1 + study.ratios.size
    # each static row has its border tick at state capacity x slot bytes
    slot = mem.k3_config().state_slot_bytes
    edges = sorted(s.x0 for s in f0.layout.shapes)
    assert edges == sorted(r.state_capacity * slot / GIB for r in study.static)


def test_frontier_running_ratio_figures(out, study):
    f1, c1, f2, c2, f3, c3 = out[3:9]
    tl = study.unified.timeline
    np.testing.assert_array_equal(f1.data[0].y, tl.state_frontier / GIB)
    np.testing.assert_array_equal(f1.data[1].y, tl.kv_frontier / GIB)
    blocked = np.flatnonzero(tl.blocked)
    np.testing.assert_array_equal(f1.data[2].x, blocked)
    assert _rows(c1)[0] == [
        "step",
        "state_frontier_bytes",
        "kv_frontier_bytes",
        "state_bytes",
        "kv_bytes",
        "blocked",
        "moves",
    ]
    np.testing.assert_array_equal(f2.data[0].y, tl.running)
    np.testing.assert_array_equal(f3.data[0].x, study.ratios)
    np.testing.assert_array_equal(f3.data[0].y, study.static_mean_concurrency)
    rows = _rows(c3)
    assert float(rows[1][-1]) == study.unified.mean_concurrency


def test_step_and_tick(out, study):
    session = out[10]
    fig, csv_path = um.show_step(3, session)
    assert fig.layout.title.text.startswith(f"The buffer at step 3 of {study.unified.makespan}")
    assert fig.data[0].x[0] == study.unified.timeline.state_bytes[3] / GIB
    s, fig2, _, timer = um.tick(3, session)
    stride = max((study.unified.makespan - 1) // um.FRAMES, 1)
    assert s == 3 + stride and not isinstance(timer, gr.Timer)  # a tick never restarts Play
    last = study.unified.makespan - 1
    s, _, _, timer = um.tick(last, session)
    assert s == last and timer.active is False
    with pytest.raises(gr.Error, match=rf"step must be an integer in \[0, {last}\]"):
        um.show_step(last + 1, session)
    with pytest.raises(gr.Error, match="run a replay first"):
        um.show_step(0, None)


def test_lazy_mode_moves_less():
    noop = lambda *a, **k: None  # noqa: E731
    eager = um.run(200, 10, ratios="1", progress=noop)[10]["cmp"].unified
    lazy = um.run(200, 10, mode="lazy", ratios="1", progress=noop)[10]["cmp"].unified
    assert lazy.kind == "lazy" and lazy.total_moves < eager.total_moves


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_chat": 5000}, "chat requests must be an integer in [0, 3000], got 5000"),
        ({"n_chat": 0, "n_long": 0}, "chat requests + long-context requests must be >= 1"),
        ({"total_gib": 1}, "buffer size (GiB) must be a number in [4, 192], got 1"),
        ({"ratios": "0.5, x"}, "static ratio must be a number in [0.01, 100], got 'x'"),
        ({"ratios": ""}, "static ratios: give 1 to 8 comma-separated numbers"),
        ({"ratios": "1,2,3,4,5,6,7,8,9"}, "give 1 to 8 comma-separated numbers"),
        ({"mode": "static"}, "unified mode must be one of ['eager', 'lazy']"),
        ({"long_rate": 0}, "long arrivals per step must be a number in [0.01, 10], got 0"),
    ],
)
def test_bad_inputs(kwargs, message):
    with pytest.raises(gr.Error) as e:
        um.run(progress=lambda *a, **k: None, **kwargs)
    assert message in e.value.message


def test_api_names():
    cfg = um.build().get_config_file()
    public = sorted(d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public")
    assert public == ["unified_memory_calculator", "unified_memory_run", "unified_memory_step"]


def test_client_run_step_and_error(tmp_path):
    from gradio_client import Client

    with common.launched(um.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        with pytest.raises(Exception, match="run a replay first"):
            c.predict(step=0, api_name="/unified_memory_step")  # new session: nothing yet
        out = c.predict(n_chat=200, n_long=10, ratios="0.5, 2", api_name="/unified_memory_run")
        assert len(out) == 10
        assert "| unified (eager) |" in out[0]
        fig = common.plot_from_client(out[5])
        assert fig["layout"]["title"]["text"].startswith("Running requests over time")
        step_fig, step_csv = c.predict(step=2, api_name="/unified_memory_step")
        f = common.plot_from_client(step_fig)
        assert f["layout"]["title"]["text"].startswith("The buffer at step 2 of ")
        assert _rows(step_csv)[0][0] == "pool"
        with pytest.raises(Exception, match=r"must be a number in \[4, 192\]"):
            c.predict(total_gib=0, api_name="/unified_memory_run")
        step_fig = c.predict(step=1, api_name="/unified_memory_step")[0]  # session kept
        assert common.plot_from_client(step_fig)["layout"]["title"]["text"].startswith(
            "The buffer at step 1 of "
        )


def test_ratio_figure_labels_on_log_axis_and_colours(out, study):
    f3 = out[7]
    assert not f3.layout.annotations  # every line is named in the legend: no label boxes
    for name, r in zip(study.phase_names, study.phase_ratios):
        (tr,) = [d for d in f3.data if d.name.startswith(f"static tuned for {name}")]
        assert list(tr.x) == [pytest.approx(r)] * 2  # a vertical line at the tuned ratio
    (uni,) = [d for d in f3.data if d.name.startswith("unified pool")]
    assert list(uni.y) == [pytest.approx(study.unified.mean_concurrency)] * 2
    assert set(study.ratios.tolist()) <= set(f3.layout.xaxis.tickvals)
    # categorical colours: unified black, never the semantic "state" red
    f2 = out[5]
    assert f2.data[0].line.color == "black" == um.pool_color(0)
    assert common.COLORS["state"] not in {d.line.color for d in f2.data}


def test_long_ratio_list_is_echoed_short():
    with pytest.raises(gr.Error) as e:
        um.run(progress=lambda *a, **k: None, ratios=", ".join(["1"] * 2000))
    assert "give 1 to 8 comma-separated numbers" in e.value.message
    assert len(e.value.message) < 140
    with pytest.raises(gr.Error, match="chat requests must be an integer"):
        um.run(progress=lambda *a, **k: None, n_chat=3.5)


def test_running_axis_is_not_stretched_by_the_slowest_split(out, study):
    """A static split far slower than the unified pool (more than twice the
    makespan of the unified pool and the best split) must not set the x axis."""
    f2 = out[5]
    base = max(study.unified.makespan, study.best_static.makespan)
    slow = [r for r in study.phase_static if r.makespan > 2 * base]
    assert slow, "the default workload has a split tuned for one phase that is >2x slower"
    assert f2.layout.xaxis.range[1] <= 1.05 * 2 * base
    assert any("off the axis" in d.name for d in f2.data)


def test_full_pools_are_named_on_their_rows_not_cut_in_the_title(out, study):
    """At the busiest step several pools are full: the title counts them (a list there was cut
    with "…") and each full pool's row says so."""
    fig = out[1]
    assert "…" not in fig.layout.title.text
    names = list(fig.data[0].y)
    full = [t for t in fig.layout.yaxis.ticktext if t.endswith(" · full")]
    assert f"{len(full)} of {len(names)} pools full" in fig.layout.title.text
    assert len(full) >= 4  # the busiest step: most pools have met
