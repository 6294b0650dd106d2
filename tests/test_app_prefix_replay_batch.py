"""apps.prefix_replay's batch view: several requests at once on one state pool."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import prefix_replay as app

SESSION = 14  # the state's position in the full render (see tests/test_app_prefix_replay.py)


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def default_out():
    return app.load_scenario(progress=None)


# ---- the batch view (several requests at once on one state pool) -------------------------
B_MD, B_PHASES, B_PHASES_CSV, B_POOL, B_POOL_CSV, B_POOLS, B_POOLS_CSV = range(7)
B_BORDER, B_BORDER_CSV, B_GRAPHS, B_GRAPHS_CSV, B_SESSION = range(7, 12)


@pytest.fixture(scope="module")
def batch_out(default_out):
    return app.serve_batch(session=default_out[SESSION], progress=None)


def test_batch_view_draws_what_serve_did(batch_out):
    from kda_core import sizing
    from kda_core.studies import batch_view as bv

    v = batch_out[B_SESSION].batch
    ref = bv.batch_view(list(bv.DEFAULT_PROMPTS), 8, list(bv.DEFAULT_ARRIVALS), state_slots=16)
    assert np.array_equal(v.phase, ref.phase) and np.array_equal(v.running, ref.running)
    # extra_buffer + overlap reserves 5 slots per request: 16 // 5 = 3 (sizing, SGLang's rule)
    assert v.max_running == sizing.max_running_requests(16, "extra_buffer") == 3
    assert v.peak_running == 3 and v.capped  # six requests: the cap bites
    assert "capped to 3 by the mamba state cache" in batch_out[B_MD]
    # swimlane: one lane per request, bars cover every step of every lane exactly once
    fig = batch_out[B_PHASES]
    lanes = {}
    for t in fig.data:
        lanes.setdefault(t.y[0], 0)
        lanes[t.y[0]] += int(t.x[0])
    assert lanes == {f"#{i + 1}": v.n_steps for i in range(6)}
    names = {t.name for t in fig.data}
    assert {"waiting", "prefill chunk", "decode", "finished"} <= names
    rows = _rows(batch_out[B_PHASES_CSV])
    assert rows[0] == ["request", "step", "phase"] and len(rows) == 1 + 6 * v.n_steps
    # pool over time: the three kinds stack to the pool size in every step
    pool = batch_out[B_POOL]
    stacked = [t for t in pool.data if t.stackgroup == "pool"]
    total = np.sum([np.asarray(t.y) for t in stacked], axis=0)
    assert np.all(total == 16)
    cap = [t for t in pool.data if t.name.startswith("max running requests")]
    assert cap and list(cap[0].y) == [3, 3] and "capped by the state pool" in cap[0].name
    # the pools panel: real concurrency at the batch's peak step
    right = [t for t in batch_out[B_POOLS].data if t.offsetgroup == "peak"]
    at = v.slots_at(v.peak_step)
    assert [int(t.y[0]) for t in right] == [at["running"], at["cached"], at["free"]]
    assert right[0].x[0] == f"step {v.peak_step}"
    assert batch_out[B_POOLS].layout.xaxis2.title.text == f"{v.peak_running} running / max 3"
    assert sum(int(t.y[0]) for t in right) == 16
    # the byte buffer is off by default: its figure says how to turn it on, no CSV button
    assert batch_out[B_BORDER_CSV]["visible"] is False and v.border is None
    assert batch_out[B_GRAPHS_CSV]["visible"] is True  # SGLang's capture list is on


def test_batch_in_chinese_and_bad_input(default_out):
    zh = app.serve_batch(session=default_out[SESSION], language="中文", progress=None)
    assert "同一个状态池随时间的变化" in zh[B_POOL].layout.title.text
    s = default_out[SESSION]
    bad = [
        ({"prompts": ""}, r"batch requests \(one per line\) must hold 1 to 12 non-empty lines"),
        ({"prompts": "\n".join("x" * 13)}, "must hold 1 to 12 non-empty lines, got 13"),
        ({"arrivals": "0, 1"}, r"arrival steps must give one step in \[0, 64\] per request"),
        ({"arrivals": "0,0,0,0,0,99"}, r"arrival steps must be .*\[0, 64\].*99"),
        ({"arrivals": "0,0,0,0,0,x"}, r"arrival steps must be integers in \[0, 64\]"),
        ({"max_new_tokens": 0}, r"max new tokens must be an integer in \[1, 32\]"),
        ({"state_slots": 4}, r"state slots must be an integer in \[5, 64\]"),
        ({"token_budget": 1000}, r"token budget per step must be an integer in \[8, 256\]"),
        ({"strategy": "radix_off"}, "strategy must be one of"),
        ({"kv_pool": -1}, r"KV pool in tokens \(0 = no limit\) must be an integer in \[0, 65536\]"),
        ({"kv_pool": 10**6}, r"KV pool in tokens \(0 = no limit\) must be .*got 1000000"),
        ({"arrivals": "0,0,0,0,0,-3"}, r"arrival steps must be an integer in \[0, 64\], got -3\b"),
    ]
    for kw, msg in bad:
        with pytest.raises(gr.Error, match=msg):
            app.serve_batch(**kw, session=s, progress=None)
    validate = app.pb.batch_validator()
    ok = validate("a\nb", "", 8, "extra_buffer", 16, 64, 0, 0, "1, 2", s, "English")
    assert all(v["is_valid"] for v in ok)
    out = validate("a\nb", "0", 8, "extra_buffer", 16, 64, 0, 0, "", s, "English")
    assert not out[1]["is_valid"] and "one step in [0, 64] per request (2)" in out[1]["message"]
    out = validate("a\nb", "", 8, "extra_buffer", 16, 64, -5, 0, "", s, "English")
    assert [v["is_valid"] for v in out[:7]] == [True] * 6 + [False]  # the KV pool's field
    assert "KV pool in tokens (0 = no limit) must be an integer in [0, 65536]" in out[6]["message"]


def test_a_small_kv_pool_retracts_and_rejects(default_out):
    """The KV pool field (the batch view shows retracted requests): the swimlane's
    retracted cells are the steps ``Engine.serve`` retracted in, the summary says why, and a
    request that can never fit the pool is rejected with SGLang's message while the others are
    served."""
    from kda_core.model import encode
    from kda_core.studies import batch_view as bv

    s = default_out[SESSION]
    out = app.serve_batch(max_new_tokens=16, kv_pool=200, session=s, progress=None)
    v = out[B_SESSION].batch
    ref = bv.batch_view(
        list(bv.DEFAULT_PROMPTS), 16, list(bv.DEFAULT_ARRIVALS), state_slots=16, kv_tokens=200
    )
    assert v.kv_tokens == 200 and np.array_equal(v.phase, ref.phase)
    retracted = bv.PHASES.index("retracted")
    assert int(v.retractions.sum()) >= 1 and (v.phase == retracted).sum() >= 1
    assert np.array_equal((v.phase == retracted).sum(axis=1) > 0, v.retractions > 0)
    assert "retracted" in {t.name for t in out[B_PHASES].data}
    md = out[B_MD]
    assert "KV pool 200 tokens" in md and f"retractions {int(v.retractions.sum())}" in md
    assert ", KV pool" not in app.serve_batch(session=s, progress=None)[B_MD]  # 0: no limit
    # a request needs its prompt + every new token but the last (loop.reject_message): the
    # longest prompt's 8 new tokens do not fit a pool one token short of that
    longest = max(len(encode(p)) for p in bv.DEFAULT_PROMPTS)
    pool = longest + 6
    out = app.serve_batch(kv_pool=pool, session=s, progress=None)
    v = out[B_SESSION].batch
    too_big = [i for i, p in enumerate(bv.DEFAULT_PROMPTS) if len(encode(p)) + 7 > pool]
    assert sorted(v.rejected) == too_big and too_big
    assert all("exceeds the KV cache capacity" in m for m in v.rejected.values())
    served = [i for i in range(6) if i not in too_big]
    assert all(v.finished_step[i] >= 0 for i in served)
    assert "rejected" in {t.name for t in out[B_PHASES].data}


def test_every_request_rejected_is_shown(default_out):
    """A KV pool smaller than every request (100 tokens, inside the field's range): each
    request is rejected with the SGLang-style message, the swimlane shows one rejected lane per
    request, the pool figure says it stayed empty, and nothing raises."""
    s = default_out[SESSION]
    out = app.serve_batch(kv_pool=100, session=s, progress=None)
    v = out[B_SESSION].batch
    assert v.n_steps == 0 and sorted(v.rejected) == list(range(6))
    md = out[B_MD]
    # said once: no request fits, the smallest pool that admits one, SGLang's message once
    assert "**No request fits a KV pool of 100 tokens**" in md
    assert f"is **{v.smallest_kv_pool} tokens** (request #" in md
    assert md.count("Requested token count exceeds") == 1 and "no cap" not in md
    assert "exceeds the KV cache capacity of 100 tokens" in v.rejected[0]
    fig = out[B_PHASES]
    assert {t.name for t in fig.data} == {"rejected"}
    assert sorted(t.y[0] for t in fig.data) == [f"#{i + 1}" for i in range(6)]
    rows = _rows(out[B_PHASES_CSV])
    assert rows[0] == ["request", "step", "phase"] and len(rows) == 1  # no step ran
    pool = out[B_POOL]
    notes = " ".join(a.text for a in pool.layout.annotations)
    assert "every request was rejected" in notes and f"{v.state_slots} free" in notes
    panel = " ".join(a.text for a in out[B_POOLS].layout.annotations)
    assert "every request was rejected" in panel


def test_a_pool_of_151_says_152_once(default_out):
    """The default batch on KV pools of 1 and 151 tokens: no step runs, and the summary says
    once that the smallest pool admitting a request is 152 tokens ("你好！": 145 prompt bytes
    and 8 new tokens but the last); 152 admits it; 1 token is singular."""
    s = default_out[SESSION]
    for pool in (1, 151):
        md = app.serve_batch(kv_pool=pool, session=s, progress=None)[B_MD]
        assert "The smallest KV pool that admits one is **152 tokens** (request #6)" in md
        assert md.count("rejected") == 0 and md.count("Requested token count") == 1
        assert "no cap" not in md and "0 steps" in md
    assert "KV pool 1 token ·" in app.serve_batch(kv_pool=1, session=s, progress=None)[B_MD]
    zh = app.serve_batch(kv_pool=151, session=s, language="中文", progress=None)[B_MD]
    assert "能接纳一个请求的最小 KV 池是 **152 个 token**（请求 #6）" in zh
    md = app.serve_batch(kv_pool=160, session=s, progress=None)[B_MD]
    assert "requests #1, #3, #4 rejected: their KV (171, 172, 171 tokens)" in md
    assert md.count("Requested token count") == 1


LONG = "\n".join(
    f"Req {i}: " + ("The quick brown fox jumps over the lazy dog. " * 12)[:500] for i in range(6)
)


def test_the_byte_buffer_and_the_index_table_are_drawn(default_out):
    """One byte buffer: the border figure stacks to the buffer in every step, its frontiers are
    the study's border, the waiting request is marked and named; the index table's cells carry
    the study's state indices, padding rows 0 (the sink)."""
    s = default_out[SESSION]
    out = app.serve_batch(
        prompts=LONG,
        strategy="extra_buffer_lazy",
        buffer_kib=4000,
        graph_sizes="1, 2, 4",
        session=s,
        progress=None,
    )
    v = out[B_SESSION].batch
    assert v.buffer_bytes == 4000 * 1024 and v.graph_bs == (1, 2, 4) and v.max_running == 4
    fig = out[B_BORDER]
    stacked = [t for t in fig.data if t.stackgroup == "buffer"]
    assert [t.name for t in stacked] == [
        "slots held by running requests",
        "cached checkpoints",
        "free gap",
        "MLA KV (tree + running requests)",
    ]
    total = np.sum([np.asarray(t.y) for t in stacked], axis=0)
    np.testing.assert_allclose(total, 4000.0)
    ends = {t.name: np.asarray(t.y) for t in fig.data if t.stackgroup is None}
    np.testing.assert_allclose(ends["state side ends"] * 1024, v.border[:, 0])
    np.testing.assert_allclose(ends["KV side begins"] * 1024, v.border[:, 1])
    held = np.flatnonzero(v.held_for_memory >= 0)
    marks = [t for t in fig.data if t.mode == "markers"]
    assert held.size and list(marks[0].x) == held.tolist()
    assert "waits for the buffer" in marks[0].hovertext[0]
    assert "waiting: memory full" in {t.name for t in out[B_PHASES].data}
    assert "One byte buffer of 4000 KiB" in out[B_MD] and "waited" in out[B_MD]
    rows = _rows(out[B_BORDER_CSV]["value"])
    assert rows[0][-4:] == ["state_bytes", "free_bytes", "kv_bytes", "buffer_bytes"]
    heat = next(t for t in out[B_GRAPHS].data if t.type == "heatmap")
    text = np.asarray(heat.text)
    steps = np.flatnonzero(v.graph_padded)
    assert steps.size and set(v.graph_padded[steps].tolist()) <= {1, 2, 4}
    for st in steps:
        p = v.graph_padded[st]
        assert text[:p, st].tolist() == [str(i) for i in v.state_index[st][:p]]
    table = _rows(out[B_GRAPHS_CSV]["value"])
    assert table[0] == ["step", "batch_size", "padded_size", "row", "request", "state_index"]
    assert len(table) == 1 + int(v.graph_padded.sum())


def test_bad_buffer_and_captured_sizes_are_refused_in_the_pages_language(default_out):
    s = default_out[SESSION]
    bad = [
        (
            {"buffer_kib": 100},
            r"one byte buffer in KiB must be 0 .* \[1231, 16384\] for "
            r"extra_buffer.*got 100",
        ),
        ({"buffer_kib": 100, "strategy": "no_buffer"}, r"\[739, 16384\] for no_buffer"),
        ({"buffer_kib": 20000}, r"\[1231, 16384\].*got 20000"),
        ({"buffer_kib": 2000.5}, r"\[1231, 16384\].*got 2000.5"),
        (
            {"graph_sizes": "0, 4"},
            r"captured decode batch sizes must be 1 to 16 integers in "
            r"\[1, 64\]",
        ),
        ({"graph_sizes": "2, x"}, r"captured decode batch sizes .*got '2, x'"),
        ({"graph_sizes": ", ".join(["1"] * 17)}, "1 to 16 integers"),
    ]
    for kw, msg in bad:
        with pytest.raises(gr.Error, match=msg):
            app.serve_batch(**kw, session=s, progress=None)
    with pytest.raises(gr.Error, match=r"统一字节缓冲区（KiB）必须为 0"):
        app.serve_batch(buffer_kib=100, session=s, language="中文", progress=None)
    validate = app.pb.batch_validator()
    out = validate("a\nb", "", 8, "extra_buffer", 16, 64, 0, 1000, "", s, "English")
    assert [v["is_valid"] for v in out[:9]] == [True] * 7 + [False, True]
    assert "[1231, 16384] for extra_buffer" in out[7]["message"]
    out = validate("a\nb", "", 8, "no_buffer", 16, 64, 0, 1000, "1, 99", s, "中文")
    assert not out[8]["is_valid"] and "捕获的解码批大小必须是" in out[8]["message"]
    ok = validate("a\nb", "", 8, "no_buffer", 16, 64, 0, 1000, "", s, "English")
    assert all(v["is_valid"] for v in ok)  # 1000 KiB is above no_buffer's floor
