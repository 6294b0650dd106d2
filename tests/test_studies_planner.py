"""kda_core.studies.planner: the memory_planner app's data, checked against the K3 write-up."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.studies import planner as pl
from kda_core.studies.calculator import K3_REST_BYTES
from kda_core.studies.planner_engines import custom_spec


def test_seed_example_capped_to_16():
    # "in 16k out 3k ... max_running_requests is capped to 16 by the mamba state cache
    #  (max_mamba_cache_size=80, 5 state slots per request)"; fp8 KV, bf16 SSM
    p = pl.plan(
        max_mamba_cache_size=80,
        ssm_dtype="bfloat16",
        kv_dtype="fp8_e4m3",
        input_len=16_000,
        output_len=3_000,
    )
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
    assert len(p.log_lines) == 2  # no ReplaySSM ring line unless the flag is on
    assert p.log_lines[1].startswith("KV Cache is allocated. dtype: torch.float8_e4m3fn")
    # SGLang 0.5.23 allocates slot 0 too: 81 slots of state, the rest is KV
    assert p.kv_tokens == (p.budget_bytes - 81 * p.slot_bytes) // 13_824
    # the KV pool would hold far more: full-token usage at 16 x 19k tokens is low
    assert 16 * 19_000 / p.kv_tokens < 0.2


def test_the_default_state_dtype_is_sglangs():
    # without an SSM dtype the plan sizes K3's KDA state in float32, as SGLang does
    p = pl.plan()
    assert p.ssm_dtype == "float32" and p.ssm_bytes == 2 * 27_131_904
    assert p.deployment == sizing.Deployment(int(28 * sizing.GIB), 8)
    assert p.split == sizing.split_memory("kimi-k3", p.budget_bytes, 0.9, 8)
    assert p.split.ssm_dtype == "float32"


def test_sizes_match_sizing():
    p = pl.plan(ssm_dtype="bfloat16")
    assert p.ssm_bytes == 27_131_904 and p.conv_bytes == 1_907_712
    assert p.slot_bytes == p.ssm_bytes + p.conv_bytes
    assert p.kv_bytes_per_token == 27_648
    assert p.tokens_per_slot == pytest.approx(29_039_616 / 27_648, rel=1e-15)
    s = sizing.split_memory("kimi-k3", p.budget_bytes, 0.9, 8, "bfloat16")
    assert p.split == s and p.state_slots == s.max_mamba_cache_size == 489
    assert p.max_running == min(s.max_running, s.kv_tokens // 19_000)
    assert p.checkpoints_per_request == sizing.checkpoints_per_request(16_000, 3_000, 8192, 256)
    assert set(p.ring_bytes.values()) == {0}  # --enable-linear-replayssm-spec is off by default
    r = pl.plan(ssm_dtype="bfloat16", replayssm=True)
    assert r.ring_bytes == sizing.replayssm_ring_bytes("kimi-k3", r.state_slots + 1, 8, 16)
    split = sizing.split_memory("kimi-k3", p.budget_bytes, 0.9, 8, "bfloat16", replayssm=True)
    assert r.split == split


def test_strategy_table():
    p = pl.plan(max_mamba_cache_size=80)
    assert p.strategy_names == ("radix_off", "no_buffer", "extra_buffer", "extra_buffer_lazy")
    assert p.strategy_reserved.tolist() == [1, 3, 5, 4]
    assert p.strategy_held.tolist() == [1, 1, 3, 3]
    assert p.strategy_max_running.tolist() == [80, 26, 16, 20]
    q = pl.plan(max_mamba_cache_size=80, overlap=False)
    assert q.strategy_reserved.tolist() == [1, 3, 4, -1]  # lazy needs overlap
    r = pl.plan(max_mamba_cache_size=80, skip_decode_lock=True)
    assert r.max_running == 20


def test_memory_vs_context_mla_grows_kda_flat():
    p = pl.plan(max_context=1_000_000, n_context=50, ssm_dtype="bfloat16")
    ctx = p.context_lens
    assert ctx[0] == 1 and ctx[-1] == 1_000_000 and (np.diff(ctx) > 0).all()
    np.testing.assert_array_equal(p.kv_bytes, ctx * 27_648)
    np.testing.assert_array_equal(p.state_bytes, np.full(ctx.shape, 29_039_616))
    c = p.crossover_context
    assert (c - 1) * 27_648 <= 29_039_616 < c * 27_648
    # at 1M tokens one request's MLA KV is ~25.7 GiB on every GPU; its KDA part stays 27.7 MiB
    assert p.kv_bytes[-1] / sizing.GIB == pytest.approx(25.749, abs=1e-3)


def test_running_vs_ratio_and_balance():
    p = pl.plan(input_len=4000, output_len=1000, n_ratios=81, ssm_dtype="bfloat16")
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
    p = pl.plan(max_mamba_cache_size=119, ssm_dtype="bfloat16", kv_dtype="fp8_e4m3", draft_tokens=8)
    assert "intermediate_conv_window_cache size: 0.34GB" in p.log_lines[0]
    assert p.intermediate_conv_bytes == 24 * 8 * 1_907_712
    assert p.naive_draft_state_bytes == 24 * 8 * 27_131_904
    assert sum(p.ring_bytes.values()) < p.naive_draft_state_bytes
    spec = custom_spec("tiny", n_linear_layers=3, n_attn_layers=1, linear_heads=4, head_dim=16)
    q = pl.plan(spec, tp=2, budget_gib=0.01)
    assert q.model == "tiny" and q.ssm_bytes == 3 * 2 * 16 * 16 * 4  # float32: SGLang's default
    assert pl.plan("kimi-linear-48b", tp=4).ssm_bytes == 20 * 8 * 128 * 128 * 4
    gqa = custom_spec(
        "m2",
        4,
        1,
        8,
        16,
        linear_kind="mamba2",
        value_dim=8,
        k_heads=2,
        attn_kind="gqa",
        attn_kv_heads=2,
        attn_head_dim=64,
    )
    m = pl.plan(gqa, tp=2, budget_gib=1)
    # Mamba2: conv (W-1) x (H V + 2 G K) / tp, state (H / tp, V, K); GQA 1 head per GPU
    assert m.conv_bytes == 4 * 3 * (8 * 8 + 2 * 2 * 16) // 2 * 2
    assert m.ssm_bytes == 4 * 4 * 8 * 16 * 4 and m.kv_bytes_per_token == 1 * 2 * 64 * 2
    with pytest.raises(ValueError, match="tp must divide"):
        pl.plan(tp=5)
    with pytest.raises(ValueError, match="budget_gib"):
        pl.plan(budget_gib=1e9)
    with pytest.raises(ValueError, match="model must"):
        pl.plan(model=3)  # type: ignore[arg-type]


def test_k3_writeup_example_prints_its_kv_line() -> None:
    """The K3 write-up's second deployment (bf16 states, fp8 KV, ReplaySSM ring 16, pages of 64)
    at the one budget and ratio that give both of its deployments (tests/test_sizing_writeup.py):
    the planner prints the write-up's own three allocation lines."""
    p = pl.plan(
        "kimi-k3",
        tp=8,
        budget_gib=K3_REST_BYTES / sizing.GIB,
        ratio=0.15,
        ssm_dtype="bfloat16",
        kv_dtype="fp8_e4m3",
        replayssm=True,
        page_size=64,
    )
    assert (p.state_slots, p.kv_tokens) == (80, 1_947_648)
    assert p.log_lines == (
        "Mamba Cache is allocated. max_mamba_cache_size: 80, conv_state size: 0.14GB, "
        "ssm_state size: 2.05GB",
        "GDN ReplaySSM ring buffers allocated (L=16): d=0.256GB, k=0.256GB, g=0.512GB "
        "rawv=0.256GB, rawk=0.256GB, beta=0.004GB",
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1947648, KV size: 25.08 GB",
    )
    assert p.max_running == 16 and p.limited_by == "state"
    # the first deployment from the same budget: 51 fp32 slots, 974,656 bf16 tokens
    q = pl.plan(
        "kimi-k3",
        tp=8,
        budget_gib=K3_REST_BYTES / sizing.GIB,
        ratio=0.15,
        ssm_dtype="float32",
        replayssm=True,
        page_size=64,
    )
    assert (q.state_slots, q.kv_tokens) == (51, 974_656)


