"""apps.memory_planner: the callback's values against the planner study, bad inputs, the API."""

from __future__ import annotations

import csv

import gradio as gr
import numpy as np
import pytest

from apps import memory_planner as mp
from apps import ui as common
from kda_core.sizing.hf import shipped_configs
from kda_core.studies import planner as pl


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def default_out():
    return mp.run_plan()


def test_default_plan_numbers(default_out):
    summary, logs, f1, c1, f2, c2, f3, c3, table, hist, *_live = default_out
    p = pl.plan()
    assert p.max_running == 30 and p.limited_by == "kv"
    assert "| **max running requests** | **30** | limited by **kv** |" in summary
    assert f"| KV tokens | {p.kv_tokens:,} |" in summary
    assert "| slots reserved / held per request | 5 / 3 | extra_buffer |" in summary
    # the SSM dtype left to the engine: SGLang's float32 for K3's KDA state
    assert p.ssm_dtype == "float32" and p.state_slots == 252
    assert logs.splitlines()[0].startswith("Mamba Cache is allocated. max_mamba_cache_size: 252")
    assert logs.splitlines()[-1].startswith("KV Cache is allocated. dtype: torch.bfloat16")
    assert hist == [[1, "kimi-k3", 8, "28", "0.9", 0, "extra_buffer", 30, "kv"]]
    assert table.endswith("| 1 | kimi-k3 | 8 | 28 | 0.9 | extra_buffer | 30 | kv |")


def test_context_figure_is_the_study_data(default_out):
    f1, c1 = default_out[2], default_out[3]
    p = pl.plan()
    np.testing.assert_array_equal(f1.data[0].x, p.context_lens)
    np.testing.assert_allclose(f1.data[0].y, p.kv_bytes / (1 << 20), rtol=0, atol=0)
    np.testing.assert_allclose(f1.data[1].y, p.state_bytes / (1 << 20), rtol=0, atol=0)
    assert f1.layout.xaxis.type == "log" and "tokens" in f1.layout.xaxis.title.text
    rows = _rows(c1)
    assert rows[0] == ["context_tokens", "kv_bytes", "state_slot_bytes"]
    assert len(rows) == 1 + p.context_lens.size
    assert [int(x) for x in rows[-1]] == [p.context_lens[-1], p.kv_bytes[-1], p.state_bytes[-1]]


def test_ratio_and_strategy_figures(default_out):
    f2, c2, f3, c3 = default_out[4:8]
    p = pl.plan()
    np.testing.assert_array_equal(f2.data[0].y, p.running_by_state)
    np.testing.assert_array_equal(f2.data[1].y, p.running_by_kv)
    np.testing.assert_array_equal(f2.data[2].y, np.minimum(p.running_by_state, p.running_by_kv))
    assert f2.data[3].x[0] == 0.9 and f2.data[3].y[0] == 30
    rows = _rows(c3)
    assert rows[1:] == [
        ["radix_off", "1", "1", "252"],
        ["no_buffer", "3", "1", "84"],
        ["extra_buffer", "5", "3", "50"],
        ["extra_buffer_lazy", "4", "3", "63"],
    ]
    assert list(f3.data[0].y) == [1, 3, 5, 4]


def test_seed_example_capping_message():
    out = mp.run_plan(max_slots=80, kv_dtype="fp8_e4m3")
    assert "| **max running requests** | **16** | limited by **state** |" in out[0]
    assert "max_running_requests is capped to 16 by the mamba state cache" in out[1]
    assert "(max_mamba_cache_size=80, 5 state slots per request)" in out[1]


def test_custom_config_and_history_cap():
    hist = []
    for i in range(mp.MAX_HISTORY + 2):
        out = mp.run_plan(
            "custom", "", 20, 7, 32, 128, 4, 512, 64, tp=1, budget_gib=20 + i, history=hist
        )
        hist = out[9]
    assert len(hist) == mp.MAX_HISTORY and hist[-1][1] == "custom" and hist[-1][3] == "33"
    # the custom spec is kimi-linear-48b's shape: same sizes as the preset
    a = mp.run_plan("custom", "", 20, 7, 32, 128, 4, 512, 64, tp=1)[0]
    b = mp.run_plan("kimi-linear-48b-a3b-instruct", tp=1)[0]
    assert a == b


