"""``python -m kda_core.sizing plan CONFIG --trace FILE ...``: the sweep on the command line,
its progress bar, its JSON and CSV, and one line naming a bad argument (exit status 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kda_core import plan
from kda_core.plan.cli import main
from kda_core.workloads import BUNDLED_TRACES, TRACES_DIR, bundled_trace

TRACE = str(TRACES_DIR / BUNDLED_TRACES["conversation"])
ARGS = ["kimi-k3", "--trace", TRACE, "--gpu-mem", "28.8", "--tp", "8", "--min-running", "16"]
GRID = ["--grid", "mamba-full-memory-ratio=0.1,0.3", "--grid", "chunked_prefill_size=4096,8192"]


@pytest.fixture(scope="module")
def api():
    grid = {"mamba_full_memory_ratio": [0.1, 0.3], "chunked_prefill_size": [4096, 8192]}
    rest = int(28.8 * (1 << 30))
    trace = bundled_trace("conversation")
    return plan.sweep("kimi-k3", trace, rest_bytes=rest, grid=grid, min_running=16)


def test_json_equals_the_api(api, capsys):
    assert main([*ARGS, *GRID, "--json"]) == 0
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert got["launch_command"] == api.launch_command
    assert got["best"]["point"] == api.best["point"] and got["pareto"] == list(api.pareto)
    keys = ("max_running", "cached_tokens", "state_hit_rate")
    for p, q in zip(got["points"], api.points):
        assert {k: p[k] for k in keys} == {k: q[k] for k in keys}
    # the progress bar went to stderr, one line per point off a terminal, ending full
    bars = err.strip().splitlines()
    assert len(bars) == 4 and bars[-1].startswith("[" + "#" * 30 + "] 4/4 points")


def test_text_csv_and_the_module_entry(api, tmp_path):
    csv = tmp_path / "points.csv"
    cmd = [sys.executable, "-m", "kda_core.sizing", "plan", *ARGS, *GRID, "--csv", str(csv)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert api.launch_command in r.stdout
    assert f"recommended: {api.note}" in r.stdout
    assert "Pareto front (cached_tokens, max_running): points " + str(list(api.pareto)) in r.stdout
    assert csv.read_text() == api.to_csv()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "block_size=16"], "block_size: not a sglang flag"),
        (["--grid", "page_size=one"], "page_size: 'one' is not a int"),
        (["--set", "page_size"], "--set: expected FLAG=VALUE"),
        (["--gpu-mem", "0"], "--gpu-mem must be a number of GiB"),
        (["--objective", "fast"], "objective must be one of"),
        (["--scheduler", "tcp://127.0.0.1:9"], "scheduler: cannot reach tcp://127.0.0.1:9"),
    ],
)
def test_bad_input_is_one_line_and_status_2(extra, message, capsys):
    assert main([*ARGS, "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err


def test_an_empty_trace_file_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["kimi-k3", "--trace", str(empty), "--no-progress"]) == 2
    assert "error: trace:" in capsys.readouterr().err
