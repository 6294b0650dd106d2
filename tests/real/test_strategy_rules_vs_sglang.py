"""The engine's strategy rules against SGLang 0.5.23's own code (tests/test_serve_strategy.py
has the engine side).

* ``auto``: ``arg_groups/overrides.py`` ``_mamba_radix_cache_resolution`` (for a Kimi-Linear
  config, the triton linear-attention backend) against ``sizing.resolve_auto`` for every
  overlap / page size, and the slots sizing reserves for ``auto`` are the resolved strategy's;
* no_buffer with overlap: ``arg_groups/mamba_hook.py`` ``validate_mamba_no_buffer`` raises the
  message the engine quotes, and passes without overlap; an explicit no_buffer keeps overlap
  on in 0.5.23 (the engine's default differs by choice: ``_args.check_modes``);
* extra_buffer_lazy without overlap: ``mem_cache/kv_cache_configurator.py``
  ``_calculate_mamba_ratio`` raises the message the engine quotes;
* the INT8 checkpoint pool's estimate: ``mamba_checkpoint_pool.py``
  ``MambaCheckpointPool.estimate_mem_usage_bytes`` with the lab's shape and float64 scales and
  conv equals ``serve._checkpoints.int8_pool_estimate`` part by part (SGLang counts one slot more:
  its reserved slot 0).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_sizing_vs_real import configurator, deployment

from kda_core import sizing
from kda_core.model import TinyHybrid
from kda_core.serve import _args
from kda_core.serve._checkpoints import int8_pool_estimate
from kda_core.serve._slots import StateShape

ov = pytest.importorskip("sglang.srt.arg_groups.overrides")
hook = pytest.importorskip("sglang.srt.arg_groups.mamba_hook")
kvc = pytest.importorskip("sglang.srt.mem_cache.kv_cache_configurator")
ckpt = pytest.importorskip("sglang.srt.mem_cache.mamba_checkpoint_pool")
torch = pytest.importorskip("torch")

KIMI = SimpleNamespace(architectures=["KimiLinearForCausalLM"], model_type="kimi_linear")


def sglang_auto(monkeypatch, overlap: bool, page_size: int | None, strategy: str = "auto") -> dict:
    monkeypatch.setattr(ov, "model_config_of", lambda _v: SimpleNamespace(hf_config=KIMI))
    monkeypatch.setattr(ov, "get_platform", lambda: SimpleNamespace(is_xpu=False))
    view = SimpleNamespace(
        disable_radix_cache=False,
        mamba_radix_cache_strategy=strategy,
        disable_overlap_schedule=not overlap,
        page_size=page_size,
        linear_attn_backend="triton",
    )
    return ov._mamba_radix_cache_resolution(view)


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("page_size", [None, 1, 16, 64])
def test_auto_resolves_as_sglang(monkeypatch, overlap, page_size):
    real = sglang_auto(monkeypatch, overlap, page_size)
    ours = sizing.resolve_auto(overlap, page_size)
    assert real["mamba_radix_cache_strategy"] == ours
    # SGLang turns overlap off exactly when auto lands on no_buffer
    assert real.get("disable_overlap_schedule", False) == (ours == "no_buffer")
    on = overlap and not real.get("disable_overlap_schedule", False)
    page = page_size or 1
    resolved = sizing.request_slots(real["mamba_radix_cache_strategy"], on)
    assert sizing.request_slots("auto", overlap, page_size=page) == resolved


def test_no_buffer_overlap_message_is_sglangs():
    view = SimpleNamespace(page_size=1, disable_overlap_schedule=False, attention_backend="triton")
    with pytest.raises(AssertionError) as e:
        hook.validate_mamba_no_buffer(view, "KimiLinearForCausalLM")
    assert f"SGLang: {e.value}" == _args.NO_BUFFER_OVERLAP
    view.disable_overlap_schedule = True
    hook.validate_mamba_no_buffer(view, "KimiLinearForCausalLM")


def test_explicit_no_buffer_keeps_overlap_in_sglang(monkeypatch):
    """0.5.23 turns overlap off only when it resolves ``auto``: an explicit no_buffer keeps its
    default overlap and the validator refuses the pair. The engine chose the earlier releases'
    resolution (``_args.check_modes``): overlap off, with their log line."""
    real = sglang_auto(monkeypatch, overlap=True, page_size=None, strategy="no_buffer")
    assert real == {"uses_mamba_radix_cache": True}  # neither strategy nor overlap changed
    view = SimpleNamespace(page_size=1, disable_overlap_schedule=False, attention_backend="triton")
    with pytest.raises(AssertionError):
        hook.validate_mamba_no_buffer(view, "KimiLinearForCausalLM")
    ours = _args.check_modes("no_buffer", None, "exact")
    assert ours == ("no_buffer", False, "exact", (_args.NO_BUFFER_OVERLAP_OFF,))


def test_lazy_without_overlap_message_is_sglangs(monkeypatch):
    lazy = deployment(monkeypatch, strategy="extra_buffer_lazy", overlap=False)
    with lazy, pytest.raises(AssertionError) as e:
        kvc.KVCacheConfigurator._calculate_mamba_ratio(configurator(None))
    assert f"SGLang: {e.value}" == _args.LAZY_OVERLAP


@pytest.mark.parametrize("slots", [1, 16, 512])
def test_int8_pool_estimate_is_sglangs(slots):
    shape = StateShape.of(TinyHybrid())
    L, H, K, V = shape.s
    real = ckpt.MambaCheckpointPool.estimate_mem_usage_bytes(
        num_layers=L,
        num_slots=slots - 1,  # SGLang adds its reserved slot 0
        num_heads=H,
        head_v_dim=V,
        head_k_dim=K,
        conv_shapes=[shape.conv[1:]],
        conv_dtype=torch.float64,
        temporal_dtype=torch.float64,
    )
    assert real == int8_pool_estimate(shape, slots)
