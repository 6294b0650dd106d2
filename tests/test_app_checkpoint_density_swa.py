"""checkpoint_density's SWA-vs-KDA panel: it draws ``studies.swa_vs_kda``'s numbers, refuses
bad input on its field, and its catalog shadows none of the app's own messages."""

from __future__ import annotations

import csv

import gradio as gr
import pytest

from apps.checkpoint_density import swa as panel
from kda_core.studies import swa_vs_kda as sk
from words.checkpoint_density import MSG
from words.checkpoint_density_swa import SWA


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def out():
    return panel.compare()


def test_the_panel_draws_the_studys_numbers(out):
    md, cost, cost_csv, resume, resume_csv = out
    costs = sk.checkpoint_costs(windows=(64, 128, 512, 1024, 4096, 16384))
    # the SWA line is W tokens' K/V, the KDA line one state + conv window, equal at 132.5
    swa, kda = cost.data
    assert list(swa.x) == [64, 128, 512, 1024, 4096, 16384]
    assert swa.y[3] * (1 << 30) == pytest.approx(costs.swa_window_bytes[3])
    assert set(kda.y) == {costs.kda_checkpoint_bytes / (1 << 30)}
    assert "132.5" in md and "428.6 MiB" in md
    # the chat workload's replay at k = 256 / 1,024 / 4,096 (docs/swa_vs_kda.md)
    replay = {tr.name: list(tr.y) for tr in resume.data[:3]}
    assert list(replay.values()) == [
        [19_328, 90_752, 483_136],
        [19_328, 90_752, 210_304],
        [24_896, 107_328, 483_136],
    ]
    assert "| 4,096 | 495,616 | 495,616 | 483,136 | 210,304 | 483,136 |" in md
    assert _rows(resume_csv)[0][:4] == ["interval", "swa_resume", "kda_resume", "swa_replay"]
    assert [r[0] for r in _rows(cost_csv)[1:]] == ["64", "128", "512", "1024", "4096", "16384"]


def test_fewer_kv_heads_move_the_crossover():
    md = panel.compare("chat", "1024", 1024, 8)[0]
    assert "1,590.0" in md  # 96 query heads over 8 K/V heads: 12x the window for one state


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"intervals": "100"}, "64"),
        ({"intervals": "64, x"}, "checkpoint interval k"),
        ({"intervals": ", ".join(["64"] * 7)}, "1 to 6"),
        ({"window": 1000}, "64"),
        ({"window": 1 << 20}, "SWA window W"),
        ({"kv_heads": 97}, "SWA K/V heads"),
        ({"workload": "documents"}, "requests"),
    ],
)
def test_bad_input_is_refused_naming_the_field(kw, field):
    with pytest.raises(gr.Error, match=field):
        panel.compare(**kw)
    names = ["workload", "intervals", "window", "kv_heads"]
    values = {"workload": "chat", "intervals": "256", "window": 1024, "kv_heads": 96, **kw}
    res = panel.validator()(*(values[n] for n in names), "English")
    bad = [n for n, r in zip(names, res) if not r["is_valid"]]
    assert bad == list(kw)


def test_the_panels_messages_shadow_none_of_the_apps():
    assert not set(SWA.own) & set(MSG.own)