def test_gqa_models_from_shipped_configs() -> None:
    """A Gated DeltaNet + GQA model: K and V per KV head (4 heads x 256 x 2 x 16 layers, bf16)."""
    spec = sizing.shipped_spec("qwen3.8-27b-fp8")
    p = pl.plan(spec, tp=1, budget_gib=20)  # float32: SGLang's default for this config
    assert p.kv_bytes_per_token == 16 * 4 * 2 * 256 * 2 == sizing.kv_bytes_per_token(spec, 1)
    assert p.slot_bytes == 153_944_064  # SGLang's own log: mamba_cache_per_req=146.81 MB
    assert p.split == sizing.split_memory(spec, 20 * sizing.GIB, 0.9, 1, "float32")
    assert "K size:" in p.log_lines[-1] and "V size:" in p.log_lines[-1]
    # ReplaySSM on a GDN model sizes its ring for --max-running-requests + 1 requests
    q = pl.plan(spec, tp=1, budget_gib=20, replayssm=True, max_running_requests=8)
    assert "record_len=16" in q.log_lines[1]
    assert q.ring_bytes == sizing.replayssm_ring_bytes(spec, 9, 1, 16)
    with pytest.raises(ValueError, match="max_running_requests is required"):
        pl.plan(spec, tp=1, replayssm=True)
    nemo = sizing.shipped_spec("nvidia-nemotron-nano-9b-v2")
    with pytest.raises(ValueError, match="replayssm applies to KDA and Gated DeltaNet"):
        pl.plan(nemo, tp=1, replayssm=True)


def test_balanced_ratio_pays_the_ring_per_slot() -> None:
    """With the KDA ReplaySSM ring every slot costs state + conv + ring in SGLang's split, so the
    ratio at which both pools run out at once is that much larger; the best grid ratio of the
    running-requests curve sits next to it."""
    p = pl.plan(ssm_dtype="bfloat16", replayssm=True, n_ratios=81)
    ring = sum(sizing.replayssm_ring_bytes("kimi-k3", 1, 8, 16).values())
    assert p.split.per_slot_bytes == p.slot_bytes + ring
    assert p.balanced_ratio == pytest.approx(5 * (29_039_616 + ring) / (19_000 * 27_648))
    best = int(np.argmax(p.max_running_by_ratio))
    assert p.ratios[best - 2] <= p.balanced_ratio <= p.ratios[best + 2]
