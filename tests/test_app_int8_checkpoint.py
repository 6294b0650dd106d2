"""apps.int8_checkpoint: the callback's values against the int8 study, bad inputs, the API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import int8_checkpoint as app
from apps import ui as common
from kda_core.studies import int8 as st

N_MAX = len(st.DEFAULT_TEXT.encode("utf-8"))  # tokens = UTF-8 bytes of the default text
SUMMARY, ERR, ERR_CSV, HIST, HIST_CSV, DIV, DIV_CSV, VAR, VAR_CSV, CAP, CAP_CSV = range(11)
HIST_MD, HISTORY = 11, 12


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _bars(fig, xaxis: str = "x") -> dict:
    """label -> bar height over every bar trace of one subplot, in the axis' category order."""
    got = {}
    for t in fig.data:
        if t.type == "bar" and (t.xaxis or "x") == xaxis:
            got.update(zip(t.x, t.y))
    order = [ax for ax in fig.layout if ax.startswith("xaxis")]
    arr = fig.layout[order[0] if xaxis == "x" else "xaxis" + xaxis[1:]].categoryarray
    return {k: got[k] for k in arr}


@pytest.fixture(scope="module")
def default_out():
    return app.run()


@pytest.fixture(scope="module")
def study():
    return st.int8_study()


def test_summary_numbers(default_out, study):
    s = default_out[SUMMARY]
    assert "| parked after | 64 tokens<br>" in s
    assert f"| relative error (all layers) | {study.table.rel_fro[0]:.3g}<br>" in s
    k3 = study.memory_k3
    assert k3.labels[:2] == ("native", "int8 / key channel") and k3.gain[1] > 1.5
    assert (
        f"| **capacity gained** | **×{k3.gain[1]:.2f}**<br><small>{k3.capacity[1]:,} vs "
        f"{k3.capacity[0]:,} checkpoints</small> |"
    ) in s
    assert default_out[HISTORY] == [
        [
            1,
            64,
            "int8 / key channel",
            f"{study.table.rel_fro[0]:.3g}",
            f"{study.divergence.every_step_state_dist[-1]:.3g}",
            f"×{study.memory_k3.gain[1]:.2f}",
        ]
    ]


def test_error_map_is_the_study(default_out, study):
    fig = default_out[ERR]
    np.testing.assert_array_equal(fig.data[0].z, study.errors.state)
    np.testing.assert_array_equal(fig.data[1].z, study.errors.error)
    np.testing.assert_array_equal(fig.data[1].customdata, study.errors.bound)
    assert np.all(np.abs(study.errors.error) <= study.errors.bound * (1 + 1e-12))
    rows = _rows(default_out[ERR_CSV])
    assert rows[0] == ["key_channel", "value_channel", "state", "restored", "error", "bound"]
    assert len(rows) == 1 + 32 * 32
    assert float(rows[1][4]) == study.errors.error[0, 0]


def test_histograms_divergence_variants_capacity(default_out, study):
    e, d = study.errors, study.divergence
    h = default_out[HIST]
    np.testing.assert_array_equal(h.data[0].y, e.err_counts)
    assert int(np.sum(h.data[0].y)) == 6 * 4 * 32 * 32  # every element of every KDA layer
    div = default_out[DIV]
    np.testing.assert_array_equal(div.data[0].y, d.park_once_state_dist)
    np.testing.assert_array_equal(div.data[2].y, d.every_step_state_dist)
    assert d.every_step_state_dist[-1] > 3 * d.park_once_state_dist[-1]
    same = int(d.park_once_agree.sum()) - 1  # index 0 is the parking point
    assert f"park once {same}/16" in div.layout.title.text
    var = default_out[VAR]
    bars = _bars(var)
    assert list(bars) == list(app.VARIANT_LABELS)  # category order kept
    np.testing.assert_array_equal(list(bars.values()), study.table.rel_fro)
    np.testing.assert_array_equal(var.data[2].y, study.table.bound_rel_fro)
    cap = default_out[CAP]
    k3 = _bars(cap, "x")
    assert list(k3) == list(study.memory_k3.labels)
    np.testing.assert_array_equal(list(k3.values()), study.memory_k3.capacity)
    tiny = _bars(cap, "x2")
    np.testing.assert_array_equal(list(tiny.values()), study.memory_tiny.capacity)
    rows = _rows(default_out[CAP_CSV])
    assert rows[1][:2] == ["kimi-k3", "native"] and len(rows) == 1 + 2 * 6
    assert _rows(default_out[DIV_CSV])[0][0] == "step"
    assert _rows(default_out[VAR_CSV])[1][0] == "int8 / key channel"
    assert _rows(default_out[HIST_CSV])[0] == ["series", "bin_center", "count"]


