"""SGLang's ratio calculator (``.claude/skills/compute-mamba-ratio/SKILL.md`` in
sgl-project/sglang: r* = (S + D) * token_equiv * dcp_size / L) next to the slots a running
request occupies with its chunked-prefill and decode states kept."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.studies.calculator import calculator_check

# Kimi K3 at TP8 by hand: 69 KDA layers x 12 local heads x 128 x 128 fp32 state, conv window
# 69 x 3 x (3 x 12 x 128) bf16; MLA KV 24 layers x 576 bf16 per token
K3_SLOT = 69 * 12 * 128 * 128 * 4 + 69 * 3 * 3 * 12 * 128 * 2
K3_KV_TOKEN = 24 * 576 * 2


@pytest.fixture(scope="module")
def check():
    return calculator_check()


def test_the_calculator_is_the_documented_formula(check):
    assert K3_SLOT == 56_171_520 and K3_KV_TOKEN == 27_648
    assert check.token_equiv == pytest.approx(K3_SLOT / K3_KV_TOKEN, rel=1e-12)
    L = check.input_lens + 1024
    np.testing.assert_allclose(check.calc_ratio, 5 * K3_SLOT / K3_KV_TOKEN / L, rtol=1e-12)
    # at its own ratio the calculator is balanced: both pools hold about the same requests
    assert check.reserved == 5
    np.testing.assert_array_equal(check.calc_running, check.calc_slots // 5)
    assert np.abs(check.calc_running - check.calc_kv_running).max() <= 1


def test_the_skills_worked_example():
    # "TP (dcp_size=1): r = 4 * 4080 * 1 / 9216 ~= 1.8" (fp32 ssm + fp8 KV, extra_buffer_lazy,
    # 8192 in + 1024 out); the skill's 4080 is read off a boot log, the exact bytes give 4063
    c = calculator_check(input_lens=(8192,), kv_dtype="fp8_e4m3", strategy="extra_buffer_lazy")
    assert c.reserved == 4
    assert c.token_equiv == pytest.approx(K3_SLOT / (K3_KV_TOKEN / 2), rel=1e-12)
    assert round(float(c.calc_ratio[0]), 1) == 1.8


def test_chunked_prefill_states_outgrow_the_reservation(check):
    lens = check.input_lens.tolist()
    assert lens == [2048, 4096, 8192, 16384, 32768, 65536, 131072]
    # one state per 8192-token chunk, one more where decode crosses a 256 boundary
    assert check.checkpoints.tolist() == [-(-n // 8192) + 1 for n in lens] == [2, 2, 2, 3, 5, 9, 17]
    assert check.held == 3  # live + two ping-pong track slots
    assert check.occupied.tolist() == [5, 5, 5, 6, 8, 12, 20]
    # short prompts: the reservation covers everything, the calculator is right
    assert (check.kept_running[:3] == check.calc_running[:3]).all()
    # 64k: the calculator promises 14 running requests; 5 of them keep their states
    i = lens.index(65536)
    assert check.calc_running[i] == 14 and check.calc_slots[i] == 71
    assert check.kept_running[i] == 71 // 12 == 5
    # balancing with the real occupancy gives a larger ratio and fewer, but kept, requests
    assert check.live_ratio[i] > check.calc_ratio[i]
    assert check.live_running[i] == 12
    assert (check.live_running >= check.kept_running).all()
    assert (check.live_running <= check.calc_running).all()


def test_max_states_per_path_caps_the_occupancy():
    c = calculator_check(max_states_per_path=3)
    assert c.checkpoints.tolist() == [2, 2, 2, 3, 3, 3, 3]
    assert c.occupied.tolist() == [5, 5, 5, 6, 6, 6, 6]
    assert c.kept_running.tolist() == (c.calc_slots // c.occupied).tolist()


@pytest.mark.parametrize(
    "kw",
    [
        {"input_lens": ()},
        {"input_lens": "4096"},
        {"input_lens": (0,)},
        {"output_len": -1},
        {"chunked_prefill_size": 0},
        {"max_states_per_path": 0},
        {"strategy": "lazy"},
        {"model": "no-such-model"},
    ],
)
def test_bad_input_is_refused(kw):
    with pytest.raises(ValueError):
        calculator_check(**kw)
