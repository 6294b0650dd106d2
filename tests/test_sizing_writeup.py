"""The K3 write-up's reproductions (docs/sizing.md, "The K3 write-up"): its two deployments from one
budget with SGLang 0.5.23's split, the earlier "legacy" formula that cannot give both, its
checkpoint bound and decode track points. These were helpers of ``kda_core.sizing``; they live
here as the naive arithmetic the tests compare the package with.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kda_core import sizing as sz
from kda_core.sizing._logs import kv_allocation_log, mamba_allocation_log

K3 = "kimi-k3"
DATA = Path(__file__).parent / "data"
GIB = sz.GIB

# The two deployments (TP8, ReplaySSM ring 16, bf16 conv): dtypes, slots and KV tokens printed.
DEPLOYMENTS = (
    ({"ssm_dtype": "float32", "kv_dtype": "bfloat16"}, 51, 974_656),
    ({"ssm_dtype": "bfloat16", "kv_dtype": "fp8_e4m3"}, 80, 1_947_648),
)
PAGE, RATIO = 64, 0.15
REST = 29_497 * (1 << 20)  # one budget inside both windows (the profiled rest, 28.806 GiB)


def k3_split(which: int, rest: int = REST, ratio: float = RATIO) -> sz.MemorySplit:
    kw = DEPLOYMENTS[which][0]
    d = sz.Deployment(rest, 8, ratio=ratio, replayssm=True, page_size=PAGE, **kw)
    return sz.size_sglang(K3, d)


def per_slot(ssm: str) -> int:
    ring = sum(sz.replayssm_ring_bytes(K3, 1, 8, 16, "bfloat16").values())
    return sz.slot_bytes(K3, 8, ssm, "bfloat16") + ring


def budget_interval(page: int) -> tuple[int, int]:
    """``[lo, hi)`` of rests whose KV share page-rounds to both token counts:
    ``(S + 1) per + T cell <= rest < (S + 1) per + (T + page) cell``."""
    lo, hi = 0, 1 << 60
    for kw, slots, tokens in DEPLOYMENTS:
        state = (slots + 1) * per_slot(kw["ssm_dtype"])
        cell = sz.kv_bytes_per_token(K3, 8, kw["kv_dtype"])
        lo, hi = max(lo, state + tokens * cell), min(hi, state + (tokens + page) * cell)
    return lo, hi


def ratio_interval(rest: int) -> tuple[float, float]:
    """Ratios giving both slot counts: ``(S + 1) per <= rest f < (S + 2) per``, f = r / (1 + r)."""
    f_lo, f_hi = 0.0, 1.0
    for kw, slots, _ in DEPLOYMENTS:
        per = per_slot(kw["ssm_dtype"])
        f_lo, f_hi = max(f_lo, (slots + 1) * per / rest), min(f_hi, (slots + 2) * per / rest)
    return f_lo / (1 - f_lo), f_hi / (1 - f_hi)


def legacy_split(rest: int, ratio: float, ssm: str, kv: str, spr: int = 5, d: int = 0):
    """The write-up's earlier formula: ``slots = floor(rest r / (1 + r) / per)`` (or with D
    drafts ``floor(budget / (per (1 + D / spr)))``); no slot 0, no ring, no pages."""
    per = sz.slot_bytes(K3, 8, ssm)
    budget = int(rest * ratio / (1.0 + ratio))
    slots = int(budget // (per * (1.0 + d / spr))) if d else budget // per
    kv_bytes = max(rest - slots * per, 0)
    return slots, kv_bytes, kv_bytes // sz.kv_bytes_per_token(K3, 8, kv), budget


def test_one_budget_gives_both_k3_writeup_deployments():
    a, b = k3_split(0), k3_split(1)
    assert (a.max_mamba_cache_size, a.kv_tokens) == (51, 974_656)
    assert (b.max_mamba_cache_size, b.kv_tokens) == (80, 1_947_648)
    # the second count needs SGLang's rounding to whole pages: one more page fits without it
    d = sz.Deployment(REST, 8, "bfloat16", kv_dtype="fp8_e4m3", ratio=RATIO, replayssm=True)
    raw = sz.size_sglang(K3, d)
    assert raw.kv_tokens > 1_947_648 and raw.kv_tokens // 64 * 64 == 1_947_648
    lo, hi = budget_interval(64)
    assert lo <= REST < hi and (lo, hi) == (30_929_107_968, 30_929_935_104)
    assert budget_interval(1)[0] >= budget_interval(1)[1]  # no window with one-token pages
    r_lo, r_hi = ratio_interval(REST)
    assert r_lo <= RATIO < r_hi and (round(r_lo, 4), round(r_hi, 4)) == (0.1487, 0.1509)
    for rest in (lo, hi - 1):
        for r in (r_lo * 1.0001, r_hi * 0.9999):
            assert k3_split(0, rest, r).max_mamba_cache_size == 51
            assert k3_split(1, rest, r).kv_tokens == 1_947_648


def test_the_k3_writeup_log_lines_come_out():
    for which, name in ((0, "sglang_k3_writeup_fp32.log"), (1, "sglang_k3_writeup_fp8.log")):
        log = (DATA / name).read_text().splitlines()
        kw, s = DEPLOYMENTS[which][0], k3_split(which)
        mamba = mamba_allocation_log(K3, s.max_mamba_cache_size, 8, kw["ssm_dtype"])
        kv = kv_allocation_log(K3, s.kv_tokens, kw["kv_dtype"], tp=8, page_size=64)
        assert [*mamba, kv] == log[:3]
        d = sz.Deployment(REST, 8, kw["ssm_dtype"], ratio=RATIO, replayssm=True, page_size=PAGE)
        d = d.replace(kv_dtype=kw["kv_dtype"])
        assert sz.sglang_log_lines(K3, d)[:3] == log[:3]


def test_the_legacy_formula_cannot_give_both():
    windows = []
    for kw, slots, tokens in DEPLOYMENTS:
        per = sz.slot_bytes(K3, 8, kw["ssm_dtype"])
        cell = sz.kv_bytes_per_token(K3, 8, kw["kv_dtype"])
        windows.append((slots * per + tokens * cell, slots * per + (tokens + 1) * cell))
        n, kv_bytes, _, _ = legacy_split(windows[-1][0], 0.5, kw["ssm_dtype"], kw["kv_dtype"])
        assert kv_bytes == windows[-1][0] - n * per
    (a_lo, a_hi), (b_lo, b_hi) = windows
    assert a_hi <= b_lo or b_hi <= a_lo
    assert (a_lo, b_lo) == (29_812_036_608, 29_247_455_232)
    # with speculative drafts the legacy slots shrink by (1 + D / spr)
    slots, _, _, budget = legacy_split(30 * GIB, 0.9, "bfloat16", "bfloat16", 5, 8)
    assert slots == math.floor(budget / (sz.slot_bytes(K3, 8, "bfloat16") * (1 + 8 / 5)))


def _naive_checkpoints(i: int, o: int, c: int, t: int) -> int:
    prefill, done = 0, 0
    while done < i:  # one state per chunked-prefill chunk
        done += min(c, i - done)
        prefill += 1
    return prefill + int(any(n % t == 0 for n in range(i + 1, i + o + 1)))


def test_checkpoints_per_request_and_the_writeup_bound():
    # "输入13600, 输出512, chunked prefill 6144 ... 总共4个mamba state"; bound "in_len // chunk + 2"
    assert sz.checkpoints_per_request(13600, 512, chunked_prefill_size=6144) == 4
    assert 13600 // 6144 + 2 == 4
    assert sz.checkpoints_per_request(13600, 30, chunked_prefill_size=6144) == 3
    # "prompt 长度为1000、interval 为256, decode checkpoint 会在总长度1024、1280、1536 ..."
    assert [n for n in range(1001, 1601) if n % 256 == 0] == [1024, 1280, 1536]
    rng = np.random.default_rng(0)
    ins, outs = rng.integers(0, 30000, size=300), rng.integers(0, 2000, size=300)
    naive = [_naive_checkpoints(int(a), int(b), 6144, 256) for a, b in zip(ins, outs)]
    fast = [sz.checkpoints_per_request(int(a), int(b), 6144, 256) for a, b in zip(ins, outs)]
    assert fast == naive
    bound = [int(a) // 6144 + 2 for a in ins]
    assert all(n <= b for n, b in zip(fast, bound)) and any(n == b for n, b in zip(fast, bound))
    with pytest.raises(ValueError, match="chunked_prefill_size"):
        sz.checkpoints_per_request(10, 1, 0)
