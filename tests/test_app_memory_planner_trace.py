"""memory_planner's "plan from my trace" panel: it draws what kda_core.studies.plan_trace
returns, in both languages, on the bundled trace and on an upload; bad fields are refused
before the sweep runs."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from apps.memory_planner import trace as panel
from kda_core.studies import plan_trace as pt
from kda_core.workloads import BUNDLED_TRACES, TRACES_DIR


@pytest.fixture(scope="module")
def study():
    return pt.trace_plan(n_requests=400, ratios=(0.1, 0.3, 0.9), min_running=16)


@pytest.mark.parametrize("lang", ["English", "中文"])
def test_draws_the_study(study, lang):
    md, fig, path = panel.plan_trace(None, 400, 28.8, "0.1, 0.3, 0.9", "cached_tokens", 16, lang)
    b = study.best
    assert b >= 0 and study.sweep.launch_command in md
    assert f"{study.cached_tokens[b]:,.0f}" in md and study.sweep.log_lines[0] in md
    assert ("Recommended" in md) == (lang == "English") and ("推荐" in md) == (lang == "中文")
    ys = [np.asarray(tr.y) for tr in fig.data if tr.mode == "markers"][:2]
    assert sorted(np.concatenate(ys).tolist()) == sorted(study.cached_tokens.tolist())
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["max_running"]) for r in rows] == study.max_running.tolist()
    assert [int(r["on_pareto_front"]) for r in rows] == study.on_front.astype(int).tolist()


def test_an_uploaded_trace_is_planned(tmp_path):
    src = TRACES_DIR / BUNDLED_TRACES["conversation"]
    lines = src.read_text().splitlines()[:300]
    up = tmp_path / "mine.jsonl"
    up.write_text("\n".join(lines) + "\n")
    md, fig, _ = panel.plan_trace(str(up), 300, 28.8, "0.2, 0.5", "ttft_p99_s", 0, "English")
    assert "`mine`" in md and "300 requests, 4 points" in md
    assert json.loads(fig.to_json())["data"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((3000, 28.8, "0.1, x", "cached_tokens", 16), "ratios: give 1 to 12"),
        ((0, 28.8, "0.1", "cached_tokens", 16), "requests"),
        ((3000, 0, "0.1", "cached_tokens", 16), "cache budget per GPU"),
        ((3000, 28.8, "0.1", "speed", 16), "objective"),
    ],
)
def test_bad_fields_are_refused_before_the_sweep(fields, message):
    check = panel.validator()
    result = check(None, *fields)
    assert result is not None and message in str(result)