def test_other_variant_text_and_history(monkeypatch):
    out = app.run(
        "前缀命中不等于状态命中。" * 3,
        30,
        "fp8-e4m3 / key channel",
        2,
        3,
        8,
        "float32",
        4,
        2.0,
        history=[[1, 64, "x", "", "", ""]],
    )
    ref = st.int8_study(
        "前缀命中不等于状态命中。" * 3, 30, "fp8_e4m3", "channel", 2, 3, 8, "float32", 4, 2.0
    )
    np.testing.assert_array_equal(out[ERR].data[1].z, ref.errors.error)
    assert "(KDA layer 2, head 3)" in out[ERR].layout.annotations[0].text
    assert out[DIV].data[0].x.size == 9
    assert "fp8-e4m3 / key channel" in out[SUMMARY] and "kimi-k3 TP4, 2 GiB" in str(
        out[CAP].layout.annotations
    )
    assert len(out[HISTORY]) == 2 and out[HISTORY][1][0] == 2
    monkeypatch.setattr(app, "MAX_HISTORY", 2)
    many = []
    for _ in range(3):
        many = app.run(history=many)[HISTORY]
    assert [h[0] for h in many] == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": ""}, "text must be non-empty"),
        ({"text": "x" * 4001}, "text must be 1 to 4000 characters, got 4001"),
        (
            {"n_tokens": 0},
            f"tokens to park (≤ the text's UTF-8 bytes) must be an integer in [1, {N_MAX}], got 0",
        ),
        ({"text": "a" * 2000, "n_tokens": 1025}, "must be an integer in [1, 1024], got 1025"),
        ({"text": "abc", "n_tokens": 4}, "must be an integer in [1, 3], got 4"),
        ({"variant": "int4"}, "format must be one of"),
        ({"layer": 6}, "KDA layer must be an integer in [0, 5], got 6"),
        ({"head": -1}, "head must be an integer in [0, 3], got -1"),
        ({"steps": 65}, "tokens to decode must be an integer in [1, 64], got 65"),
        ({"native_dtype": "fp16"}, "native state dtype must be one of"),
        ({"tp": 5}, "TP must divide Kimi K3's 96 KDA heads; got TP=5"),
        ({"budget_gib": 0}, "checkpoint budget (GiB) must be a number in [0.01, 4096], got 0"),
        ({"n_tokens": None}, f"must be an integer in [1, {N_MAX}], got an empty field"),
    ],
)
def test_bad_inputs_raise_gr_error(kwargs, message):
    with pytest.raises(gr.Error) as e:
        app.run(**kwargs)
    assert message in e.value.message


