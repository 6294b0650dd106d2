"""read_log on the fragments users paste: one line, a wrapped line, a ready line, a usage table.

The four fragments are published lines (tests/data/SOURCES.md): a capping line alone (9 = 47 // 5
when 32 were asked for), a capping line wrapped across four lines (64 slots sized 16 x 4 under a
strategy that reserves 5: 12), a ready line with the requested count given beside it (8 asked, 6
effective, the state cache bound) and per-batch mamba usage (4 held vs 5 reserved per request).
"""

from __future__ import annotations

import re
from pathlib import Path

from kda_core import sizing as sz

DATA = Path(__file__).parent / "data"
Q = sz.shipped_spec("qwen3.8-27b-fp8")
Q38_LOG = (DATA / "sglang_qwen38_27b_otel_h100.log").read_text()


def _fix(r: sz.LogReport, flag: str) -> object:
    return next(f for f in r.fixes if f.flag == flag)


def test_the_capping_line_alone_gives_the_cap_and_the_fixes_that_reach_32():
    r = sz.read_log((DATA / "sglang_fragment_38846.log").read_text(), Q, requested=32, target=32)
    (line,) = r.lines
    assert line.status == "reproduced" and line.rebuilt == "capped to 9 = 47 // 5"
    assert r.verdict == "state_slots" and r.running["requested"] == 32
    assert r.running["effective"] == 9 and r.running["won"] == "state"
    assert "47 state slots / 5 reserved per request = 9" in r.explanation
    # what one line cannot pin is named, not refused
    assert [m.key for m in r.missing] == ["needs_tp", "needs_dtype", "needs_budget", "cost_rest"]
    # 32 running requests need 160 slots; at the budget 47 fp32 slots imply (ratio 0.9
    # assumed) no ratio reaches them and 160 fp32 slots leave no KV pool ...
    by_flag = {f.flag: f for f in r.fixes}
    assert by_flag["--max-mamba-cache-size 160"].reaches is False
    assert by_flag["--mamba-full-memory-ratio"].reaches is False
    assert by_flag["--mamba-ssm-dtype bfloat16"].cap == 18  # 94 bf16 slots
    # ... in bfloat16 they fit: the smallest ratio is 4.04, checked by sizing again
    fix = by_flag["--mamba-ssm-dtype bfloat16 --mamba-full-memory-ratio 4.04"]
    assert fix.reaches and fix.cap == 32 and fix.effect.params["slots"] == 160
    assert "max_mamba_cache_size: 160" in fix.lines[0] and len(fix.lines) == 2  # no cap line
    assert [c.key for c in fix.costs] == ["cost_bf16", "cost_kv"]
    assert _fix(r, "--disable-radix-cache").reaches  # one slot per request
    assert not _fix(r, "--mamba-radix-cache-strategy extra_buffer_lazy").reaches  # 47 // 4


def test_a_wrapped_capping_line_shows_the_strategy_mismatch():
    r = sz.read_log((DATA / "sglang_fragment_dgx_spark_7.log").read_text(), Q, target=16)
    assert len(r.lines) == 1 and r.skipped == 0  # the four pasted lines are one log line
    assert r.lines[0].status == "reproduced" and r.running["effective"] == 12
    sized = next(x for x in r.reasons if x.key == "sized_for")
    assert sized.params["k"] == 4 and sized.params["spr"] == 5 and sized.params["cap"] == 12
    assert "extra_buffer_lazy" in sized.params["which"]
    assert sized.params["reserving"] == "extra_buffer"
    for flag in ("--mamba-radix-cache-strategy extra_buffer_lazy", "--max-mamba-cache-size 80"):
        assert _fix(r, flag).reaches and _fix(r, flag).cap == 16
    assert _fix(r, "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1").costs[0].key == "cost_skip"


def test_requested_beside_the_ready_line_names_the_bound_that_won():
    text = (DATA / "sglang_fragment_club3090_1319.log").read_text()
    r = sz.read_log(text, Q, requested=8)
    assert r.lines[0].kind == "sglang.pool" and r.lines[0].status == "input"
    assert r.running["requested"] == 8 and r.running["effective"] == 6
    # not the KV pool (206,635 // 2) nor the CLI (8): the state cache, 6 = slots // 5 with
    # 30 to 34 slots (the thread measured 33)
    assert r.running["bounds"] == {"cli": 8, "kv": 103_317}
    assert r.running["slots_range"] == (30, 34) and r.running["won"] == "state"
    assert r.verdict == "state_slots" and "30 to 34 slots" in r.explanation
    assert "bound_graph" in {b.key for b in r.bounds}
    # SGLang 0.5.23 echoes the arguments as a dict: the request is read from it
    echo = "server_args={'model_path': 'Qwen/Qwen3.8-27B', 'tp_size': 2, 'max_running_requests': 8}"
    r = sz.read_log(echo + "\n" + text, Q)
    assert r.running["requested"] == 8 and r.inferred["tp"] == 2 and r.running["effective"] == 6
    assert not any(x.key == "names_other" for x in r.reasons)
    r = sz.read_log(echo.replace("Qwen3.8-27B", "Llama-3-70B") + "\n" + text, Q)
    assert r.reasons[0].key == "names_other" and "is it this model?" in r.explanation


def _usage_lines() -> str:
    rows = re.findall(
        r"(\d+) running: ([\d.]+)\s+=\s+(\d+)/40",
        (DATA / "sglang_fragment_rtxpro6000_5.txt").read_text(),
    )
    return "\n".join(
        f"Decode batch, #running-req: {n}, mamba num: {m}, mamba usage: {u}" for n, u, m in rows
    )


def test_per_batch_usage_gives_held_vs_reserved():
    r = sz.read_log(_usage_lines(), Q)
    assert r.inferred["max_mamba_cache_size"] == 40  # mamba num / mamba usage
    held, pattern = r.held
    assert held.params["held"] == "4" and held.params["spr"] == 5 and held.params["cap"] == 8
    assert held.params["free"] == 8 and held.params["share"] == "20%"
    assert pattern.params["reserving"] == "extra_buffer"
    assert "extra_buffer_lazy" in pattern.params["matching"]
    assert "seen: 8 running (at the cap)" in r.explanation


def test_a_truncated_log_reports_what_it_has():
    cut = Q38_LOG[: Q38_LOG.index("KV Cache is allocated") + 40]
    r = sz.read_log(cut, Q, ratio=0.9)
    weights, mamba, kv = r.lines
    assert mamba.status == "reproduced" and mamba.inputs == ("max_mamba_cache_size",)
    assert mamba.note == "no KV line to pin the budget"
    assert kv.status == "not understood" and "cut before its numbers (a kv line)" in kv.note
    assert r.verdict == "state_slots" and "124 state slots" in r.explanation
    assert [m.key for m in r.missing] == [
        "needs_spr",
        "needs_budget",
        "needs_requested",
        "needs_running",
        "cost_rest",
    ]
