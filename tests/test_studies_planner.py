"""kda_core.studies.planner: the memory_planner app's data, checked against the K3 write-up."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.studies import planner as pl


def test_seed_example_capped_to_16():
    # "in 16k out 3k ... max_running_requests is capped to 16 by the mamba state cache
    #  (max_mamba_cache_size=80, 5 state slots per request)"; fp8 KV, bf16 SSM
    p = pl.plan(max_mamba_cache_size=80, kv_dtype="fp8_e4m3", input_len=16_000, output_len=3_000)
    assert p.state_slots == 80 and p.slots_per_request == 5 and p.slots_held == 3
    assert p.max_running == 16 and p.limited_by == "state"
    assert p.capping_message is not None
    assert p.capping_message.startswith(
        "max_running_requests is capped to 16 by the mamba state cache "
        "(max_mamba_cache_size=80, 5 state slots per request)."
    )
    assert p.log_lines[0] == (
        "Mamba Cache is allocated. max_mamba_cache_size: 80, conv_state size: 0.14GB, "
        "ssm_state size: 2.05GB"
    )
    assert "d=0.256GB" in p.log_lines[1] and "beta=0.004GB" in p.log_lines[1]
    assert p.log_lines[2].startswith("KV Cache is allocated. dtype: torch.float8_e4m3fn")
    assert p.kv_tokens == (p.budget_bytes - 80 * p.slot_bytes) // 13_824
    # the KV pool would hold far more: full-token usage at 16 x 19k tokens is low
    assert 16 * 19_000 / p.kv_tokens < 0.2


def test_sizes_match_sizing():
    p = pl.plan()
    assert p.ssm_bytes == 27_131_904 and p.conv_bytes == 1_907_712
    assert p.slot_bytes == p.ssm_bytes + p.conv_bytes
    assert p.kv_bytes_per_token == 27_648
    assert p.tokens_per_slot == pytest.approx(29_039_616 / 27_648, rel=1e-15)
    s = sizing.split_memory_legacy("kimi-k3", p.budget_bytes, 0.9, 8)
    assert p.split == s and p.state_slots == s.max_mamba_cache_size
    assert p.max_running == min(s.max_running, s.kv_tokens // 19_000)
    assert p.checkpoints_per_request == sizing.checkpoints_per_request(16_000, 3_000, 8192, 256)
    assert p.ring_bytes == sizing.replayssm_ring_bytes("kimi-k3", p.state_slots + 1, 8, 16)


def test_strategy_table():
    p = pl.plan(max_mamba_cache_size=80)
    assert p.strategy_names == ("radix_off", "no_buffer", "extra_buffer", "extra_buffer_lazy")
    assert p.strategy_reserved.tolist() == [1, 3, 5, 4]
    assert p.strategy_held.tolist() == [1, 1, 3, 2]
    assert p.strategy_max_running.tolist() == [80, 26, 16, 20]
    q = pl.plan(max_mamba_cache_size=80, overlap=False)
    assert q.strategy_reserved.tolist() == [1, 3, 4, -1]  # lazy needs overlap
    r = pl.plan(max_mamba_cache_size=80, skip_decode_lock=True)
    assert r.max_running == 20


def test_memory_vs_context_mla_grows_kda_flat():
    p = pl.plan(max_context=1_000_000, n_context=50)
    ctx = p.context_lens
    assert ctx[0] == 1 and ctx[-1] == 1_000_000 and (np.diff(ctx) > 0).all()
    np.testing.assert_array_equal(p.mla_bytes, ctx * 27_648)
    np.testing.assert_array_equal(p.kda_bytes, np.full(ctx.shape, 29_039_616))
    c = p.crossover_context
    assert (c - 1) * 27_648 <= 29_039_616 < c * 27_648
    # at 1M tokens one request's MLA KV is ~25.7 GiB on every GPU; its KDA part stays 27.7 MiB
    assert p.mla_bytes[-1] / sizing.GIB == pytest.approx(25.749, abs=1e-3)


def test_running_vs_ratio_and_balance():
    p = pl.plan(input_len=4000, output_len=1000, n_ratios=81)
    assert (np.diff(p.running_by_state) >= 0).all()
    assert (np.diff(p.running_by_kv) <= 0).all()
    # the max-running curve is the study's field (the app and its CSV only draw it)
    assert np.array_equal(p.max_running_by_ratio, np.minimum(p.running_by_state, p.running_by_kv))
    assert p.max_running_by_ratio.dtype == np.int64
    best = int(np.argmax(p.max_running_by_ratio))
    # the best grid ratio sits next to the analytic balancing ratio
    assert p.ratios[max(best - 2, 0)] <= p.balanced_ratio <= p.ratios[min(best + 2, 80)]
    assert p.balanced_ratio == pytest.approx(5 * 29_039_616 / (5000 * 27_648), rel=1e-12)


def test_speculative_and_custom():
    p = pl.plan(max_mamba_cache_size=119, kv_dtype="fp8_e4m3", draft_tokens=8)
    assert "intermediate_conv_window_cache size: 0.34GB" in p.log_lines[0]
    assert p.intermediate_conv_bytes == 24 * 8 * 1_907_712
    assert p.naive_draft_state_bytes == 24 * 8 * 27_131_904
    assert sum(p.ring_bytes.values()) < p.naive_draft_state_bytes
    spec = pl.custom_spec("tiny", n_kda_layers=3, n_mla_layers=1, kda_heads=4, head_dim=16)
    q = pl.plan(spec, tp=2, budget_gib=0.01)
    assert q.model == "tiny" and q.ssm_bytes == 3 * 2 * 16 * 16 * 2
    assert pl.plan("kimi-linear-48b", tp=4).ssm_bytes == 20 * 8 * 128 * 128 * 2
    with pytest.raises(ValueError, match="tp must divide"):
        pl.plan(tp=5)
    with pytest.raises(ValueError, match="budget_gib"):
        pl.plan(budget_gib=1e9)
    with pytest.raises(ValueError, match="model must"):
        pl.plan(model=3)  # type: ignore[arg-type]


def test_plan_can_use_the_sglang_0523_formula() -> None:
    legacy = pl.plan(ssm_dtype="float32")
    new = pl.plan(ssm_dtype="float32", formula="sglang-0.5.23")
    assert (legacy.formula, new.formula) == ("legacy", "sglang-0.5.23")
    want = sizing.split_memory_0523("kimi-k3", legacy.budget_bytes, 0.9, 8, "float32")
    assert new.split == want and new.state_slots == want.max_mamba_cache_size
    # slot 0 and the ring cost slots: fewer than the K3 write-up's formula
    assert new.state_slots < legacy.state_slots
    no_ring = pl.plan(ssm_dtype="float32", formula="sglang-0.5.23", ring_len=None)
    plain = sizing.split_memory_0523("kimi-k3", legacy.budget_bytes, 0.9, 8, replayssm=False)
    assert no_ring.state_slots == plain.max_mamba_cache_size
    # without the ring only slot 0 (and float rounding of the budget) separates the formulas
    assert legacy.state_slots - 1 <= no_ring.state_slots <= legacy.state_slots
    with pytest.raises(ValueError, match="formula"):
        pl.plan(formula="new")
