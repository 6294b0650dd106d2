"""kda_core.sizing: slots per request, concurrency caps, the memory split, checkpoints per
request and the balancing ratio (the K3 write-up's numbers, docs/sizing.md).
"""

from __future__ import annotations

import pytest

from kda_core import sizing as sz
from kda_core.sizing import GIB
from kda_core.sizing.slots import request_pool_estimate, resolve_max_num_reqs

K3 = sz.preset("kimi-k3")


# --- slots per request, the cap, the message --------------------------------------------------


def test_slots_per_request_by_strategy():
    assert sz.slots_per_request("extra_buffer") == 5  # 3 + 2 ping-pong
    assert sz.slots_per_request("auto") == 5
    # auto as SGLang resolves it (_mamba_radix_cache_resolution; tests/real checks the code):
    # without overlap, no_buffer on one-token pages, extra_buffer on larger pages
    assert sz.slots_per_request("auto", overlap=False) == 3
    assert sz.slots_per_request("auto", overlap=False, page_size=64) == 4
    assert sz.request_slots("auto", overlap=False) == sz.request_slots("no_buffer", False)
    with pytest.raises(ValueError, match="page_size"):
        sz.slots_per_request("auto", page_size=0)
    assert sz.slots_per_request("extra_buffer", overlap=False) == 4
    assert sz.slots_per_request("extra_buffer_lazy") == 4
    assert sz.slots_per_request("no_buffer") == 3
    assert sz.slots_per_request("radix_off") == 1
    assert sz.slots_per_request("extra_buffer", skip_decode_lock=True) == 4
    assert sz.slots_per_request("extra_buffer_lazy", skip_decode_lock=True) == 3
    # no_buffer stays at 3: _calculate_mamba_ratio adds the skip's drop back
    # (MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER), its prefill->decode peak needs 3
    assert sz.slots_per_request("no_buffer", skip_decode_lock=True) == 3
    assert sz.slots_per_request("extra_buffer", overlap=False, skip_decode_lock=True) == 3
    assert sz.slots_per_request("radix_off", skip_decode_lock=True) == 1
    with pytest.raises(ValueError, match="requires overlap"):
        sz.slots_per_request("extra_buffer_lazy", overlap=False)
    with pytest.raises(ValueError, match="strategy must be one of"):
        sz.slots_per_request("lazy")
    # held at most: 1 live + 2 ping-pong (1 without overlap); lazy 1 + 1 and a second track
    # slot at a boundary (SGLang mamba_lazy_prealloc_at_boundary)
    assert sz.slots_held_per_request("no_buffer") == 1
    assert sz.slots_held_per_request("extra_buffer") == 3
    assert sz.slots_held_per_request("extra_buffer", overlap=False) == 2
    assert sz.slots_held_per_request("extra_buffer_lazy") == 3
    table = {s: sz.request_slots(s) for s in ("radix_off", "no_buffer", "extra_buffer")}
    assert table == {"radix_off": (1, 1), "no_buffer": (3, 1), "extra_buffer": (5, 3)}
    assert sz.request_slots("extra_buffer_lazy") == sz.SlotsPerRequest(reserved=4, held=3)


def test_max_running_requests():
    # "总共分配80个slot每个请求预留5个 ... 那么只能并发16"
    assert sz.max_running_requests(80) == 16
    assert sz.max_running_requests(80, skip_decode_lock=True) == 20
    assert sz.max_running_requests(80, "extra_buffer_lazy") == 20
    assert sz.max_running_requests(80, "no_buffer") == 26
    assert sz.max_running_requests(80, "no_buffer", skip_decode_lock=True) == 26
    assert sz.max_running_requests(80, cuda_graph_max_bs=8) == 8
    assert sz.max_running_requests(80, token_capacity=10) == 5
    assert sz.max_running_requests(4) == 0
    with pytest.raises(ValueError, match="state_slots"):
        sz.max_running_requests(-1)


def test_resolve_max_num_reqs_caps_by_the_request_pool_estimate():
    # KVCacheConfigurator.resolve_max_num_reqs: estimate = int(tokens / ctx * 512) clamped to
    # [2048, 4096]; then min(estimate or requested, tokens // 2, slots // per-request)
    assert request_pool_estimate(1_000_000, 262_144) == 2048  # 1953 -> floor 2048
    assert request_pool_estimate(1_947_648, 131_072) == 4096  # 7608 -> ceiling 4096
    assert request_pool_estimate(1_947_648, 262_144) == 3804  # 1947648 * 512 / 262144
    assert request_pool_estimate(10**9, 4096) == 4096
    # the state cache binds first in the K3 write-up's deployments
    assert resolve_max_num_reqs(80, 1_947_648, 262_144) == 16
    # a huge state cache: the estimate binds (20000 // 5 = 4000 > 3804)
    assert resolve_max_num_reqs(20_000, 1_947_648, 262_144) == 3804
    # without the estimate the cap would be 4000: max_running_requests alone misses it
    assert sz.max_running_requests(20_000) == 4000
    # a requested --max-running-requests replaces the estimate, still capped by tokens // 2
    assert resolve_max_num_reqs(20_000, 1_947_648, 262_144, requested=5000) == 4000
    assert resolve_max_num_reqs(20_000, 6000, 262_144, requested=5000) == 3000
    assert resolve_max_num_reqs(80, 1_947_648, 262_144, "no_buffer", requested=8) == 8
    with pytest.raises(ValueError, match="state_slots"):
        resolve_max_num_reqs(4, 1_947_648, 262_144)
    with pytest.raises(ValueError, match="context_len"):
        resolve_max_num_reqs(80, 1000, 0)


