"""SGLang 0.5.23's split (the K3 write-up's deployments from one budget) and vLLM 0.33's hybrid KV
cache plan, derived by hand from the engines' code (the real functions run side by side in
tests/real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kda_core import sizing as sz

K3 = "kimi-k3"
DATA = Path(__file__).parent / "data"


def test_one_budget_gives_both_k3_writeup_deployments():
    # the K3 write-up's logs: fp32 states + bf16 KV -> 51 slots, 974,656 tokens; bf16 states
    # + fp8 KV -> 80 slots, 1,947,648 tokens (TP8, ReplaySSM ring L = 16)
    a, b = sz.k3_split(0), sz.k3_split(1)
    assert (a.max_mamba_cache_size, a.kv_tokens) == (51, 974_656)
    assert (b.max_mamba_cache_size, b.kv_tokens) == (80, 1_947_648)
    assert a.rest_bytes == b.rest_bytes == sz.K3_REST_BYTES and a.ratio == b.ratio == 0.15
    # the second count needs SGLang's rounding to whole pages (64 tokens): one more page fits
    # without it
    raw = sz.split_memory(
        K3, sz.K3_REST_BYTES, 0.15, 8, "bfloat16", "bfloat16", "fp8_e4m3", replayssm=True
    )
    assert raw.kv_tokens > 1_947_648 and raw.kv_tokens // 64 * 64 == 1_947_648
    # the whole family of budgets and ratios: an interval of each, empty without pages
    lo, hi = sz.k3_budget_interval(64)
    assert lo <= sz.K3_REST_BYTES < hi
    assert sz.k3_budget_interval(1)[0] >= sz.k3_budget_interval(1)[1]
    r_lo, r_hi = sz.k3_ratio_interval(sz.K3_REST_BYTES)
    assert r_lo <= 0.15 < r_hi
    for rest in (lo, hi - 1):
        for r in (r_lo * 1.0001, r_hi * 0.9999):
            assert sz.k3_split(0, rest, r).max_mamba_cache_size == 51
            assert sz.k3_split(1, rest, r).kv_tokens == 1_947_648


def test_the_planners_k3_example_can_print_the_k3_kv_line():
    s = sz.split_memory_0523(
        K3, sz.K3_REST_BYTES, sz.K3_RATIO, 8, "bfloat16", kv_dtype="fp8_e4m3", page_size=64
    )
    assert (s.max_mamba_cache_size, s.kv_tokens) == (80, 1_947_648)
    assert sz.kv_allocation_log(K3, s.kv_tokens, "fp8_e4m3", tp=8, page_size=64) == (
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1947648, KV size: 25.08 GB"
    )


def test_the_k3_writeup_log_lines_come_out():
    log = (DATA / "sglang_k3_writeup_fp32.log").read_text().splitlines()
    a = sz.k3_split(0)
    mamba = sz.mamba_allocation_log(K3, a.max_mamba_cache_size, 8, "float32")
    kv = sz.kv_allocation_log(K3, a.kv_tokens, "bfloat16", tp=8, page_size=64)
    assert [*mamba, kv] == log
    log = (DATA / "sglang_k3_writeup_fp8.log").read_text().splitlines()
    b = sz.k3_split(1)
    mamba = sz.mamba_allocation_log(K3, b.max_mamba_cache_size, 8, "bfloat16")
    kv = sz.kv_allocation_log(K3, b.kv_tokens, "fp8_e4m3", tp=8, page_size=64)
    assert [*mamba, kv] == log[:3]


def test_the_legacy_formula_cannot_give_both():
    # legacy: kv = rest - slots * per_slot (no slot 0, no ring), tokens = kv // cell. The token
    # counts alone pin the rest to windows that do not meet, whatever the ratio.
    windows = []
    for ssm, kv, slots, tokens in (
        ("float32", "bfloat16", 51, 974_656),
        ("bfloat16", "fp8_e4m3", 80, 1_947_648),
    ):
        per, cell = sz.slot_bytes(K3, 8, ssm), sz.kv_bytes_per_token(K3, 8, kv)
        windows.append((slots * per + tokens * cell, slots * per + (tokens + 1) * cell))
        s = sz.split_memory_legacy(K3, windows[-1][0], 0.5, 8, ssm, kv_dtype=kv)
        assert s.kv_bytes == windows[-1][0] - s.max_mamba_cache_size * per
    (a_lo, a_hi), (b_lo, b_hi) = windows
    assert a_hi <= b_lo or b_hi <= a_lo
    assert sz.split_formula("legacy") is sz.split_memory_legacy
    assert sz.split_formula("sglang-0.5.23") is sz.split_memory
    with pytest.raises(ValueError, match="formula"):
        sz.split_formula("new")


def test_split_memory_is_0523_by_hand():
    rest, r = 30 * sz.GIB, 0.9
    per = sz.slot_bytes(K3, 8, "float32")
    budget = rest / sz.GIB * r / (1 + r) * sz.GIB
    s = sz.split_memory(K3, rest, r, 8, "float32", page_size=64)
    assert s.max_mamba_cache_size == int((budget - per) // per)
    kv = int((rest / sz.GIB - (s.max_mamba_cache_size + 1) * per / sz.GIB) * sz.GIB)
    assert s.kv_bytes == kv and s.kv_tokens == kv // 27_648 // 64 * 64
    q = sz.shipped_spec("qwen3-next-80b-a3b-instruct")
    g = sz.split_memory(q, rest, r, 4, "float32", replayssm=True, requested_running=8)
    ring = sum(sz.replayssm_ring_bytes(q, 1, 4, 16).values())  # GDN: fixed rings, not per slot
    assert g.state_bytes == (g.max_mamba_cache_size + 1) * sz.slot_bytes(q, 4, "float32") + 9 * ring
    with pytest.raises(ValueError, match="requested_running"):
        sz.split_memory(q, rest, r, 4, replayssm=True)
    assert sz.split_memory(K3, 1 << 20, 0.9, 8).max_mamba_cache_size == 0  # SGLang refuses


def test_vllm_block_size_and_padding_by_hand():
    q = sz.shipped_spec("qwen3-next-80b-a3b-instruct")
    # mamba page (TP1, bf16 conv, bf16 state under "auto"): 3*(2*16*128+32*128)*2 + 32*128*128*2
    mamba = 3 * 8192 * 2 + 32 * 128 * 128 * 2
    attn = 2 * 2 * 256 * 2  # 2 KV heads x K+V x 256 x bf16 per token
    p = sz.vllm_plan(q, 40 << 30, 1, max_model_len=131_072)
    assert (p.mamba_page_bytes, p.attn_page_per_token) == (mamba, attn)
    assert p.block_size == 16 * -(-mamba // (16 * attn)) == 544
    assert p.mamba_padding_pct == pytest.approx(100 * (544 * attn - mamba) / mamba)
    assert (p.group_size, p.attn_groups, p.mamba_groups) == (12, 1, 3)
    assert p.num_blocks == (40 << 30) // (12 * 544 * attn)
    assert p.blocks_per_request == -(-131_072 // 544) + 3 * 2
    assert p.kv_cache_tokens == int(p.num_blocks / p.blocks_per_request * 131_072)
    assert p.min_prefix_hit_tokens == 545
    # Nemotron-Nano-9B-v2 with bf16 states: vLLM raised its block to 672 tokens (vllm#24280)
    n = sz.shipped_spec("nvidia-nemotron-nano-9b-v2")
    assert sz.vllm_plan(n, 1 << 34, 1, ssm_dtype="bfloat16", max_model_len=8192).block_size == 672
    # an MLA hybrid aligns to 128-token kernel blocks
    assert sz.vllm_plan(K3, 1 << 34, 8, max_model_len=8192).block_size % 128 == 0


def test_vllm_groups_and_lines():
    assert sz.kv_cache_groups(12, 36) == (12, 1, 3)
    assert sz.kv_cache_groups(4, 27) == (4, 1, 7)
    assert sz.kv_cache_groups(13, 12) == (13, 1, 1)  # within 1.5x: the larger count
    q = sz.shipped_spec("qwen3.6-35b-a3b")
    p = sz.vllm_plan(q, 299 * 21_463_040, 1, "fp8_e4m3", max_model_len=131_072, max_num_seqs=512)
    assert p.ssm_dtype == "float32"  # the config's mamba_ssm_dtype
    assert (p.block_size, p.bytes_per_block, p.num_blocks) == (2096, 21_463_040, 299)
    lines = sz.vllm_log_lines(p)
    assert lines[0].startswith("Setting attention block size to 2096 tokens")
    assert lines[1] == "Available KV cache memory: 5.98 GiB"
    assert lines[2] == (
        "GPU KV cache size: 567,978 tokens, Maximum concurrency for 131,072 tokens per request: "
        "4.33x"
    )
    assert lines[3].startswith("ValueError: max_num_seqs (512) exceeds available Mamba cache")
    assert p.max_num_seqs_error is not None and "at most 299" in p.max_num_seqs_error
    with pytest.raises(ValueError, match="mamba_cache_mode"):
        sz.vllm_plan(q, 1 << 30, mamba_cache_mode="all")