def test_draft_tokens_show_rings():
    s = mp.run_plan(draft=4)[0]
    assert "ReplaySSM rings (all slots)" in s and "D=4" in s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tp": 0}, "TP must be an integer in [1, 64], got 0"),
        ({"tp": 5}, "TP must divide the 96 recurrent-state heads; got TP=5"),
        ({"ratio": 50}, "mamba-full-memory-ratio must be a number in [0.01, 10], got 50"),
        ({"budget_gib": None}, "cache memory per GPU (GiB) must be a number in [0.5, 1024]"),
        ({"model": "gpt"}, f"model must be one of {sorted(shipped_configs())[:2]}"[:-1]),
        ({"draft": 65}, "draft tokens D must be an integer in [0, 64], got 65"),
        ({"input_len": 1.5}, "input length must be an integer in [1, 10000000], got 1.5"),
        ({"ssm_dtype": "fp4"}, "SSM dtype must be one of"),
        ({"model": "custom", "n_kda": 0}, "linear layers must be an integer in [1, 512], got 0"),
        ({"strategy": "extra_buffer_lazy", "overlap": False}, "requires overlap=True"),
    ],
)
def test_bad_inputs_raise_gr_error(kwargs, message):
    with pytest.raises(gr.Error) as e:
        mp.run_plan(**kwargs)
    assert message in e.value.message


def test_api_names():
    cfg = mp.build().get_config_file()
    public = [d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"]
    assert public == ["memory_planner_plan", "memory_planner_read_log", "memory_planner_trace"]


def test_client_roundtrip_and_sessions(tmp_path):
    from gradio_client import Client

    with common.launched(mp.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path))
        out = c.predict(api_name="/memory_planner_plan")
        assert len(out) == 14  # 9 + the live run (3) + engines, vLLM log; the state is not sent
        assert "| **max running requests** | **30** |" in out[0]
        fig = common.plot_from_client(out[2])
        assert fig["data"][0]["x"] == pl.plan().context_lens.tolist()
        assert _rows(out[3])[0] == ["context_tokens", "kv_bytes", "state_slot_bytes"]
        out2 = c.predict(tp=4, api_name="/memory_planner_plan")
        lines = out2[8].splitlines()
        assert lines[-2] == "| 1 | kimi-k3 | 8 | 28 | 0.9 | extra_buffer | 30 | kv |"
        p4 = pl.plan(tp=4)
        assert lines[-1] == (
            f"| 2 | kimi-k3 | 4 | 28 | 0.9 | extra_buffer | {p4.max_running} | {p4.limited_by} |"
        )
        other = Client(url, verbose=False, download_files=str(tmp_path))
        out3 = other.predict(api_name="/memory_planner_plan")
        assert "| 2 |" not in out3[8]  # a second session does not see the first
        with pytest.raises(Exception, match=r"TP must be an integer in \[1, 64\], got 0"):
            c.predict(tp=0, api_name="/memory_planner_plan")
        out4 = c.predict(api_name="/memory_planner_plan")  # still working after the error
        assert out4[8].splitlines()[-1].startswith("| 3 | kimi-k3 | 8 |")  # error not recorded


def test_vertical_line_labels_sit_on_their_log_axis_lines(default_out):
    f1, f2 = default_out[2], default_out[4]
    p = pl.plan()
    (a1,) = [a for a in f1.layout.annotations if "KV > state" in a.text]
    assert a1.text == f"KV > state from {p.crossover_context:,} tokens"
    assert a1.x == pytest.approx(np.log10(p.crossover_context), abs=1e-12) and a1.yref == "paper"
    (a2,) = [a for a in f2.layout.annotations if a.text.startswith("balanced")]
    assert a2.x == pytest.approx(np.log10(p.balanced_ratio), abs=1e-12)
    # decade ticks only on the log axes (no stray "2" / "5" minor labels)
    assert f1.layout.xaxis.dtick == 1 and f1.layout.yaxis.dtick == 1
    np.testing.assert_array_equal(f2.data[2].y, p.max_running_by_ratio)


def test_one_crossover_value_in_table_and_figure(default_out):
    p = pl.plan()
    assert f"one request's KV outweighs it from {p.crossover_context:,} tokens" in default_out[0]
    # float32 state (SGLang's default): (54,263,808 + 1,907,712) B / 27,648 B per token
    assert p.crossover_context == 56_171_520 // 27_648 + 1 == 2032


def test_integer_fields_reject_fractions():
    with pytest.raises(gr.Error, match=r"TP must be an integer in \[1, 64\], got 3.5"):
        mp.run_plan(tp=3.5)


def test_zero_running_requests_says_one_request_does_not_fit():
    """'max running 0, limited by kv' must say that one request does not
    fit, with the two numbers (needed vs the pool)."""
    out = mp.run_plan(budget_gib=1, input_len=1_000_000)
    (row,) = [ln for ln in out[0].splitlines() if "max running requests" in ln]
    assert "| **0** |" in row and "**one request does not fit**" in row
    assert "it needs 1,003,000 KV tokens" in row  # 1,000,000 input + 3,000 output


def test_tp_error_has_no_literal_quotes():
    with pytest.raises(gr.Error) as e:
        mp.run_plan(tp=7)
    assert e.value.message == "TP must divide the 96 recurrent-state heads; got TP=7"