def test_api_names():
    cfg = app.build().get_config_file()
    public = [d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"]
    assert public == ["int8_checkpoint_run"]


def test_client_roundtrip_and_sessions(tmp_path, study):
    from gradio_client import Client

    with common.launched(app.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(api_name="/int8_checkpoint_run")
        assert len(out) == 13 and "Greedy continuation after the restore" in out[12]
        fig = common.plot_from_client(out[1])
        np.testing.assert_array_equal(np.array(fig["data"][1]["z"]), study.errors.error)
        assert _rows(out[10])[1][:2] == ["kimi-k3", "native"]
        out2 = c.predict(variant="int8 / tensor", api_name="/int8_checkpoint_run")
        assert "| 2 | 64 | int8 / tensor |" in out2[11]
        other = Client(url, verbose=False, download_files=str(tmp_path))
        assert "| 2 |" not in other.predict(api_name="/int8_checkpoint_run")[11]
        # a value outside the slider's own range fails in Gradio's preprocessing (400)
        with pytest.raises(Exception, match=r"KDA layer must be an integer|maximum|Bad Request"):
            c.predict(layer=9, api_name="/int8_checkpoint_run")
        with pytest.raises(Exception, match=r"TP must divide"):
            c.predict(tp=7, api_name="/int8_checkpoint_run")
        out3 = c.predict(api_name="/int8_checkpoint_run")  # still working after the errors
        assert "| 3 | 64 | int8 / key channel |" in out3[11]


def test_palette_ticks_and_wording(default_out, study):
    """Formats / runs are categorical (SERIES in order); log axes have no stray minor labels;
    the bound is stated as a ratio, not as a Python bool."""
    var = default_out[VAR]
    assert [t.marker.color for t in var.data[:2]] == [app.SERIES[0], app.SERIES[1]]
    assert var.data[1].name.endswith("selected: int8 / key channel")
    assert list(var.data[1].x) == ["int8 / key channel"]
    ticks = list(var.layout.yaxis.tickvals)
    assert all(round(v / 10 ** np.floor(np.log10(v)), 9) in (1, 2, 5) for v in ticks)
    vals = np.concatenate([study.table.rel_fro, study.table.bound_rel_fro])
    assert ticks[0] <= vals.min() and ticks[-1] >= vals.max()
    assert app.ticks_125(0.0017, 0.045) == [0.001, 0.002, 0.005, 0.01, 0.02, 0.05]
    div = default_out[DIV]
    assert div.data[0].line.color == app.SERIES[0] and div.data[2].line.color == app.SERIES[1]
    assert default_out[HIST].layout.yaxis.dtick == 1
    assert default_out[ERR].data[1].colorscale == default_out[ERR].data[0].colorscale
    cap = default_out[CAP]
    assert {t.marker.color for t in cap.data} == {app.COLORS["checkpoint"], app.SERIES[1]}
    assert "True" not in default_out[SUMMARY]


def test_table_and_error_map_round_the_bound_ratio_alike(default_out, study):
    """Both say max error / bound to 4 decimals, rounded away from 1: the table's ratio (all
    layers, 0.99995 in the default run) reads 0.9999, never "1" beside "(≤ 1)"."""
    r, e = study.table.max_bound_ratio[0], study.errors.max_bound_ratio
    assert 0.99995 <= r < 1 and e < 1  # the default run: "1" at 4 significant digits
    table = f"max error / bound {int(r * 10_000) / 10_000:.4f} (≤ 1: within the bound)"
    assert table == "max error / bound 0.9999 (≤ 1: within the bound)"
    assert table in default_out[SUMMARY] and "bound 1 (" not in default_out[SUMMARY]
    title = default_out[ERR].layout.title.text
    assert f"max error / bound {int(e * 10_000) / 10_000:.4f} (≤ 1" in title
    assert app.bound_ratio(0.99994) == "0.9999" and app.bound_ratio(1.00001) == "1.0001"
    assert app.bound_ratio(1.0) == "1.0000" and app.bound_ratio(0.5) == "0.5000"


@pytest.mark.parametrize("field", ["n_tokens", "steps", "tp", "layer"])
def test_non_integers_are_rejected(field):
    with pytest.raises(gr.Error, match=r"must be an integer in .*got 3\.5"):
        app.run(**{field: 3.5})


def test_number_fields_do_not_round():
    cfg = app.build().get_config_file()
    nums = [c for c in cfg["components"] if c["type"] == "number"]
    assert len(nums) == 4 and all(c["props"].get("precision") is None for c in nums)


def test_the_continuation_decodes_the_tokens_the_heading_says():
    """ "Tokens to decode after restore" = 5: the divergence heading and the continuation both
    say 5 tokens (the continuation once used at least 32, silently)."""
    out = app.run(steps=5)
    c = out[HISTORY + 1]
    assert "Decoding 5 tokens after the restore" in out[DIV].layout.title.text
    assert "identical for all 5 tokens" in c or "of 5, marked" in c
    from kda_core.studies import quality

    five = quality.continuation(st.DEFAULT_TEXT, 64, "int8", "channel", 5)
    assert len(five.exact) == 5
    assert f"| exact checkpoint | {app.table_cell(''.join(five.exact_pieces))} |" in c


def test_continuations_side_by_side_with_the_first_difference_marked(default_out):
    from kda_core.studies import quality

    md = default_out[HISTORY + 1]
    c = quality.continuation(st.DEFAULT_TEXT, 64, "int8", "channel", 16)  # the 16 steps decoded
    assert "Greedy continuation after the restore" in md and "int8 / key channel" in md
    assert app.table_cell("".join(c.exact_pieces)) in md.replace("<mark><b>", "").replace(
        "</b></mark>", ""
    )
    if c.first_divergence is None:
        assert "identical for all 16 tokens" in md and "<mark>" not in md
    # a made-up divergence is marked at its token, in the compressed row only
    fake = quality.Continuation("x", "tail", (97, 98), (97, 99), ("a", "b"), ("a", "c"), 1)
    en = app.MSG.lang("English")
    out = app.continuation_markdown(fake, en)
    assert "first difference at token 2 of 2" in out
    assert "| exact checkpoint | a<mark><b>b</b></mark> |" in out
    assert "| x | a<mark><b>c</b></mark> |" in out
    pipes = quality.Continuation("y", "t", (124,), (124,), ("|",), ("|",), None)
    assert "| y | &#124; |" in app.continuation_markdown(pipes, en)  # a pipe cannot break the table
