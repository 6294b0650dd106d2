"""unified_memory's ratio-calculator panel: it draws ``studies.calculator``, refuses bad input
on its field, and its catalog shadows none of the app's messages."""

from __future__ import annotations

import gradio as gr
import pytest

from apps.unified_memory import calculator as panel
from words.unified_memory import MSG
from words.unified_memory_calculator import CALC


@pytest.fixture(scope="module")
def out():
    return panel.compare()


def test_the_panel_draws_the_studys_numbers(out):
    md, running, _csv, slots, _csv2 = out
    promised, kept, live = (list(tr.y) for tr in running.data)
    # Kimi K3 TP8 (tests/test_studies_calculator.py derives these from the bytes)
    assert promised == [84, 73, 57, 40, 25, 14, 7]
    assert kept == [84, 73, 57, 33, 15, 5, 1]
    assert live == [84, 73, 57, 37, 22, 12, 6]
    assert list(slots.data[1].y) == [5, 5, 5, 6, 8, 12, 20]
    assert "| 65,536 | 0.153 | 14 | 9 | 12 | 5 | 0.366 | 12 |" in md
    assert "**2,032 tokens**" in md


def test_the_cap_and_the_strategy_reach_the_study():
    md = panel.compare(max_states_per_path=3, strategy="extra_buffer_lazy")[0]
    assert "S = **4** reserved" in md and "states per path 3" in md
    assert "| 131,072 |" in md and "| 3 | 6 |" in md


@pytest.mark.parametrize(
    "kw, field, index",
    [
        ({"input_lens": "4096, x"}, "input length", 0),
        ({"input_lens": ""}, "1 to 12", 0),
        ({"output_len": -1}, "output length", 1),
        ({"chunked_prefill_size": 100}, "chunked prefill size", 2),
        ({"max_states_per_path": 65}, "--mamba-max-states-per-path", 3),
        ({"strategy": "radix_off"}, "cache strategy", 4),
    ],
)
def test_bad_input_is_refused_on_its_field(kw, field, index):
    with pytest.raises(gr.Error, match=field):
        panel.compare(**kw)
    values = {
        "input_lens": "4096",
        "output_len": 1024,
        "chunked_prefill_size": 8192,
        "max_states_per_path": 0,
        "strategy": "extra_buffer",
        **kw,
    }
    res = panel.validator()(*values.values(), "English")
    assert [i for i, r in enumerate(res) if not r["is_valid"]] == [index]


def test_the_panels_messages_shadow_none_of_the_apps():
    assert not set(CALC.own) & set(MSG.own)