# ---- the planner's max running requests next to what a live run admitted ------------------
@pytest.mark.parametrize(
    ("strategy", "reserved"), [("extra_buffer", 5), ("extra_buffer_lazy", 4), ("no_buffer", 3)]
)
def test_live_run_admits_the_planners_max_running(strategy, reserved):
    from kda_core import sizing

    out = mp.run_plan(strategy=strategy)
    live_md, fig, csv_path = out[10:13]
    # 16 slots, `reserved` per request under overlap (sizing.slots_per_request; SGLang's rule)
    cap = 16 // reserved
    assert sizing.max_running_requests(16, strategy) == cap
    bars = fig.data[0]
    assert max(bars.y) == cap  # the engine's scheduler ran exactly that many at once
    assert list(fig.data[1].y) == [cap, cap]
    assert f"peak **{cap}** running = the planner's max running requests **{cap}**" in live_md
    assert f"max_running_requests is capped to {cap} by the mamba state cache" in live_md
    assert f"{reserved} state slots per request" in live_md
    rows = _rows(csv_path)
    assert rows[0][:2] == ["step", "running_requests"]
    assert max(int(r[1]) for r in rows[1:]) == cap


def test_live_run_for_radix_off_and_without_overlap():
    out = mp.run_plan(strategy="radix_off")
    assert "no live run for radix_off" in out[10] and out[12] is None
    out = mp.run_plan(overlap=False)
    assert "(the engine runs the overlap scheduler with the decode lock)" in out[10]


def test_the_capping_warning_is_sglangs_text_whatever_the_dtype():
    """SGLang 0.5.23 prints one fixed warning (``KVCacheConfigurator.resolve_max_num_reqs``),
    the bf16 hint included even when the state is bf16 already (the K3 write-up quotes it for its
    bf16 deployment): "What SGLang would print" shows that text, in both places."""
    text = (
        "max_running_requests is capped to 8 by the mamba state cache (max_mamba_cache_size=40, "
        "5 state slots per request). To raise it: increase --mamba-full-memory-ratio or "
        "--max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16."
    )
    for dtype in ("bfloat16", "float32"):
        out = mp.run_plan(ssm_dtype=dtype, max_slots=40)
        assert out[1].splitlines()[-1] == text
        # the live run's scaled pool (16 slots, cap 3) prints the same words for its numbers
        tail = text[text.index("To raise it") :]
        assert "(max_mamba_cache_size=16, 5 state slots per request). " + tail in out[10]


def test_zero_capacity_names_the_reserved_slots():
    """4 state slots, extra_buffer + overlap: SGLang reserves 5 slots per running request at
    admission (``KVCacheConfigurator._calculate_mamba_ratio``: 3 + 2) and caps running requests
    at ``max_mamba_cache_size // ratio`` = 4 // 5 = 0 (``_resolve_max_num_reqs``, sglang
    python/sglang/srt/mem_cache/kv_cache_configurator.py). The reason names the 5 reserved
    slots (as the log line does), not the 3 a running request holds."""
    out = mp.run_plan(max_slots=4)
    (row,) = [ln for ln in out[0].splitlines() if "max running requests" in ln]
    assert "| **0** |" in row and "**one request does not fit**" in row
    assert "SGLang reserves 5 state slots per request at admission" in row
    assert "the pool has 4" in row and "holds 3" not in row
    assert "5 state slots per request" in out[1]  # the log line states the same count


def _events(demo: gr.Blocks) -> tuple[dict, dict, list]:
    """The page's callbacks by name (first of each), the kept-view state each writes, and the
    switch's inputs and outputs (component ids), from the page's config."""
    cfg = demo.get_config_file()
    fns, kept = {}, {}
    for d in cfg["dependencies"]:
        name = demo.fns[d["id"]].fn.__name__
        fns.setdefault(name, demo.fns[d["id"]].fn)
        kept.setdefault(name, d["outputs"][-1])
    elem = {c["id"]: c["props"].get("elem_id") for c in cfg["components"]}
    switch = next(d for d in cfg["dependencies"] if demo.fns[d["id"]].fn.__name__ == "switch")
    return fns, kept, [switch["inputs"], [elem.get(i) for i in switch["outputs"]]]


def test_switch_after_a_refused_plan_redraws_the_last_plan_in_chinese():
    """Plan refused by its validator (budget -28): the button's pre-check still ran (model
    fine, it writes nothing); the switch then redraws the last plan in 中文, not nothing."""
    demo = mp.build()
    fns, kept, (switch_in, switch_out) = _events(demo)
    plan = fns["compute_plan"]()  # the page's load
    pre = fns["check_model"]("kimi-k3", "", "English")  # Plan clicked; the plan is refused
    views = {kept["compute_plan"]: plan[-1], kept["check_model"]: pre[-1]}
    out = fns["switch"]("中文", *[views.get(i) for i in switch_in[1:]])
    by = dict(zip(switch_out, out))
    zh = mp.run_plan(language="中文")
    assert by["memory_planner-engines"]["value"] == zh[-2] != mp.run_plan()[-2]
    assert by["memory_planner-summary"]["value"] == zh[0]
    assert by["memory_planner-context"]["value"].layout.title.text == zh[2].layout.title.text
