"""apps.chunk_scan: figures carry the chunk_scan study's numbers; timing state; bad inputs; API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import chunk_scan as app
from apps import ui as common
from kda_core.studies import chunk_scan as cs


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def out():
    return app.run()


@pytest.fixture(scope="module")
def study():
    return cs.chunk_scan_study(seed=0, chunk_size=64), cs.composition(seed=0)


def test_agreement_is_round_off(out, study):
    s, _ = study
    fig, path = out[1], out[2]
    a = s.agreement
    np.testing.assert_array_equal(fig.data[0].x, a.chunk_sizes)
    np.testing.assert_array_equal(fig.data[0].customdata, a.o_max_abs[0])
    np.testing.assert_array_equal(fig.data[1].customdata, a.S_max_abs[0])
    assert a.o_max_abs.max() < 1e-14 and a.S_max_abs.max() < 1e-14
    rows = _rows(path)
    assert rows[0] == ["T", "chunk_size", "o_max_abs", "o_rel", "S_max_abs", "S_rel"]
    assert len(rows) == 1 + a.T_values.size * a.chunk_sizes.size
    assert float(rows[1][2]) == a.o_max_abs[0, 0]
    assert f"worst max |Δo| **{a.o_max_abs.max():.2e}**" in out[0]


def test_cost_figure(out, study):
    s, _ = study
    fig, path = out[3], out[4]
    np.testing.assert_array_equal(fig.data[0].y, s.cost.chunked_steps[0])
    np.testing.assert_allclose(fig.data[1].y, s.cost.flops_ratio[0], rtol=0, atol=0)
    rows = _rows(path)
    i = next(k for k, r in enumerate(rows) if r[:2] == ["65536", "64"])
    assert rows[i][2:4] == ["65536", "1024"]
    assert "**1,024** sequential steps instead of 65,536" in out[0]


def test_groupings_same_orders_different(out, study):
    _, m = study
    g_fig, g_csv, o_fig, o_csv = out[5:9]
    np.testing.assert_array_equal(g_fig.data[0].customdata, m.grouping_M_diff)
    assert m.grouping_M_diff.max() < 1e-14 and m.grouping_S_diff.max() < 1e-14
    assert _rows(g_csv)[1][0] == "(A->B)->C"
    assert list(o_fig.data[0].x) == [s.replace("->", "→") for s in m.order_labels]
    np.testing.assert_array_equal(o_fig.data[0].y, m.order_S_rel)
    assert m.order_S_rel[0] < 1e-14 and m.order_S_rel[1:].min() > 0.1
    # categorical (true order vs other orders): palette.SERIES, never a semantic colour
    assert o_fig.data[0].marker.color[0] == common.SERIES[2]
    assert set(o_fig.data[0].marker.color[1:]) == {common.SERIES[1]}
    # the eps line is a dashed shape at eps, named in the legend: no label box over the bars
    eps = np.finfo(np.float64).eps
    assert not [a for a in g_fig.layout.annotations if "epsilon" in a.text]
    assert [sh.x0 for sh in g_fig.layout.shapes] == [pytest.approx(eps)]
    assert any(d.name.startswith("float64 machine epsilon") for d in g_fig.data)
    assert g_fig.layout.xaxis.range[1] < -12  # no wasted decades up to 1e-12


def test_five_segments_orders_are_sorted_not_120_labels():
    """5 segments give 5! = 120 orders; they are drawn sorted by distance
    with the order in the hover, not as 120 rotated tick labels."""
    from kda_core.studies import chunk_scan as cs

    m = cs.composition(lengths=(8, 8, 8, 8, 8), seed=0, head=0)
    fig, _ = app.fig_orders(m)
    assert len(m.order_labels) == 120
    bars = fig.data[0]
    assert list(bars.x) == list(range(1, 121)) and fig.layout.xaxis.showticklabels is False
    assert list(bars.y) == sorted(m.order_S_rel.tolist())
    assert bars.customdata[0][0] == m.order_labels[0].replace("->", "→")  # true order first
    assert bars.marker.color[0] == common.SERIES[2]


@pytest.mark.parametrize(
    ("lo", "hi", "expect"),
    [(3.0, 18.0, [5.0, 10.0]), (0.2, 400.0, [1.0, 10.0, 100.0]), (1.0, 1e4, None)],
)
def test_log_ticks_never_leave_one_lone_tick(lo, hi, expect):
    ticks = common.log_ticks(lo, hi)
    assert len(ticks) >= 2 and all(lo <= t <= hi for t in ticks)
    if expect is not None:
        assert set(expect) <= set(ticks)


def test_map_heatmaps(out, study):
    _, m = study
    fig, path = out[9], out[10]
    np.testing.assert_array_equal(fig.data[0].z, m.M_true)
    np.testing.assert_array_equal(fig.data[1].z, m.M_swapped - m.M_true)
    rows = _rows(path)
    assert len(rows) == 1 + m.M_true.size and float(rows[2][2]) == m.M_true[0, 1]


def test_text_source_and_segments():
    o = app.run(app.SOURCES[1], lengths="10, 20", head=3)
    assert "TinyHybrid layer 0" in o[0]
    assert o[5].layout.title.text.endswith("(segments A=10, B=20 tokens)")
    m = cs.composition(lengths=(10, 20), text=app.DEFAULT_TEXT, head=3)
    np.testing.assert_array_equal(o[9].data[0].z, m.M_true)


def test_measure_keeps_session_runs():
    noop = lambda *a, **k: None  # noqa: E731
    fig, path, runs = app.measure(32, 1, None, progress=noop)
    assert len(runs) == 1 and runs[0].chunk_sizes.tolist() == [16, 32, 64]
    assert all(np.all(t > 0) for t in (runs[0].recurrent_s, runs[0].chunked_s))
    assert len(fig.data) == 4  # recurrent + three chunk sizes
    rows = _rows(path)
    assert rows[0] == ["series", "T", "seconds"] and rows[1][0] == "run1 recurrent"
    for _ in range(app.MAX_TIMINGS):
        fig, _, runs = app.measure(64, 1, runs, progress=noop)
    assert len(runs) == app.MAX_TIMINGS and len(fig.data) == 3 * app.MAX_TIMINGS


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 0}, "chunk size must be an integer in [1, 256], got 0"),
        ({"lengths": "16"}, "segment lengths: give 2 to 5 comma-separated integers"),
        ({"lengths": "16, 0"}, "segment length must be an integer in [1, 256], got '0'"),
        ({"head": 2}, "head must be an integer in [0, 1], got 2"),
        ({"source": app.SOURCES[1], "text": "ab"}, "text must be 3 to 2048 UTF-8 bytes"),
        (
            {"source": app.SOURCES[1], "text": "abcdef"},
            "segment lengths must sum to at most the text's 6 bytes, got 48",
        ),
        ({"source": "file"}, "source must be one of"),
    ],
)
def test_bad_inputs(kwargs, message):
    with pytest.raises(gr.Error) as e:
        app.run(**kwargs)
    assert message in e.value.message


def test_api_names():
    cfg = app.build().get_config_file()
    public = sorted(d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public")
    assert public == ["chunk_scan_run", "chunk_scan_time"]


def test_client(tmp_path):
    from gradio_client import Client

    with common.launched(app.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(chunk_size=32, api_name="/chunk_scan_run")
        assert len(out) == 11 and "C ∈ [1, 8, 16, 32, 64, 128]" in out[0]
        fig = common.plot_from_client(out[7])
        assert fig["layout"]["title"]["text"].startswith("The order matters")
        assert abs(fig["data"][0]["y"][0]) < 1e-14 and min(fig["data"][0]["y"][1:]) > 0.1
        with pytest.raises(Exception, match=r"chunk size must be an integer in \[1, 256\]"):
            c.predict(chunk_size=999, api_name="/chunk_scan_run")
        f1, _ = c.predict(chunk_size=16, repeats=1, api_name="/chunk_scan_time")
        f2, p2 = c.predict(chunk_size=16, repeats=1, api_name="/chunk_scan_time")
        assert len(common.plot_from_client(f1)["data"]) == 3
        assert len(common.plot_from_client(f2)["data"]) == 6  # the session kept run 1
        assert _rows(p2)[-1][0] == "run2 chunked C=64"


def test_timing_download_hidden_until_measured():
    demo = app.build()
    comps = {c.elem_id: c for c in demo.blocks.values() if getattr(c, "elem_id", None)}
    assert comps["chunk_scan-timing-csv"].visible is False
    assert comps["chunk_scan-agreement-csv"].visible is True
