"""Prefill/decode disaggregation in two processes; the CLI contract line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kda_core.transfer.pd import handoff_policy, run_selftest
from tests.test_transfer_stores import mooncake_or_skip

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(
    r"^pd selftest: (\d+)/(\d+) requests identical to one instance, max \|dlogit\| (\S+), "
    r"mismatches refused (\d+)/(\d+)$"
)


def test_handoff_policy_adds_the_last_prompt_boundary():
    p = handoff_policy()
    got = p.checkpoint_positions(100, None, total_len=107, chunk_size=64, page_size=1)
    assert 99 in got and 64 in got


@pytest.mark.slow
def test_selftest_embedded_two_processes():
    r = run_selftest("embedded")
    assert r.requests == 6 and r.identical == 6 and r.max_dlogit <= 1e-9
    assert r.mismatches == 18 and r.refused == 18
    # every decode restored from the store at the handoff boundary (prompt - 1): prefill
    # published it, and nothing longer can exist
    assert r.sources == ["store"] * 6
    assert r.restored == [n - 1 for n in r.prompt_lens]


@pytest.mark.slow
def test_selftest_cli_mooncake_prints_the_contract_line():
    mooncake_or_skip()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-m", "kda_core.transfer", "selftest", "--store", "mooncake"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    m = LINE.match(lines[0])
    assert m, lines[0]
    n_ok, n, dlogit, refused, mism = m.groups()
    assert n_ok == n == "6" and float(dlogit) <= 1e-9 and refused == mism == "18"


def test_selftest_rejects_unknown_store():
    with pytest.raises(ValueError, match="store"):
        run_selftest("redis")