def test_split_memory_0523_pays_slot_zero_and_the_ring():
    # _handle_max_mamba_cache (SGLang 0.5.23), derived by hand from the per-tensor sizes
    rest = 30 * GIB
    budget = rest / GIB * 0.9 / 1.9 * GIB
    state = 69 * 12 * 128 * 128 * 4  # fp32 SSM [69, 12, 128, 128] at TP8
    conv = 69 * 3 * 12 * 384 * 2  # bf16 conv window [69, 3, 12 * 384]
    ring = 69 * 12 * 16 * (128 * 2 * 4 + 128 * 4 + 4)  # d, k, rawv, rawk bf16; g, beta fp32
    assert sz.slot_bytes(K3, 8, "float32") == state + conv
    assert sum(sz.replayssm_ring_bytes(K3, 1, 8).values()) == ring
    per = state + conv + ring
    s = sz.split_memory(K3, rest, 0.9, 8, replayssm=True)  # float32: SGLang's default for K3
    assert s.max_mamba_cache_size == int((budget - per) // per)
    assert s.state_bytes == (s.max_mamba_cache_size + 1) * per
    assert s.kv_tokens == (rest - s.state_bytes) // 27648
    assert s.max_running == s.max_mamba_cache_size // 5
    # without ReplaySSM, D draft tokens: joint solve with the per-draft states
    d = sz.split_memory(K3, rest, 0.9, 8, draft_tokens=8)
    per0 = state + conv
    assert d.max_mamba_cache_size == int((budget - per0 * 9) // (per0 * (1 + 8 / 5)))
    inter = per0 * (d.max_mamba_cache_size // 5 + 1) * 8
    assert d.kv_bytes == rest - (d.max_mamba_cache_size + 1) * per0 - inter
    with pytest.raises(ValueError, match="replayssm"):
        sz.split_memory(K3, rest, replayssm=1)


def test_capping_message_is_sglangs_word_for_word():
    # SGLang 0.5.23 KVCacheConfigurator.resolve_max_num_reqs logs one fixed text; the K3
    # write-up quotes it for its bf16-state deployment (so the bf16 hint is printed even then):
    # "max_running_requests is capped to 16 by the mamba state cache (max_mamba_cache_size80,
    # 5 state slots per request). To raise it: increase --mamba-full-memory-ratio or
    # --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16."
    text = (
        "max_running_requests is capped to 16 by the mamba state cache "
        "(max_mamba_cache_size=80, 5 state slots per request). To raise it: increase "
        "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
        "--mamba-ssm-dtype bfloat16."
    )
    assert sz.capping_message(80) == text
    assert sz.capping_message(80, ssm_dtype="bfloat16", requested=64) == text
    assert sz.capping_message(80, requested=16) is None


# --- memory split, checkpoints, balancing ratio -----------------------------------------------


def test_balanced_ratio_balances():
    # short prompts want a large ratio, long ones a small one (the K3 write-up)
    # with DCP the KV is split over the TP ranks too: the ratio is multiplied by TP
    assert sz.balanced_ratio(K3, 1000, tp=8, dcp=True) == pytest.approx(
        8 * sz.balanced_ratio(K3, 1000, tp=8), rel=1e-15
    )
    bf16 = {"ssm_dtype": "bfloat16", "kv_dtype": "fp8_e4m3"}  # the write-up's fp8 deployment
    r_short = sz.balanced_ratio(K3, 1000, tp=8, **bf16)
    r_long = sz.balanced_ratio(K3, 19000, tp=8, **bf16)
    assert r_short > 1.0 > r_long
    assert r_short / r_long == pytest.approx(19.0, rel=1e-12)
    # at the balanced ratio both pools cap concurrency at the same (continuous) value
    rest = 25 * GIB
    r = r_long
    f = r / (1 + r)
    by_state = f * rest / (5 * sz.slot_bytes(K3, 8, "bfloat16"))
    by_kv = (1 - f) * rest / (19000 * 13824)
    assert by_state == pytest.approx(by_kv, rel=1e-12)
    # and the floored split lands within one request of balance
    s = sz.split_memory(K3, rest, ratio=r, tp=8, **bf16)
    assert abs(s.max_running - s.kv_tokens / 19000) <= 1.0


def test_ring_len_rules():
    # DSpark block size 7 -> gamma 7 -> 1 anchor + 7 drafts = 8 -> L >= 16
    assert sz.default_ring_len(8) == 16
    assert sz.default_ring_len(5) == 16
    assert sz.default_ring_len(4) == 8
    assert sz.default_ring_len(9) == 32 and sz.default_ring_len(1) == 2
    with pytest.raises(ValueError, match="ring_len must be a power of two"):
        sz.replayssm_ring_bytes(K3, 120, 8, ring_len=12)
