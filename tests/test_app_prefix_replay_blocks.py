"""prefix_replay's vLLM block-table panel: it draws ``studies.block_table`` (the seed's two
partial hits, a physical block serving two prefixes), refuses bad input on its field, and its
catalog shadows none of the app's messages."""

from __future__ import annotations

import csv

import gradio as gr
import pytest

from apps.prefix_replay import blocks as panel
from words.prefix_replay import MSG
from words.prefix_replay_batch import BATCH
from words.prefix_replay_blocks import BLOCKS


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_96_of_128_drawn():
    md, blocks, blocks_csv, hit, hit_csv = panel.serve_two()
    assert md.startswith("**B resumes at token 96**") and "resume at **0**" in md
    # KV block #1 holds two prefix keys, [0, 96) and [0, 128): one column, two markers
    kv = blocks.data[0]
    one = [y for x, y in zip(kv.x, kv.y) if x == "#1"]
    assert sorted(one) == [96, 128]
    assert any("2 prefixes" in a.text for a in blocks.layout.annotations)
    bars = {tr.y[0]: tr.x[0] for tr in hit.data}
    assert bars == {
        "hit, keys per block": 0,
        "hit, keys every 32 tokens": 96,
        "B shares with A": 120,
    }
    assert _rows(hit_csv)[1:] == [["coarse_hit", "0"], ["fine_hit", "96"], ["shared", "120"]]
    assert ["1", "0", "96", "False"] in _rows(blocks_csv)[1:]


def test_4480_inside_4096_drawn():
    v = panel.case_values("4,480 inside 4,096-token blocks")
    assert v == [4096, 64, 4481, 2, 4480]
    md = panel.serve_two(*v)[0]
    assert "token 4,480" in md and "resume at **4,096**" in md and "entry 1 of" in md


@pytest.mark.parametrize(
    "kw, field, index",
    [
        ({"unit": 48}, "must divide the block size 128", 1),
        ({"shared": 500}, "at most A's 137 tokens", 4),
        ({"block_size": 8}, "block size", 0),
        ({"outputs": 257}, "decoded tokens", 3),
        ({"prompt": 1.5}, "prompt tokens", 2),
    ],
)
def test_bad_input_is_refused_on_its_field(kw, field, index):
    with pytest.raises(gr.Error, match=field):
        panel.serve_two(**kw)
    values = {"block_size": 128, "unit": 32, "prompt": 97, "outputs": 40, "shared": 120, **kw}
    res = panel.validator()(*values.values(), "English")
    assert [i for i, r in enumerate(res) if not r["is_valid"]] == [index]


def test_the_panels_messages_shadow_none_of_the_apps():
    assert not set(BLOCKS.own) & (set(MSG.own) | set(BATCH.own))
