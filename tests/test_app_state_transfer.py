"""apps.state_transfer: callbacks draw exactly what kda_core.studies.transfer returns; bad
inputs raise gr.Error; the language switch re-draws figures and tables."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import state_transfer as app
from apps import ui as common
from kda_core.studies import transfer as st


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def pd_out():
    return app.run_pd()


def test_pd_draws_the_study(pd_out):
    f_an, c_an, meta, f_tl, c_tl, summary, (a, r) = pd_out
    np.testing.assert_array_equal(f_an.data[0].y, a.k3_bytes)
    np.testing.assert_array_equal(f_an.data[1].y, a.tiny_bytes)
    # K3 per GPU at TP8 in bf16: 69 layers x 12 heads x 128 x 128 x 2 B (the K3 write-up's 25.9 MB)
    assert a.k3_bytes[1] == 69 * 12 * 128 * 128 * 2
    assert f_an.layout.yaxis.type == "log"
    assert _rows(c_an)[0] == ["part", "k3_bytes_per_gpu", "tiny_bytes"]
    assert "`kda-state-object`" in meta and "`tokenizer_fingerprint`" in meta
    ev = r.events
    assert sum(len(tr.x) for tr in f_tl.data) == len(ev)
    assert sorted(c[3] for tr in f_tl.data for c in tr.customdata) == sorted(e.boundary for e in ev)
    assert len(_rows(c_tl)) == 1 + len(ev)
    assert r.max_dlogit <= 1e-9 and r.tokens == r.reference_tokens
    assert r.restore_at == r.prompt_len - 1 and r.source == "store"
    assert f"at token {r.restore_at}" in summary and "identical to one instance" in summary


def test_mismatch_table_names_every_field():
    md, m = app.run_mismatch()
    assert m.fields == (
        "model_fingerprint",
        "tokenizer_fingerprint",
        "layout",
        "corrupt",
        "truncated",
        "format",
    )
    assert all(m.served_ok)
    for f in m.fields:
        assert f"`{f}`" in md
    assert md.count("✓") == len(m.kinds)


def test_splice_figure_is_the_study():
    fig, path, d = app.run_splice(n_new=6)
    np.testing.assert_array_equal(fig.data[1].y, np.maximum(d.drift_splice, 1e-17))
    assert d.refused_field == "boundary"
    assert d.drift_clean.max() <= 1e-9 < 1e-3 < d.drift_splice.min()
    assert len(_rows(path)) == 1 + 6


def test_tiers_figure_is_the_study():
    fig, path, _note, r = app.run_tiers(300, 8, 2.0)
    np.testing.assert_array_equal(fig.data[0].y, r.state_hit_rate)
    np.testing.assert_array_equal(fig.data[1].y, r.ttft_mean_s)
    np.testing.assert_allclose(fig.data[3].y, r.bytes_loaded[:, 1] / 1e9)
    assert r.n_requests == 300 and r.host_ckpts == 16
    assert _rows(path)[0][:3] == ["setup", "state_hit_rate", "ttft_mean_s"]


def test_tiers_say_why_host_adds_nothing_in_both_languages():
    """Default tiers (1000 requests, 16 device checkpoints, ratio 2): "+ host" has the device
    only hit rate, 0 host hits and 0 bytes loaded; the note says why (the host keeps only
    each request's last state, 32 of them: round(16 × 2)); with ratio 64 the host restores."""
    fig, _, note, r = app.run_tiers(1000, 16, 2.0)
    assert r.setups[1] == "device+host" and r.host_ckpts == 32
    assert r.state_hit_rate[1] == r.state_hit_rate[0] and r.hits[1, 1] == 0
    assert r.bytes_loaded[1].tolist() == [0, 0] and r.bytes_written[1, 0] > 0
    written = int(r.bytes_written[1, 0]) // 29_039_616  # K3 TP8 checkpoint bytes (sim.tiers)
    assert note.startswith("**Why “+ host” adds nothing here:** the host keeps only each")
    assert f"32 of them at this ratio. {written:,} were written" in note
    zh = app.run_tiers(1000, 16, 2.0, language="中文")
    assert zh[2].startswith("**为什么“+ 主机”在这里毫无收益：**") and "最多 32 个" in zh[2]
    assert list(zh[0].data[0].x) == ["仅设备", "+ 主机", "+ 远端"]
    assert [d.name for d in zh[0].data[2:]] == ["主机", "远端"]
    assert "host" not in str(zh[0].layout.title.text) + zh[2]
    _, _, some, r64 = app.run_tiers(300, 8, 64)
    assert r64.hits[1, 1] > 0
    assert some.endswith(
        f"512 of them at this ratio: {int(r64.hits[1, 1]):,} requests restored from it."
    )


@pytest.mark.parametrize(
    "call, msg",
    [
        (lambda: app.run_pd(text=""), "prompt must be 1 to 2,000 characters"),
        (lambda: app.run_pd(n_new=0), "new tokens must be an integer in [1, 64]"),
        (lambda: app.run_pd(tp=7), "TP must divide"),
        (
            lambda: app.run_pd(text="x" * 3000),
            "got 3,000 characters",
        ),
        (lambda: app.run_splice(text_b="System: you are"), "prompt B must differ"),
        (lambda: app.run_tiers(n_requests=5), "trace requests must be an integer in [100, 12031]"),
        (lambda: app.run_tiers(host_ratio=0), "host / device ratio"),
    ],
)
def test_bad_inputs_raise_gr_error(call, msg):
    with pytest.raises(gr.Error, match=msg.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_language_switch_redraws(pd_out):
    view = pd_out[-1]
    t = app.MSG.lang(common.LANGS[1])
    out = app.draw_pd(view, t)
    assert "小模型" in out[0].data[1].name and "传输时间线" in out[3].layout.title.text
    assert "decode 从" in out[5]
    tiers = app.draw_tiers(app.compute_tiers(300, 8, 2.0), t)
    assert "状态层级" in tiers[0].layout.title.text
    back = app.draw_pd(view, app.MSG.lang(common.LANGS[0]))
    assert "tiny model" in back[0].data[1].name


def test_build_names_its_actions():
    cfg = app.build().get_config_file()
    names = {d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"}
    actions = ("pd", "mismatch", "splice", "tiers", "hits", "hits_explain")
    assert names == {f"state_transfer_{x}" for x in actions}
    assert st.MAX_NEW == 64


def _invalid(results: list[dict]) -> dict[int, str]:
    return {i: r["message"] for i, r in enumerate(results) if not r["is_valid"]}


def test_validators_name_the_bad_input_before_the_callback_runs():
    text = st.DEFAULT_TEXT
    assert _invalid(app.PD_CHECKS(text, 16, 8, "English")) == {}
    assert _invalid(app.PD_CHECKS("", 0, 8, "English")) == {
        0: "prompt must be 1 to 2,000 characters (at least 4 UTF-8 bytes), got an empty field",
        1: "new tokens must be an integer in [1, 64], got 0",
    }
    assert _invalid(app.PD_CHECKS(text, 16, 7, "English")) == {
        2: "TP must divide K3's 96 KDA heads, got 7"
    }
    assert _invalid(app.MISMATCH_CHECKS("abc", "English")) == {
        0: "prompt must be 1 to 2,000 characters (at least 4 UTF-8 bytes), got 3 bytes"
    }
    # text B equal to A within their common length is no splice: refused on text B (input 1)
    assert _invalid(app.SPLICE_CHECKS(text, text, 16, "English")) == {
        1: "prompt B must differ from the prompt within their common length"
    }
    assert _invalid(app.SPLICE_CHECKS(text, "", 16, "English")) == {}  # empty = A reversed
    bad = _invalid(app.TIER_CHECKS(5, 16, 0, "English"))
    assert sorted(bad) == [0, 2] and "[100, 12031]" in bad[0] and "host / device" in bad[2]


def test_switch_before_any_run_translates_the_placeholders():
    md, m = app.run_mismatch(language=common.LANGS[1])
    assert md.startswith("| 不匹配 | 拒绝字段 |") and "权重不同" in md and "`layout`" in md
    zh = app.MSG.lang(common.LANGS[1])
    assert zh("mis_placeholder") == "*请按“交给不匹配的实例”。*"


def test_metadata_values_cut_with_their_length_closed(pd_out):
    """A long header value is cut with its full length in closed parentheses."""
    meta = pd_out[2]
    rows = [ln for ln in meta.splitlines() if ln.startswith("| `")]
    assert rows and all(ln.count("(") == ln.count(")") for ln in rows)
    cut = [ln for ln in rows if "…" in ln]
    assert cut and all(" chars)" in ln for ln in cut)
    zh = app.metadata_markdown(st.anatomy(), app.MSG.lang(common.LANGS[1]))
    zh_cut = [ln for ln in zh.splitlines() if "…" in ln]
    assert len(zh_cut) == len(cut) and all("个字符）" in ln and "chars" not in ln for ln in zh_cut)


def test_timeline_events_never_hide_each_other(pd_out):
    """fetch, lookup and restore happen at one boundary within a millisecond: each kind has its
    own lane, so no marker covers another (the fetch marker was hidden under the others)."""
    fig = pd_out[3]
    seen: dict[tuple, str] = {}
    for tr in fig.data:
        for x, y in zip(tr.x, tr.y):
            key = (round(float(x), 6), str(y))
            assert key not in seen, f"{tr.name} covers {seen.get(key)}"
            seen[key] = tr.name
    lanes = {tr.name: set(map(str, tr.y)) for tr in fig.data}
    assert all(len(v) == 1 for v in lanes.values())  # one lane per kind
    assert len({next(iter(v)) for v in lanes.values()}) == len(lanes)
    r = pd_out[-1][1]
    shown = [b for tr in fig.data for lab in tr.text if lab for b in lab.split(", ")]
    assert sorted(shown) == sorted(str(e.boundary) for e in r.events)  # boundaries still shown
    span = max(x for tr in fig.data for x in tr.x)
    for tr in fig.data:  # publishes a millisecond apart share one label instead of overprinting
        at = [x for x, lab in zip(tr.x, tr.text) if lab]
        assert all(b - a >= 0.06 * span for a, b in zip(at, at[1:])), tr.name
