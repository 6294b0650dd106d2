"""apps.context_parallel: the figures carry the study's numbers, the language switch
translates the figures, bad inputs raise gr.Error, the API works through gradio_client."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import context_parallel as app
from apps import ui as common
from kda_core.studies import context_parallel as cps


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def out():
    return app.run()


@pytest.fixture(scope="module")
def demo():
    return cps.demo(T=512, P=4, scan="logdepth", seed=0)


def test_summary_and_exactness(out, demo):
    assert f"worst relative error of the outputs **{demo.o_rel.max():.1e}**" in out[0]
    assert demo.o_rel.max() <= 1e-10
    fig, path = out[5], out[6]
    np.testing.assert_array_equal(fig.data[0].customdata, demo.o_rel)
    rows = _rows(path)
    assert rows[0] == ["rank", "o_rel", "S_in_rel"] and len(rows) == 1 + 4


def test_steps_figure_draws_every_message(out, demo):
    fig, path = out[1], out[2]
    arrows = [tr for tr in fig.data if tr.type == "scatter" and tr.mode == "lines+markers"]
    assert len(arrows) == demo.msg_src.size
    assert [list(a.x) for a in arrows] == [[s, d] for s, d in zip(demo.msg_src, demo.msg_dst)]
    rows = _rows(path)
    assert rows[0] == ["step", "src", "dst", "kind", "bytes"]
    assert [int(r[4]) for r in rows[1:]] == demo.msg_bytes.tolist()
    # rank segments cover [0, T) in order
    bars = [tr for tr in fig.data if tr.type == "bar"]
    assert [int(b.base[0]) for b in bars] == demo.bounds[:-1].tolist()


def test_state_figure_is_rank_2s_state(out, demo):
    # rank 2's state went through the scan (composed maps): round-off, not bit-identical
    fig, path = out[3], out[4]
    np.testing.assert_array_equal(fig.data[0].z, demo.S_in[2])
    np.testing.assert_array_equal(fig.data[1].z, demo.S_in[2] - demo.S_true[2])
    assert 0 < np.abs(fig.data[1].z).max() < 1e-12
    assert "max |Δ|" in fig.layout.annotations[1].text
    assert len(_rows(path)) == 1 + 16 * 16


def test_bytes_figure(out, demo):
    fig = out[7]
    names = [tr.name for tr in fig.data]
    assert names == ["log-depth scan", "all-gather + fold", "MLA KV all-gather"]
    assert fig.data[0].y[0] == demo.bytes_sent.max()
    # like with like: the MLA all-gather only beside the K3 layer's scans (one sequence: the
    # cost model's schedule, the same messages as the demo's)
    assert list(fig.data[2].x) == ["a K3 layer (8 heads × 128, fp32)"]
    assert list(fig.data[2].y) == [demo.kv_bytes]
    m = cps.cost_model(cps.MEASURED, T=512, P_values=(4,))
    assert fig.data[0].y[1] == m.bytes_sent["logdepth"][0] == demo.k3_scan_bytes["logdepth"]
    assert fig.data[1].y[1] == m.bytes_sent["allgather"][0] == demo.k3_scan_bytes["allgather"]
    assert m.kv_bytes[0] == demo.kv_bytes


def test_summary_compares_k3_scan_with_k3_all_gather():
    """P = 8, T = 512: the demo layer's scan (28,672 B) is said on its own line; the K3 line
    compares the same messages at K3 size (3 maps + 1 state: 3,670,016 B) with K3's MLA KV
    all-gather (516,096 B), never the demo's bytes with K3's."""
    s = app.run(T=512, P=8)[0]
    assert "scan of this demo's layer: at most **28,672 B** sent per rank" in s
    assert "the scan's messages **3,670,016 B** per rank, an MLA KV all-gather **516,096 B**" in s
    zh = app.run(T=512, P=8, language="中文")[0]
    assert "扫描的消息每个 rank **3,670,016 B**，MLA KV 全收集 **516,096 B**" in zh


def test_speedup_figure_is_the_cost_model(out):
    fig = out[9]
    m = cps.cost_model(cps.MEASURED, T=8192, P_values=(1, 2, 4, 8, 16, 32, 64))
    np.testing.assert_array_equal(fig.data[1].y, m.speedup["logdepth"])
    m32 = cps.cost_model(cps.MEASURED, T=32768, P_values=(1, 2, 4, 8, 16, 32, 64))
    (ag,) = [tr for tr in fig.data if tr.line.dash == "dot"]
    np.testing.assert_array_equal(ag.y, m32.speedup["allgather"])
    assert [tr.name for tr in fig.data[1:]][-1] == "log-depth scan, T = 1M"


def test_chinese_figures():
    zh = app.run(language=common.LANGS[1])
    assert "输出最大相对误差" in zh[0]
    assert zh[1].layout.title.text.startswith("rank 与扫描步骤（对数深度扫描")
    assert zh[7].data[2].name == "MLA KV 全收集"
    assert all(tr.name != "log-depth scan" for tr in zh[9].data)


def test_rank_beyond_P_is_refused_on_its_field():
    with pytest.raises(gr.Error) as e:
        app.run(P=2, rank=5)
    assert "rank to inspect must be an integer in [0, 1], got 5" in e.value.message
    assert app.run(P=2, rank=1)[3].layout.title.text.startswith("State handed to rank 1 ")


def test_documents_and_allgather():
    out = app.run(T=300, P=3, scan="allgather", docs="50, 200, 50", rank=2)
    assert "3 documents" in out[0]
    d = cps.demo(T=300, P=3, scan="allgather", docs=[50, 200, 50])
    np.testing.assert_array_equal(out[3].data[0].z, d.S_in[2])
    assert d.constant.tolist() == [True, False, True]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"T": 8}, "T must be an integer in [16, 4096], got 8"),
        ({"P": 0}, "ranks P must be an integer in [1, 16], got 0"),
        ({"T": 20, "P": 17}, "ranks P must be an integer in [1, 16], got 17"),
        ({"rank": 16}, "rank to inspect must be an integer in [0, 3], got 16"),
        ({"scan": "tree"}, "scan must be one of"),
        ({"docs": "100, 100"}, "document lengths must sum to T = 512, got 200"),
        ({"docs": "a, b"}, "document length must be an integer in [1, 512]"),
        ({"docs": ",".join(["1"] * 9)}, "give 1 to 8 comma-separated integers"),
        ({"docs": "1" * 300}, "at most 200 characters"),
    ],
)
def test_bad_inputs(kwargs, message):
    with pytest.raises(gr.Error) as e:
        app.run(**kwargs)
    assert message in e.value.message


def test_api_names():
    cfg = app.build().get_config_file()
    public = sorted(d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public")
    assert public == ["context_parallel_run"]


def test_client(tmp_path):
    from gradio_client import Client

    with common.launched(app.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(T=256, P=2, rank=1, api_name="/context_parallel_run")
        assert len(out) == 11 and "2 ranks, 256 tokens" in out[0]
        fig = common.plot_from_client(out[5])
        assert max(fig["data"][0]["customdata"]) <= 1e-10
        with pytest.raises(Exception, match=r"ranks P must be an integer in \[1, 16\]"):
            c.predict(P=99, api_name="/context_parallel_run")


def test_validator_flags_the_offending_input() -> None:
    """The page-keeping validator names the input: P above T, lengths that miss T, a rank
    outside the P ranks."""
    i, m = app._cross_run(16, 32, "allgather", "", 0)
    assert (i, str(m)) == (1, "ranks P must be in [1, 16] (at most T), got 32")
    i, m = app._cross_run(512, 4, "allgather", "100, 100", 0)
    assert (i, str(m)) == (3, "document lengths must sum to T = 512, got 200")
    assert m.render("中文") == "文档长度之和必须等于 T = 512，收到 200"
    i, m = app._cross_run(512, 4, "allgather", "", 5)
    assert (i, str(m)) == (4, "rank to inspect must be an integer in [0, 3], got 5")
    assert app._cross_run(512, 4, "allgather", "100, 300, 112", 3) is None


def test_colour_bar_leaves_the_next_panel_its_axis(out):
    """The left heatmap's colour bar sat on the right heatmap's y-axis title."""
    from figure_layout import colorbar_crossings

    fig = out[3]
    assert colorbar_crossings(fig) == []
