"""apps.prefix_replay's batch view: several requests at once on one state pool."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import prefix_replay as app
from apps.text import prefix_replay as text

SESSION = 14  # the state's position in the full render (see tests/test_app_prefix_replay.py)


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def default_out():
    return app.load_scenario(progress=None)


# ---- the batch view (several requests at once on one state pool) -------------------------
B_MD, B_PHASES, B_PHASES_CSV, B_POOL, B_POOL_CSV, B_POOLS, B_POOLS_CSV, B_SESSION = range(8)


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


def test_batch_in_chinese_and_bad_input(default_out):
    from apps.ui import i18n

    zh = i18n.localized(app.serve_batch, text.TR)(
        session=default_out[SESSION], language="中文", progress=None
    )
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
    ok = validate("a\nb", "", 8, "extra_buffer", 16, 64, 0, s, "English")
    assert all(v["is_valid"] for v in ok)
    out = validate("a\nb", "0", 8, "extra_buffer", 16, 64, 0, s, "English")
    assert not out[1]["is_valid"] and "one step in [0, 64] per request (2)" in out[1]["message"]
    out = validate("a\nb", "", 8, "extra_buffer", 16, 64, -5, s, "English")
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
