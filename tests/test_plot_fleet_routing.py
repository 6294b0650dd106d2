"""plots/plot_fleet_routing.py draws exactly what kda_core.studies.fleet returns, runs alone
(``--out``, ``--format``), writes the same bytes twice, in English and 中文."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kda_core.studies.fleet import SUMMARY_KEYS
from plots import plot_fleet_routing as mod
from plots import style

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data():
    return mod.compute(quick=True)


def _figure(data, lang: str):
    with style.rc(40, lang):
        return mod.make_figure(data, lang=lang)


def test_draws_the_study(data):
    assert len(data.chosen.input_len) == 600 and data.replicas == mod.REPLICAS
    fig = _figure(data, "en")
    for key in ("state_hit_rate", "expected_hit_rate"):
        bars = fig.findobj(lambda a, g=f"rate_{key}": a.get_gid() == g)
        np.testing.assert_allclose(
            [b.get_height() for b in bars], data.rates[:, SUMMARY_KEYS.index(key)]
        )
    for k in range(data.replicas):
        (line,) = fig.findobj(lambda a, g=f"load_{k}": a.get_gid() == g)
        np.testing.assert_array_equal(line.get_ydata(), data.load[:, k])
    kv = data.kv_only
    over = fig.findobj(lambda a: a.get_gid() == "over_kv_without_state")
    n = len(over[0].get_offsets()) if over else 0
    assert n == int(((kv.reason == 1) & (kv.expected > 0)).sum()) > 0


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_runs_alone_and_is_deterministic(tmp_path: Path, fmt: str):
    outs = []
    for k in range(2):
        out = tmp_path / str(k)
        for lang in ("en", "zh"):
            cmd = [sys.executable, "-m", "plots.plot_fleet_routing", "--quick", "--out", str(out)]
            p = subprocess.run(
                [*cmd, "--format", fmt, "--dpi", "40", "--lang", lang],
                capture_output=True,
                text=True,
                cwd=REPO,
                timeout=300,
            )
            assert p.returncode == 0, p.stderr
        outs.append(sorted(out.iterdir()))
    names = [p.name for p in outs[0]]
    assert names == [f"fleet_routing.{fmt}", f"fleet_routing_zh.{fmt}"]
    for a, b in zip(*outs):
        assert a.read_bytes() == b.read_bytes()
