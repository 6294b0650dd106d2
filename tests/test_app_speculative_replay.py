"""apps.speculative_replay: the callbacks against the speculative study, bad inputs, the API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import speculative_replay as app
from apps import ui as common
from kda_core.studies import speculative as sp

SUMMARY, VER, VER_CSV, RING, RING_CSV, EXACT, EXACT_CSV, MEM, MEM_CSV = range(9)
HIST_MD, HISTORY = 9, 10


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def default_out():
    return app.verify()


@pytest.fixture(scope="module")
def study():
    return sp.verify_step()


def test_summary_and_history(default_out, study):
    s = default_out[SUMMARY]
    a = study.natural_accept
    assert study.n_accept == a and 0 < a < 8  # the worked default accepts a strict prefix
    assert f"| committed | {a}<br><small>greedy acceptance {a}</small> |" in s
    assert f"| max commit error | {study.commit_error.max():.1e}<br>" in s
    mem = sp.memory_over_d(tuple(range(1, 17)))
    ring = f"{mem.deploy_ring_bytes / (1 << 30):.2f} GiB"
    assert f"| K3 deployment: rings, all slots | {ring}<br><small>120 slots, D=8</small> |" in s
    assert default_out[HISTORY] == [[1, 8, a, a, f"{study.commit_error.max():.1e}"]]


def test_verify_figure(default_out, study):
    fig = default_out[VER]
    acc, rej = fig.data[0], fig.data[1]
    a = study.n_accept
    assert acc.name.startswith("committed") and list(acc.x) == list(range(a))
    assert list(rej.x) == list(range(a, 8))
    np.testing.assert_array_equal(fig.data[2].customdata, study.ring_norms)
    assert list(fig.data[2].y) == list(sp.FIELDS)
    rows = _rows(default_out[VER_CSV])
    assert rows[0][:4] == ["step", "input", "target", "committed"] and len(rows) == 9
    assert [r[3] for r in rows[1:]] == ["True"] * study.n_accept + ["False"] * (8 - study.n_accept)


def test_ring_figure_keeps_the_accepted_slots(default_out, study):
    fig = default_out[RING]
    rows = _rows(default_out[RING_CSV])
    after = {int(r[1]): (int(r[2]), r[3]) for r in rows[1:] if r[0] == "after commit"}
    kept = {s: p for s, (p, k) in after.items() if k == "accepted step"}
    L, a, p0 = study.ring_len, study.n_accept, study.prompt_tokens
    assert kept == {(p0 + j) % L: p0 + j for j in range(a)}  # slot = position mod L
    verify = [r for r in rows[1:] if r[0] == "after verify" and r[3] == "rejected step"]
    assert sorted(int(r[2]) for r in verify) == list(range(p0 + a, p0 + 8))
    assert len(rows) == 1 + 2 * study.ring_len
    names = [t.name for t in fig.data]
    assert names.count("empty") == 2 and sum(t.showlegend is not False for t in fig.data) == 3
    title = fig.layout.title.text.replace("<br>", " ")  # wrapped to fit: apps/ui/fonts.py
    assert f"conv window kept: after step {study.n_accept - 1}" in title


def test_exactness_and_memory(default_out, study):
    ex = default_out[EXACT]
    np.testing.assert_array_equal(ex.data[2].customdata, study.commit_error)
    assert study.commit_error.max() < 1e-13 < 1e-4 < study.fold_bf16_error[1:].min()
    mem = sp.memory_over_d(tuple(range(1, 17)))
    m = default_out[MEM]
    np.testing.assert_array_equal(m.data[0].y, mem.per_draft_state_bytes[0] / (1 << 20))
    np.testing.assert_array_equal(m.data[4].y, mem.ring_bytes[1] / (1 << 20))
    assert f"×{mem.ratio[1][7]:.1f} at D=8 for K3" in m.layout.title.text
    rows = _rows(default_out[MEM_CSV])
    assert len(rows) == 1 + 2 * 16 and rows[17][0] == "kimi-k3"


def test_pick_the_acceptance_count():
    out = app.verify(n_accept=6, draft_tokens=6, layer=2, head=1, ring_len=16)
    v = sp.verify_step(draft_tokens=6, n_accept=6, ring_len=16, layer=2, head=1)
    assert "| committed | 6<br>" in out[SUMMARY]
    assert [t.name for t in out[VER].data][:1] == ["committed (accepted prefix)"]
    np.testing.assert_array_equal(out[VER].data[-1].customdata, v.ring_norms)
    none = app.verify(n_accept=0)
    assert "nothing accepted" in none[RING].layout.title.text
    big = app.verify(draft_tokens=20)
    assert big[MEM].data[0].x[-1] == 20  # the D axis reaches the chosen D


def test_generate_equals_greedy():
    md, fig, path = app.generate(max_new_tokens=12, progress=None)
    g = sp.generation(sp.DEFAULT_PROMPT, 12, draft_tokens=8, noise=0.3, seed=2)
    assert g.equals_greedy and "equal to greedy: **True**" in md
    np.testing.assert_array_equal(fig.data[0].y, g.committed)
    assert g.tokens.size == 12 and int(np.sum(fig.data[0].y)) >= 11  # + the prefill token
    assert _rows(path)[0] == ["verify_step", "start", "drafted", "accepted", "committed"]


def test_acceptance_vs_noise():
    fig, path = app.acceptance(max_new_tokens=8, progress=None)
    a = sp.acceptance_vs_noise(app.NOISES, sp.DEFAULT_PROMPT, 8, draft_tokens=8, seed=2)
    assert list(fig.data[0].x) == list(app.NOISES) and fig.data[0].y[0] == 1.0  # perfect draft
    np.testing.assert_array_equal(fig.data[0].y, a.acceptance_rate)
    np.testing.assert_array_equal(fig.data[1].y, a.tokens_per_step / 8)
    assert "every run equals greedy: True" in fig.layout.title.text
    assert _rows(path)[0] == ["noise", "acceptance_rate", "tokens_per_step"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt": ""}, "prompt must be non-empty (1 to 512 UTF-8 bytes)"),
        ({"prompt": "好" * 171}, "prompt must be 1 to 512 UTF-8 bytes, got 513"),
        ({"draft_tokens": 0}, "draft tokens D must be an integer in [1, 64], got 0"),
        ({"n_accept": 9}, "accepted tokens (-1 = greedy, 0-8) must be an integer in [-1, 8]"),
        ({"noise": -0.1}, "draft noise must be a number in [0, 10], got -0.1"),
        ({"seed": 1.5}, "seed must be an integer in [0, 1000000], got 1.5"),
        ({"layer": 6}, "KDA layer must be an integer in [0, 5], got 6"),
        (
            {"ring_len": 12},
            "ring length L must be 0 (auto) or a power of two in [2D, 1024] = [16, 1024], got 12",
        ),
        ({"ring_len": 8}, "got 8"),
    ],
)
def test_bad_inputs_raise_gr_error(kwargs, message):
    with pytest.raises(gr.Error) as e:
        app.verify(**kwargs)
    assert message in e.value.message


def test_generate_bad_input():
    with pytest.raises(gr.Error, match=r"tokens to generate must be an integer in \[1, 128\]"):
        app.generate(max_new_tokens=500, progress=None)
    with pytest.raises(gr.Error, match=r"draft noise must be a number in \[0, 10\]"):
        app.generate(noise=11, progress=None)
    with pytest.raises(gr.Error, match=r"seed must be an integer"):
        app.acceptance(seed=-1, progress=None)


def test_api_names():
    cfg = app.build().get_config_file()
    public = [d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"]
    assert public == [
        "speculative_replay_verify",
        "speculative_replay_generate",
        "speculative_replay_acceptance",
        "speculative_replay_hits",
    ]


def test_client_roundtrip_and_sessions(tmp_path, study):
    from gradio_client import Client

    with common.launched(app.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(api_name="/speculative_replay_verify")
        assert len(out) == 10
        fig = common.plot_from_client(out[1])
        assert fig["data"][0]["x"] == list(range(study.n_accept))
        assert _rows(out[4])[0] == ["stage", "slot", "position", "kind"]
        out2 = c.predict(n_accept=5, api_name="/speculative_replay_verify")
        a = study.n_accept
        assert f"| 2 | 8 | {a} | 5 |" in out2[9]
        other = Client(url, verbose=False, download_files=str(tmp_path))
        history = other.predict(api_name="/speculative_replay_verify")[9].splitlines()
        assert [ln for ln in history if ln.startswith("| ")][-1].startswith("| 1 | 8 |")
        with pytest.raises(Exception, match=r"draft tokens D must be an integer in \[1, 64\]"):
            c.predict(draft_tokens=100, api_name="/speculative_replay_verify")
        out3 = c.predict(api_name="/speculative_replay_verify")  # still working
        assert f"| 3 | 8 | {a} | {a} |" in out3[9]
        gen = c.predict(max_new_tokens=8, api_name="/speculative_replay_generate")
        assert "equal to greedy: **True**" in gen[0]
        acc = c.predict(max_new_tokens=4, api_name="/speculative_replay_acceptance")
        assert common.plot_from_client(acc[0])["data"][0]["x"] == list(app.NOISES)


def test_palette_and_log_ticks(default_out, study):
    """Accepted / rejected are categorical: SERIES in order, never a semantic colour; the log
    axes label decades (or exact-zero) only, no stray minor "2" / "5"."""
    ver, ring = default_out[VER], default_out[RING]
    assert (ver.data[0].marker.color, ver.data[1].marker.color) == (app.SERIES[0], app.SERIES[1])
    colors = {t.name: t.marker.color for t in ring.data}
    assert colors["accepted step"] == app.SERIES[0] and colors["rejected step"] == app.SERIES[1]
    ex = default_out[EXACT].layout.yaxis
    assert ex.type == "log" and list(ex.tickvals) == list(app.EXACT_TICKS)
    assert ex.ticktext[0] == "0 (exact)" and ex.ticktext[2] == "10<sup>-12</sup>"
    mem = default_out[MEM].layout
    assert mem.yaxis.dtick == 1 and mem.yaxis2.dtick == 1 and mem.yaxis2.type == "log"
    label = [a for a in default_out[EXACT].layout.annotations if a.text.startswith("this commit")]
    assert label and label[0].x == study.n_accept  # at the line (linear x axis)


def test_tokens_shown_as_ids_and_escapes(default_out, study):
    s = default_out[SUMMARY]
    assert "\ufffd" not in s and f"~~{int(study.inputs[-1])}~~" in s
    md, _, _ = app.generate(max_new_tokens=12, progress=None)
    g = sp.generation(sp.DEFAULT_PROMPT, 12, draft_tokens=8, noise=0.3, seed=2)
    assert f"ids {', '.join(str(int(t)) for t in g.tokens[:12])} ·" in md
    assert "\ufffd" not in md and "shown as decoded text" in md and "以解码" not in md
    assert f"text {app.code(g.readable, 40)} ·" in md


@pytest.mark.parametrize("field", ["draft_tokens", "n_accept", "seed", "ring_len"])
def test_non_integers_are_rejected(field):
    with pytest.raises(gr.Error, match=r"must be an integer in .*got 3\.5"):
        app.verify(**{field: 3.5})
    cfg = app.build().get_config_file()
    nums = [c for c in cfg["components"] if c["type"] == "number"]
    assert nums and all(c["props"].get("precision") is None for c in nums)  # no silent rounding


def test_hits_panel_draws_the_study() -> None:
    """The hits panel's table and figure are ``studies.spec_hits`` for the flags given."""
    from kda_core.studies.spec_hits import spec_hits

    drop = {"method": "eagle", "num_speculative_tokens": 2, "n_predict": 1}
    drop["disable_lookahead_block_hashes"] = True
    want = spec_hits(speculative_config=drop, block_size=16)
    md, fig, path = app.hits("eagle", 2, 1, True, 16)
    # by hand: lengths 15 .. 65 around the blocks, drop: floor(n / 16) * 16 - 16, lost where
    # floor((n - 1) / 16) * 16 is more: 17, 31, 33, 47, 49, 63, 65 (16 tokens each)
    assert want.prompt_len.tolist() == [15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65]
    assert "**7 of 12** lengths lose cached tokens to drafts under vLLM (112 tokens in all)" in md
    assert "| 33 | 32 | 16 | lost to speculative decoding | 0 |" in md
    assert list(fig.data[1].y) == want.vllm.tolist()
    assert list(fig.data[0].y) == want.vllm_no_drafts.tolist()
    assert _rows(path)[0][:3] == ["prompt_len", "vllm_no_drafts", "vllm_drafts"]
    zh = app.hits("eagle", 2, 1, True, 16, language="zh")[0]
    assert "因推测解码而丢失" in zh
    with pytest.raises(gr.Error, match=r"num_speculative_tokens must be an integer in \[1, 16\]"):
        app.hits(num_speculative_tokens=17)
    with pytest.raises(gr.Error, match=r"vLLM block size must be an integer in \[16, 8192\]"):
        app.hits(block_size=8)
