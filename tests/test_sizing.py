"""kda_core.sizing: every Kimi K3 number of the K3 write-up (docs/sizing.md).

The write-up's text as quoted lacks its '=' and '+' signs ("max_mamba_cache_size80"); the
expected strings below are quoted from it and compared after removing '=' from ours.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kda_core import sizing as sz
from kda_core.sizing import GIB, MIB
from kda_core.sizing._logs import kv_allocation_log, mamba_allocation_log
from kda_core.sizing.split import crossover_context, memory_vs_context

K3 = sz.preset("kimi-k3")


# --- model presets ----------------------------------------------------------------------------


def test_presets():
    assert (K3.n_linear_layers, K3.n_attn_layers, K3.n_layers) == (69, 24, 93)
    assert (K3.linear_heads, K3.linear_k_dim, K3.linear_v_dim, K3.conv_kernel) == (96, 128, 128, 4)
    assert (K3.linear_kind, K3.attn_kind, K3.mla_latent_dim) == ("kda", "mla", 576)
    kl = sz.preset("kimi-linear-48b")
    assert (kl.n_linear_layers, kl.n_attn_layers, kl.linear_heads) == (20, 7, 32)
    # the KDA-era names the other studies read are the same fields
    assert (K3.n_kda_layers, K3.n_mla_layers, K3.kda_heads) == (69, 24, 96)
    assert (K3.head_k_dim, K3.head_v_dim) == (128, 128)
    with pytest.raises(ValueError, match="name must be one of"):
        sz.preset("kimi-k4")


def test_modelspec_is_slotted_and_validated():
    assert not hasattr(K3, "__dict__")
    with pytest.raises(ValueError, match="linear_heads"):
        sz.ModelSpec("x", 1, 1, linear_heads=0)
    with pytest.raises(ValueError, match="conv_kernel"):
        sz.ModelSpec("x", 1, 1, linear_heads=4, conv_kernel=100)
    with pytest.raises(ValueError, match="linear_kind"):
        sz.ModelSpec("x", 1, 1, 4, linear_kind="rwkv")
    with pytest.raises(ValueError, match="attn_kv_heads"):
        sz.ModelSpec("x", 1, 1, 4, attn_kind="gqa")
    with pytest.raises(ValueError, match="sglang_ssm_dtype"):
        sz.ModelSpec("x", 1, 1, 4, sglang_ssm_dtype="fp8_e4m3")
    with pytest.raises(ValueError, match="linear_k_dim must equal linear_v_dim"):
        sz.ModelSpec("x", 1, 1, 4, linear_k_dim=16, linear_v_dim=32)  # one head_dim for KDA
    custom = sz.ModelSpec(
        "tiny",
        n_linear_layers=3,
        n_attn_layers=1,
        linear_heads=4,
        linear_k_dim=16,
        linear_v_dim=16,
        conv_kernel=4,
        kv_lora_rank=32,
        qk_rope_head_dim=8,
    )
    assert sz.kda_state_bytes(custom, dtype="float32") == 3 * 4 * 16 * 16 * 4
    assert sz.conv_state_bytes(custom, dtype="float32") == 3 * 3 * 4 * (16 + 16 + 16) * 4
    assert sz.mla_kv_bytes_per_token(custom, dtype="float32") == 1 * 40 * 4


# --- per-GPU sizes at TP8 ---------------------------------------------------------------------


def test_k3_state_and_conv_per_gpu_tp8_bf16():
    # "69(layer) * 96 / 8 * 128 * 128 * 2 (bf16) = 25.9MB"
    ssm = sz.kda_state_bytes(K3, tp=8, dtype="bfloat16")
    assert sz.local_heads(K3, 8) == 12
    assert ssm == 69 * 12 * 128 * 128 * 2 == 27_131_904
    assert round(ssm / MIB, 1) == 25.9
    # "69(layer) * 3 * 96 / 8 * 3 * 128 * 2 (bf16) = 1.82MB"
    conv = sz.conv_state_bytes(K3, tp=8, dtype="bfloat16")
    assert conv == 69 * 3 * 12 * 3 * 128 * 2 == 1_907_712
    # "如果k v head_dim一样那么就是layer * 9 * head_num * head_dim * size_of_dtype"
    assert conv == 69 * 9 * 12 * 128 * 2
    assert round(conv / MIB, 2) == 1.82
    # "TP 8 所有GPU总和为(25.9 + 1.82)*8 = 221.8MB" (the write-up adds the rounded figures)
    assert round((round(ssm / MIB, 1) + round(conv / MIB, 2)) * 8, 1) == 221.8
    assert (ssm + conv) * 8 / MIB == pytest.approx(221.8, abs=0.3)
    assert sz.slot_bytes(K3, 8, "bfloat16") == ssm + conv
    # SGLang's default for K3's KDA state is float32 (KimiLinearCacheParams keeps the default)
    assert sz.slot_bytes(K3, 8) == 2 * ssm + conv


def test_k3_state_and_conv_per_gpu_tp8_fp32_and_other_dtypes():
    assert sz.kda_state_bytes(K3, 8, "float32") == 2 * 27_131_904
    assert sz.kda_state_bytes(K3, 8, "float32") / MIB == pytest.approx(51.75, abs=1e-12)
    assert sz.conv_state_bytes(K3, 8, "float32") == 2 * 1_907_712
    assert sz.kda_state_bytes(K3, 8, "float16") == 27_131_904
    assert sz.kda_state_bytes(K3, 8, "fp8_e4m3") == 27_131_904 // 2
    assert sz.kda_state_bytes(K3, 8, "int8") == 27_131_904 // 2
    # docs/sizing.md, "The presets": 69 x 6 MiB = 414 MiB fp32 for the whole (TP1) state
    assert sz.kda_state_bytes(K3, 1, "float32") == 414 * MIB
    assert sz.kda_state_bytes("kimi-linear-48b", 1, "float32") == 40 * MIB
    assert sz.int8_scale_bytes(K3, 8, "bfloat16") == 69 * 12 * 128 * 2
    with pytest.raises(ValueError, match="dtype must be one of"):
        sz.kda_state_bytes(K3, 8, "float64")


def test_tp_must_divide_heads():
    for tp in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96):
        assert sz.local_heads(K3, tp) * tp == 96
    for tp in (5, 7, 9, 64):
        with pytest.raises(ValueError, match="tp must divide the KDA heads 96"):
            sz.kda_state_bytes(K3, tp)
    with pytest.raises(ValueError, match="tp must"):
        sz.conv_state_bytes(K3, 0)
    with pytest.raises(ValueError, match="tp must"):
        sz.local_heads(K3, 2.0)  # type: ignore[arg-type]


def test_k3_mla_kv_per_token():
    # "24 layer * 576 * 2 (bf16) = 27 KB"; fp8 halves it to 13.5 KB
    assert sz.mla_kv_bytes_per_token(K3, "bfloat16") == 24 * 576 * 2 == 27 * 1024
    assert sz.mla_kv_bytes_per_token(K3, "fp8_e4m3") == 13.5 * 1024
    # docs/sizing.md, "The presets": Kimi-Linear 7 x 576 values = 8064 B bf16
    assert sz.mla_kv_bytes_per_token("kimi-linear-48b") == 8064
    # MLA KV does not depend on TP; the KDA part is flat in context length
    kv, st = memory_vs_context(K3, np.array([0, 1, 1000, 1_000_000]), tp=8, ssm_dtype="bfloat16")
    np.testing.assert_array_equal(kv, [0, 27648, 27_648_000, 27_648_000_000])
    np.testing.assert_array_equal(st, [29_039_616] * 4)
    # about 1050 tokens of MLA KV weigh as much as one K3 slot (bf16 state) on a TP8 GPU
    c = crossover_context(K3, tp=8, ssm_dtype="bfloat16")
    assert (c - 1) * 27648 <= 29_039_616 < c * 27648


# --- SGLang's allocation log lines ------------------------------------------------------------


def _nums(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d+|\d+", line)]


def test_log_fp8kv_bf16ssm_119_slots_with_spec():
    # "# --kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype bfloat16 Mamba Cache is allocated.
    #  max_mamba_cache_size: 119, conv_state size: 0.21GB, ssm_state size: 3.03GB
    #  intermediate_ssm_state_cache size: 0.00GB intermediate_conv_window_cache size: 0.34GB
    #  GDN ReplaySSM ring buffers allocated (L16): d0.379GB, k0.379GB, g0.758GB rawv0.379GB,
    #  rawk0.379GB, beta0.006GB"
    lines = mamba_allocation_log(K3, 119, tp=8, ssm_dtype="bfloat16", draft_tokens=8)
    assert "max_mamba_cache_size: 119" in lines[0]
    assert "conv_state size: 0.21GB" in lines[0]
    assert "ssm_state size: 3.03GB" in lines[0]
    assert "intermediate_ssm_state_cache size: 0.00GB" in lines[0]
    assert "intermediate_conv_window_cache size: 0.34GB" in lines[0]
    ring = lines[1].replace("=", "")
    assert ring == (
        "GDN ReplaySSM ring buffers allocated (L16): d0.379GB, k0.379GB, g0.758GB "
        "rawv0.379GB, rawk0.379GB, beta0.006GB"
    )


def test_ring_shapes_for_120_slots():
    # "所有 ring 都按 69 层、head_num 96/TP8 = 12, L = 16, head_dim = 128 分配, 假如 120 个 slot":
    # d, k, rawv, rawk [69,120,12,16,128] BF16; g [69,120,12,16,128] FP32; beta [69,120,12,16] FP32
    r = sz.replayssm_ring_bytes(K3, slots=120, tp=8, ring_len=16)
    assert set(r) == {"d", "k", "g", "rawv", "rawk", "beta"}
    n = 69 * 120 * 12 * 16
    assert r["d"] == r["k"] == r["rawv"] == r["rawk"] == n * 128 * 2
    assert r["g"] == n * 128 * 4
    assert r["beta"] == n * 4
    assert [round(r[x] / GIB, 3) for x in ("d", "k", "g", "rawv", "rawk", "beta")] == [
        0.379,
        0.379,
        0.758,
        0.379,
        0.379,
        0.006,
    ]


def test_intermediate_conv_window_ratio():
    # max_running = 119 // 5 = 23; buffer [69, 23 + 1, 8, 3, 12 * 384] bf16 = 0.34 GB and
    # "(max_running_requests + 1) * speculative_num_draft_tokens / slot_num" = 24 * 8 / 120
    assert sz.max_running_requests(119) == 23
    icw = sz.intermediate_conv_window_bytes(K3, 23, 8, tp=8)
    assert icw == 69 * 24 * 8 * 3 * 12 * 384 * 2
    assert round(icw / GIB, 2) == 0.34
    conv_pool = 120 * sz.conv_state_bytes(K3, 8)
    assert icw / conv_pool == pytest.approx(24 * 8 / 120, rel=1e-15) == pytest.approx(1.6)
    # without ReplaySSM the per-draft SSM states would cost D full states per request
    no_replay = sz.intermediate_ssm_bytes(K3, 23, 8, tp=8, replayssm=False)
    assert no_replay == 24 * 8 * 27_131_904
    assert sz.intermediate_ssm_bytes(K3, 23, 8, tp=8) == 0
    rings = sum(sz.replayssm_ring_bytes(K3, 120, 8).values())
    assert rings < no_replay


def test_log_bf16kv_fp32ssm_51_slots():
    # "kv_cache_dtype = bfloat16 mamba_ssm_dtype = float32 Mamba Cache is allocated.
    #  max_mamba_cache_size: 51, conv_state size: 0.09GB, ssm_state size: 2.63GB GDN ReplaySSM
    #  ring buffers allocated (L16): d0.164GB, k0.164GB, g0.328GB rawv0.164GB, rawk0.164GB,
    #  beta0.003GB KV Cache is allocated. dtype: torch.bfloat16, #tokens: 974656,
    #  KV size: 25.10 GB"
    # The ring's bf16 tensors stay bf16 (the K3 write-up's d = 0.164 GB at 52 slots), so the ring
    # dtype is bf16 even with an fp32 SSM state.
    lines = mamba_allocation_log(K3, 51, tp=8, ssm_dtype="float32")
    assert lines[0] == (
        "Mamba Cache is allocated. max_mamba_cache_size: 51, conv_state size: 0.09GB, "
        "ssm_state size: 2.63GB"
    )
    assert _nums(lines[1]) == [16, 0.164, 0.164, 0.328, 0.164, 0.164, 0.003]
    assert len(mamba_allocation_log(K3, 51, tp=8, ring_len=None)) == 1
    r = sz.replayssm_ring_bytes(K3, 52, 8, 16, "bfloat16")
    assert [round(r[x] / GIB, 3) for x in ("d", "k", "g", "rawv", "rawk", "beta")] == [
        0.164,
        0.164,
        0.328,
        0.164,
        0.164,
        0.003,
    ]
    assert kv_allocation_log(K3, 974656, "bfloat16") == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 974656, KV size: 25.10 GB"
    )


def test_ring_line_follows_the_replayssm_flag_not_the_draft_tokens():
    # The K3 write-up's "no spark spec" logs (no intermediate buffers: D = 0) print the ring line,
    # so the rings are allocated by --enable-linear-replayssm-spec, whatever D is.
    with_d0 = mamba_allocation_log(K3, 51, tp=8, ssm_dtype="float32", draft_tokens=0)
    assert len(with_d0) == 2 and with_d0[1].startswith("GDN ReplaySSM ring buffers allocated")
    assert "intermediate" not in with_d0[0]
    # without the flag: no rings, and with D > 0 a full SSM state per draft token instead
    off = mamba_allocation_log(K3, 119, tp=8, draft_tokens=8, replayssm=False)
    assert len(off) == 1
    full = sz.intermediate_ssm_bytes(K3, 23, 8, tp=8, replayssm=False)
    assert full == 24 * 8 * 27_131_904
    assert f"intermediate_ssm_state_cache size: {full / GIB:.2f}GB" in off[0]  # 4.85GB
    assert mamba_allocation_log(K3, 119, tp=8, draft_tokens=0, replayssm=False) == [
        "Mamba Cache is allocated. max_mamba_cache_size: 119, conv_state size: 0.21GB, "
        "ssm_state size: 3.03GB"
    ]
    # the flag's line is the same with D = 0 and D = 8 (rings are sized by slots and L only)
    on8 = mamba_allocation_log(K3, 119, tp=8, draft_tokens=8)
    on0 = mamba_allocation_log(K3, 119, tp=8, draft_tokens=0)
    assert on8[1] == on0[1]


def test_log_fp8kv_bf16ssm_80_slots():
    # "kv_cache_dtype = fp8_e4m3 mamba_ssm_dtype = bfloat16 Mamba Cache is allocated.
    #  max_mamba_cache_size: 80, conv_state size: 0.14GB, ssm_state size: 2.05GB GDN ReplaySSM
    #  ring buffers allocated (L16): d0.256GB, k0.256GB, g0.512GB rawv0.256GB, rawk0.256GB,
    #  beta0.004GB KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1947648,
    #  KV size: 25.08 GB"
    lines = mamba_allocation_log(K3, 80, tp=8, ssm_dtype="bfloat16")
    assert lines[0] == (
        "Mamba Cache is allocated. max_mamba_cache_size: 80, conv_state size: 0.14GB, "
        "ssm_state size: 2.05GB"
    )
    assert _nums(lines[1]) == [16, 0.256, 0.256, 0.512, 0.256, 0.256, 0.004]
    assert kv_allocation_log(K3, 1947648, "fp8_e4m3") == (
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1947648, KV size: 25.08 GB"
    )
    # "#full token: 206080, full token usage: 0.11, mamba num: 64, mamba usage: 0.80": the
    # usage fractions of the same server (1947648 KV tokens, 80 state slots as allocated above)
    assert (f"{206080 / 1947648:.2f}", f"{64 / 80:.2f}") == ("0.11", "0.80")
