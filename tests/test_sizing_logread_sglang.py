"""read_log on real SGLang boot logs, GDN ReplaySSM ring lines, per-batch lines and /metrics.

Real logs (tests/data/SOURCES.md): Kimi K3 at TP8 (fp32 SSM, fp8 KV, 257 slots) from
sgl-project/sglang ``.claude/skills/compute-mamba-ratio/SKILL.md``, whose table measured
``max_running_requests`` 51 for it; Qwen3.8-27B-FP8 on one H100 from farbodtavakkoli/OTel
``inference/sglang/llm/README.md``, launched with ``--mem-fraction-static 0.85
--max-running-requests 32`` and no ratio flag (SGLang's default 0.9), whose text reports
"max_running_requests is capped to 24 by the mamba state cache". The GDN ring line's form is
SGLang 0.5.23's ``MambaPool.__init__`` (``tests/real/test_sizing_logread_vs_sglang.py`` prints it
with the real pool).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kda_core import sizing as sz
from kda_core.sizing._logs import mamba_allocation_log
from kda_core.sizing.hf import shipped_configs
from kda_core.sizing.logread._report import LineVerdict

DATA = Path(__file__).parent / "data"
K3_LOG = (DATA / "sglang_kimi_k3_compute_mamba_ratio.log").read_text()
Q38_LOG = (DATA / "sglang_qwen38_27b_otel_h100.log").read_text()
Q38 = sz.shipped_spec("qwen3.8-27b-fp8")
QN = sz.shipped_spec("qwen3-next-80b-a3b-instruct")


def _checks(v: LineVerdict) -> dict[str, tuple[float, float]]:
    return {f: (a, b) for f, a, b in v.checks}


def test_kimi_k3_boot_log_round_trips_every_number():
    r = sz.read_log(K3_LOG, "kimi-k3", ratio=0.9)
    counts = dict(reproduced=2, different=0, input=0, skipped=0, **{"not understood": 0})
    assert r.counts() == counts
    mamba, kv = r.lines
    assert _checks(mamba) == {
        "conv_state GB": (0.46, 258 * 1_907_712 / 2**30),
        "ssm_state GB": (13.04, 258 * 54_263_808 / 2**30),
        "max_mamba_cache_size": (257, 257),
    }
    assert kv.inputs == ("#tokens",) and _checks(kv)["KV GB"][0] == 15.03
    assert r.inferred["tp"] == 8 and r.inferred["ssm_dtype"] == "float32"
    assert r.inferred["kv_dtype"] == "fp8_e4m3"
    # SKILL.md measured max_running_requests = 257 // 5 = 51
    assert r.verdict == "state_slots" and "51 running requests" in r.explanation


def test_without_the_ratio_the_slots_are_an_input_and_the_ratio_a_range():
    r = sz.read_log(K3_LOG, "kimi-k3")
    lo, hi = r.inferred["ratio_range"]
    assert 0.89 < lo < 0.9 < hi < 0.91
    assert r.lines[0].inputs == ("max_mamba_cache_size",)
    assert "SGLang's default 0.9 among them" in r.lines[0].note
    # a ratio the log contradicts is caught on the slot count
    r = sz.read_log(K3_LOG, "kimi-k3", ratio=0.5)
    assert r.lines[0].status == "different" and r.lines[0].diffs[0][0] == "max_mamba_cache_size"


def test_only_kimi_k3_explains_the_k3_log():
    for name in shipped_configs():
        if name == "kimi-k3":
            continue
        r = sz.read_log(K3_LOG, sz.shipped_spec(name))
        assert r.verdict == "other_model" and "is it this model?" in r.explanation


def test_qwen38_boot_log_round_trips_every_number():
    r = sz.read_log(Q38_LOG, Q38, ratio=0.9)
    kinds = [(v.kind, v.status) for v in r.lines]
    assert kinds == [
        ("sglang.weights", "input"),
        ("sglang.mamba", "reproduced"),
        ("sglang.kv", "reproduced"),
    ]
    # "Using hybrid linear attention backend ...", CUDA graph capture, "fired up"
    assert r.skipped == 3 and r.counts()["skipped"] == 3
    # per slot 146.81 MiB (fp32 48 x 48 x 128 x 128 x 4 + bf16 conv): SGLang's own error line
    # in the same README prints mamba_cache_per_req=146.81 MB
    assert sz.slot_bytes(Q38, 1, "float32") == 153_944_064
    assert _checks(r.lines[1])["max_mamba_cache_size"] == (124, 124)
    half = 330_324 * 32_768 / 2**30  # K and V of 16 layers x 4 heads x 256, bf16
    assert _checks(r.lines[2]) == {"K GB": (10.08, half), "V GB": (10.08, half)}
    assert r.inferred["tp"] == 1 and r.inferred["ssm_dtype"] == "float32"
    assert r.verdict == "state_slots" and "24 running requests" in r.explanation
    fixes = {f.flag: f.effect.text() for f in r.fixes}
    assert fixes["--mamba-ssm-dtype bfloat16"] == "245 slots -> cap 49, 329,486 KV tokens"


def test_an_edited_qwen38_number_is_marked_different():
    text = Q38_LOG.replace("V size: 10.08", "V size: 10.18")
    r = sz.read_log(text, Q38, ratio=0.9)
    bad = [v for v in r.lines if v.status == "different"]
    assert len(bad) == 1 and bad[0].diffs == (("V GB", 10.18, 330_324 * 32_768 / 2**30),)


def _gdn_log(requests: int, cap_line: bool = True) -> str:
    lines = mamba_allocation_log(QN, 40, 4, "float32", ring_requests=requests)
    if cap_line:
        lines.append(sz.capping_message(40, requested=64))
    return "\n".join(lines)


def test_gdn_ring_line_is_rebuilt_from_the_running_requests():
    # 40 slots, 5 per request: the ring covers max_running_requests (8) + 1 requests
    r = sz.read_log(_gdn_log(8), QN, tp=4)
    ring = next(v for v in r.lines if v.kind == "sglang.ring")
    assert ring.status == "reproduced" and ring.rebuilt.startswith("9 requests")
    assert set(_checks(ring)) == {"d", "k", "g", "rawv", "rawk"}
    # a ring sized for 100 requests does not match the 8 the cap allows
    r = sz.read_log(_gdn_log(99), QN, tp=4)
    assert next(v for v in r.lines if v.kind == "sglang.ring").status == "different"
    # with no cap in the log, the request count is read off the d size (an input)
    r = sz.read_log(_gdn_log(99, cap_line=False), QN, tp=4)
    ring = next(v for v in r.lines if v.kind == "sglang.ring")
    assert ring.status == "reproduced" and ring.inputs == ("ring requests",)


def test_per_batch_lines_and_metrics_back_the_state_slot_verdict():
    batch = (
        "Decode batch, #running-req: 24, #full token: 5000, full token usage: 0.02, "
        "mamba num: 120, mamba usage: 0.97, cuda graph: True, gen throughput (token/s): 900.00, "
        "#queue-req: 7"
    )
    r = sz.read_log(Q38_LOG + batch, Q38, ratio=0.9)
    usage = r.lines[-1]
    assert usage.status == "reproduced" and "#queue-req" in usage.inputs
    assert "seen: 24 running, 7 waiting, KV pool 2% used (at the cap)" in r.explanation
    metrics = (
        '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="q"} 24.0\n'
        'sglang:num_queue_reqs{model_name="q"} 3.0\nsglang:full_token_usage{model_name="q"} 0.05'
    )
    r = sz.read_log(Q38_LOG + metrics, Q38, ratio=0.9)
    assert [v.status for v in r.lines[-3:]] == ["input"] * 3 and r.skipped == 4  # "# TYPE"
    assert "seen: 24 running, 3 waiting, KV pool 5% used (at the cap)" in r.explanation


def test_kv_bound_when_the_pool_is_full_and_slots_are_free():
    batch = (
        "Decode batch, #running-req: 10, #full token: 320000, full token usage: 0.97, "
        "mamba num: 50, mamba usage: 0.40, cuda graph: True, gen throughput (token/s): 1.00, "
        "#queue-req: 2"
    )
    r = sz.read_log(Q38_LOG + batch, Q38, ratio=0.9)
    assert r.verdict == "kv_tokens" and "KV pool 97% used" in r.explanation


def test_a_gdn_ring_line_needs_the_request_count():
    with pytest.raises(ValueError, match="ring_requests"):
        mamba_allocation_log(QN, 40, 4, "float32")
    with pytest.raises(ValueError, match="ring_requests"):
        mamba_allocation_log(QN, 40, 4, "float32", ring_requests=-1)
