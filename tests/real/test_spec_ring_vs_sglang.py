"""The ReplaySSM spec ring's length, against SGLang 0.5.23's own state pool.

``MambaPool.__init__`` (``sglang/srt/mem_cache/memory_pool.py``) is run on CPU for Kimi Linear
(its real config, TP 2) with ``enable_linear_replayssm_spec``: it refuses a KDA spec ring that is
not a power of two or is shorter than ``2 * speculative_num_draft_tokens``. The lab's
``spec.check_ring_len`` refuses exactly the same (D, L) pairs, and its default ring
(``sizing.default_ring_len``) is the smallest one SGLang accepts; SGLang's own default
(``--linear-replayssm-cache-len`` 16) is refused past D = 8.
"""

from __future__ import annotations

import pytest

from kda_core import sizing as sz
from kda_core.serve import spec

mp = pytest.importorskip("sglang.srt.mem_cache.memory_pool")
sc = pytest.importorskip("sglang_configs")


def _sglang_accepts(monkeypatch, draft_tokens: int, ring_len: int) -> bool:
    with sc.runtime_tp(monkeypatch, 2):
        params = sc.sglang_config("kimi-linear-48b-a3b-instruct").mamba2_cache_params
        try:
            mp.MambaPool(
                size=1,
                spec_state_size=1,
                cache_params=params,
                mamba_layer_ids=list(params.layers),
                device="cpu",
                speculative_num_draft_tokens=draft_tokens,
                linear_replayssm_cache_len=ring_len,
                enable_linear_replayssm_spec=True,
            )
        except ValueError as e:
            assert "spec-verify ring" in str(e)
            return False
    return True


def _lab_accepts(draft_tokens: int, ring_len: int) -> bool:
    try:
        spec.check_ring_len(ring_len, draft_tokens)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("draft_tokens", [1, 3, 4, 8, 9])
@pytest.mark.parametrize("ring_len", [2, 8, 12, 16, 32])
def test_the_lab_refuses_the_rings_sglang_refuses(monkeypatch, draft_tokens, ring_len):
    accepted = _sglang_accepts(monkeypatch, draft_tokens, ring_len)
    assert _lab_accepts(draft_tokens, ring_len) == accepted


@pytest.mark.parametrize("draft_tokens", [1, 4, 8, 9])
def test_the_default_ring_is_the_smallest_sglang_accepts(monkeypatch, draft_tokens):
    L = sz.default_ring_len(draft_tokens)
    assert _sglang_accepts(monkeypatch, draft_tokens, L)
    assert L == 1 or not _sglang_accepts(monkeypatch, draft_tokens, L // 2)
    # SGLang's own default, 16, holds a verify window of at most 8 tokens
    assert _sglang_accepts(monkeypatch, draft_tokens, 16) == (draft_tokens <= 8)
