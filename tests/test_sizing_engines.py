"""SGLang 0.5.23's split and vLLM 0.33's hybrid KV cache plan, derived by hand from the engines'
code (the real functions run side by side in tests/real); the one Deployment both take; each
engine's default state dtype."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kda_core import sizing as sz

K3 = "kimi-k3"
DATA = Path(__file__).parent / "data"


def test_split_memory_is_0523_by_hand():
    rest, r = 30 * sz.GIB, 0.9
    per = sz.slot_bytes(K3, 8, "float32")
    budget = rest / sz.GIB * r / (1 + r) * sz.GIB
    s = sz.split_memory(K3, rest, r, 8, "float32", page_size=64)
    assert s == sz.size_sglang(K3, sz.Deployment(rest, 8, "float32", ratio=r, page_size=64))
    assert s.max_mamba_cache_size == int((budget - per) // per)
    kv = int((rest / sz.GIB - (s.max_mamba_cache_size + 1) * per / sz.GIB) * sz.GIB)
    assert s.kv_bytes == kv and s.kv_tokens == kv // 27_648 // 64 * 64
    q = sz.shipped_spec("qwen3-next-80b-a3b-instruct")
    g = sz.split_memory(q, rest, r, 4, "float32", replayssm=True, max_running_requests=8)
    ring = sum(sz.replayssm_ring_bytes(q, 1, 4, 16).values())  # GDN: fixed rings, not per slot
    assert g.state_bytes == (g.max_mamba_cache_size + 1) * sz.slot_bytes(q, 4, "float32") + 9 * ring
    with pytest.raises(ValueError, match="max_running_requests"):
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
    groups = [
        (p.group_size, p.attn_groups, p.mamba_groups)
        for p in (
            sz.vllm_plan(sz.ModelSpec("a", 36, 12, 32), 1 << 30, max_model_len=8192),
            sz.vllm_plan(sz.ModelSpec("b", 27, 4, 32), 1 << 30, max_model_len=8192),
            sz.vllm_plan(sz.ModelSpec("c", 12, 13, 32), 1 << 30, max_model_len=8192),
        )
    ]
    # the smaller layer count is the group size unless the larger is within 1.5x of it
    assert groups == [(12, 1, 3), (4, 1, 7), (13, 1, 1)]
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


def test_the_deployment_checks_each_knob_once():
    d = sz.Deployment(1 << 30, 8)
    assert (d.ratio, d.page_size, d.strategy, d.ssm_dtype) == (0.9, 1, "extra_buffer", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.tp = 4  # type: ignore[misc]
    for knob, bad, word in (
        ("tp", 0, "tp"),
        ("page_size", 1 << 21, "page_size"),
        ("ratio", 0, "ratio"),
        ("ratio", True, "ratio"),
        ("ring_len", 12, "ring_len"),
        ("strategy", "lazy", "strategy"),
        ("overlap", 1, "overlap"),
        ("kv_dtype", "fp4", "kv_dtype"),
        ("ssm_dtype", "fp4", "ssm_dtype"),
        ("mamba_cache_mode", "all", "mamba_cache_mode"),
        ("prefill_checkpoint_blocks", 2, "prefill_checkpoint_blocks"),
    ):
        with pytest.raises(ValueError, match=word):
            d.replace(**{knob: bad})
    with pytest.raises(ValueError, match="requires overlap"):
        d.replace(strategy="extra_buffer_lazy", overlap=False)
    with pytest.raises(ValueError, match="pages is not a deployment knob"):
        sz.Deployment.build(rest_bytes=1, pages=64)
    assert sz.Deployment.build(gpu_gib=2, tp=8) == sz.Deployment(2 << 30, 8)
    with pytest.raises(ValueError, match="gpu_gib"):
        sz.Deployment.build(gpu_gib=0)
    # the flat spellings take the same knobs, and refuse unknown ones by name
    with pytest.raises(ValueError, match="requested_running is not a deployment knob"):
        sz.split_memory(K3, 1 << 30, requested_running=8)


def test_each_engine_sizes_with_its_own_default_state_dtype():
    d = sz.Deployment(20 << 30, 1, max_model_len=131_072)
    nemo = sz.shipped_spec("nvidia-nemotron-nano-9b-v2")
    q36 = sz.shipped_spec("qwen3.6-35b-a3b")  # declares mamba_ssm_dtype float32
    qnext = sz.shipped_spec("qwen3-next-80b-a3b-instruct")  # declares nothing
    # SGLang: float32 unless the config declares one it reads (mamba2_state_dtype(self))
    assert [d.state_dtype(s, "sglang") for s in (nemo, q36, qnext)] == ["float32"] * 3
    # vLLM auto: float32 for KDA and Nemotron-H, Qwen3.5's declared dtype, else the model dtype
    assert [d.state_dtype(s, "vllm") for s in (nemo, q36, qnext)] == [
        "float32",
        "float32",
        "bfloat16",
    ]
    assert d.state_dtype(sz.preset(K3), "vllm") == "float32"
    assert d.replace(ssm_dtype="bfloat16").state_dtype(qnext, "sglang") == "bfloat16"
    # split_memory / vllm_plan with no dtype are the engines' defaults
    assert sz.split_memory(nemo, 20 << 30).ssm_dtype == "float32"
    assert sz.vllm_plan(qnext, 20 << 30, max_model_len=131_072).ssm_dtype == "bfloat16"
    # a float32 Nemotron-H state is twice the bfloat16 one: about half the slots
    f32 = sz.split_memory(nemo, 20 << 30).max_mamba_cache_size
    bf16 = sz.split_memory(nemo, 20 << 30, ssm_dtype="bfloat16").max_mamba_cache_size
    assert bf16 > 1.8 * f32
