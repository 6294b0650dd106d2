"""The lines SGLang 0.5.23's own state pool prints, read back by ``sizing.read_log``.

``MambaPool.__init__`` (``sglang/srt/mem_cache/memory_pool.py``) is run on CPU for shipped
configs at their real per-GPU shapes (the config classes of ``sglang_configs``, runtime TP
pinned) and its log records are captured: the "Mamba Cache is allocated" line, and with
``--enable-linear-replayssm-spec`` (``enable_linear_replayssm_spec``) or the decode ring
(``enable_linear_replayssm``) the "GDN ReplaySSM ring buffers allocated" line. A GDN spec ring
covers ``spec_state_size + 1`` requests (SGLang passes ``max_running_requests``), which the
scheduler's ``max_total_num_tokens=..., max_running_requests=N, ...`` line tells the reader.
Claimed: every number of those lines reproduced, TP and SSM dtype inferred.
"""

from __future__ import annotations

import logging

import pytest

from kda_core import sizing as sz

mp = pytest.importorskip("sglang.srt.mem_cache.memory_pool")
sc = pytest.importorskip("sglang_configs")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _pool_lines(monkeypatch, name: str, tp: int, size: int, running: int, **flags) -> list[str]:
    handler = _Records()
    mp.logger.addHandler(handler)
    old = mp.logger.level
    mp.logger.setLevel(logging.INFO)
    try:
        with sc.runtime_tp(monkeypatch, tp):
            params = sc.sglang_config(name).mamba2_cache_params
            mp.MambaPool(
                size=size,
                spec_state_size=running,
                cache_params=params,
                mamba_layer_ids=list(params.layers),
                device="cpu",
                linear_replayssm_cache_len=16,
                **flags,
            )
    finally:
        mp.logger.removeHandler(handler)
        mp.logger.setLevel(old)
    pool = (
        f"max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={running}, context_len=262144, available_gpu_mem=10.00 GB"
    )
    return [*handler.lines, pool]


CASES = [
    # (config, TP, slots, running requests, pool flags, ring kind)
    ("qwen3-next-80b-a3b-instruct", 4, 7, 127, {"enable_linear_replayssm_spec": True}, "requests"),
    ("qwen3.8-27b-fp8", 2, 5, 63, {"enable_linear_replayssm_spec": True}, "requests"),
    ("qwen3-next-80b-a3b-instruct", 4, 15, 3, {"enable_linear_replayssm": True}, "slots"),
    ("kimi-linear-48b-a3b-instruct", 2, 15, 3, {"enable_linear_replayssm_spec": True}, "slots"),
    ("nvidia-nemotron-nano-9b-v2", 2, 15, 3, {}, None),
]


@pytest.mark.parametrize("name, tp, size, running, flags, ring", CASES)
def test_state_pool_lines_read_back(monkeypatch, name, tp, size, running, flags, ring):
    text = "\n".join(_pool_lines(monkeypatch, name, tp, size, running, **flags))
    r = sz.read_log(text, sz.shipped_spec(name))
    assert r.inferred["tp"] == tp
    assert r.inferred["ssm_dtype"] == sz.shipped_spec(name).sglang_ssm_dtype
    by_kind = {v.kind: v for v in r.lines}
    assert by_kind["sglang.mamba"].status == "reproduced"
    assert by_kind["sglang.mamba"].checks[1][1] > 0.05  # ssm GB: a number worth comparing
    if ring is None:
        assert "sglang.ring" not in by_kind
        return
    line = by_kind["sglang.ring"]
    assert line.status == "reproduced", line.diffs
    assert line.rebuilt.split()[1] == ring and line.checks[0][1] > 0.01  # d GB
