"""Every shipped config against vLLM 0.33's own hybrid KV cache code, at several TP sizes,
dtypes and context lengths.

State shapes and dtypes come from vLLM's ``MambaStateShapeCalculator`` /
``MambaStateDtypeCalculator`` called with the config fields each model class passes
(``Qwen3NextForCausalLM`` / ``NemotronHForCausalLM`` / ``kimi_k3`` ``get_mamba_state_shape_from
_config``; the model modules themselves need GPU-only packages). The block size comes from the
real ``Platform._align_hybrid_block_size`` (a stand-in model class and attention backend with
16-token kernel blocks), the groups from ``_get_kv_cache_groups_uniform_page_size``, the blocks
from ``get_kv_cache_config_from_groups`` and the log line's numbers from
``get_kv_cache_capacity``. Claimed equal: ``sizing.vllm_plan`` (block size, padded page,
groups, blocks, concurrency, tokens) for every case.
"""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing.hf import shipped_configs

torch = pytest.importorskip("torch")
mutils = pytest.importorskip("vllm.model_executor.layers.mamba.mamba_utils")
kp = pytest.importorskip("vllm.v1.core.kv_cache_planning")
ku = pytest.importorskip("vllm.v1.core.kv_cache_utils")
kvi = pytest.importorskip("vllm.v1.kv_cache_interface")
from vllm.config.cache import CacheConfig  # noqa: E402
from vllm.config.model import ModelConfig  # noqa: E402
from vllm.model_executor.models import ModelRegistry  # noqa: E402
from vllm.platforms.interface import Platform  # noqa: E402
from vllm.v1.attention.backend import MultipleOf  # noqa: E402

S, D = mutils.MambaStateShapeCalculator, mutils.MambaStateDtypeCalculator
TORCH = {"bfloat16": torch.bfloat16, "float32": torch.float32, "fp8_e4m3": torch.uint8}
CACHE_DTYPE = {"bfloat16": "auto", "fp8_e4m3": "fp8"}
NAMES = sorted(shipped_configs())


def _text(name: str) -> dict:
    raw = shipped_configs()[name]["config"]
    return raw.get("text_config", raw)


def real_shapes(name: str, tp: int, num_spec: int = 0):
    c, kind = _text(name), sz.shipped_spec(name).linear_kind
    if kind == "gdn":
        args = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"])
        return S.gated_delta_net_state_shape(
            tp, *args, c["linear_value_head_dim"], c["linear_conv_kernel_dim"], num_spec
        )
    if kind == "mamba2":
        return S.mamba2_state_shape(
            tp_world_size=tp,
            intermediate_size=c["mamba_num_heads"] * c["mamba_head_dim"],
            n_groups=c["n_groups"],
            num_heads=c["mamba_num_heads"],
            head_dim=c["mamba_head_dim"],
            state_size=c["ssm_state_size"],
            conv_kernel=c["conv_kernel"],
            num_spec=num_spec,
        )
    lin = c["linear_attn_config"]
    return S.kda_state_shape(
        tp,
        lin["num_heads"],
        lin["head_dim"],
        conv_kernel_size=lin["short_conv_kernel_size"],
        num_spec=num_spec,
    )


def real_dtypes(name: str, ssm: str | None):
    kind, ssm_arg = sz.shipped_spec(name).linear_kind, ssm or "auto"
    if kind == "kda":
        return D.kda_state_dtype(torch.bfloat16, "auto", ssm_arg)
    if kind == "mamba2":  # NemotronHForCausalLMConfig turns "auto" into float32
        return D.mamba2_state_dtype(torch.bfloat16, "auto", ssm or "float32")
    declared = sz.shipped_spec(name).ssm_dtype  # Qwen3.5's config handler applies it
    return D.gated_delta_net_state_dtype(torch.bfloat16, "auto", ssm or declared or "auto")


class _Backend:
    @staticmethod
    def get_supported_kernel_block_sizes():
        return [MultipleOf(16)]

    @staticmethod
    def customize_spec(spec):
        return spec

    @staticmethod
    def get_name():
        return "STUB16"


def _model_config(spec: sz.ModelSpec, length: int):
    mla = spec.attn_kind == "mla"
    arch = SimpleNamespace(
        total_num_kv_heads=1 if mla else spec.attn_kv_heads,
        head_size=spec.mla_latent_dim if mla else spec.attn_head_dim,
    )
    mc = SimpleNamespace(use_mla=mla, model_arch_config=arch, dtype=torch.bfloat16)
    mc.architecture, mc.is_hybrid, mc.max_model_len = "Stub", True, length
    mc.get_num_kv_heads = lambda pc, a=None: ModelConfig.get_num_kv_heads(mc, pc, a)
    mc.get_head_size = lambda: ModelConfig.get_head_size(mc)
    return mc


def real_plan(monkeypatch, name, tp, kv, ssm, length, avail, mode):
    spec = sz.shipped_spec(name)
    shapes, dtypes = real_shapes(name, tp), real_dtypes(name, ssm)
    model = SimpleNamespace(
        get_mamba_state_shape_from_config=lambda _vc: shapes,
        get_mamba_state_dtype_from_config=lambda _vc: dtypes,
    )
    cc = CacheConfig()
    cc.cache_dtype, cc.mamba_cache_mode, cc.kv_cache_layout = CACHE_DTYPE[kv], mode, "LBHNC"
    vc = SimpleNamespace(
        cache_config=cc,
        model_config=_model_config(spec, length),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp, decode_context_parallel_size=1),
        attention_config=SimpleNamespace(hisparse_config=None),
    )
    with monkeypatch.context() as m:
        m.setattr("vllm.config.vllm.set_current_vllm_config", lambda _c: nullcontext())
        m.setattr(
            "vllm.model_executor.layers.mamba.abstract.get_mamba_prefill_checkpoint_alignment",
            lambda _c: None,
        )
        m.setattr(ModelRegistry, "resolve_model_cls", lambda a, model_config=None: (model, a))
        m.setattr(Platform, "_find_non_ssm_backends", classmethod(lambda c, v: [_Backend]))
        Platform._align_hybrid_block_size(vc, _Backend)
    bs = cc.block_size
    if spec.attn_kind == "mla":
        attn = kvi.MLAAttentionSpec(
            block_size=bs,
            num_kv_heads=1,
            head_size=spec.mla_latent_dim,
            dtype=TORCH[kv],
            cache_dtype_str=CACHE_DTYPE[kv],
        )
    else:
        heads = vc.model_config.get_num_kv_heads(vc.parallel_config)
        attn = kvi.FullAttentionSpec(
            block_size=bs, num_kv_heads=heads, head_size=spec.attn_head_dim, dtype=TORCH[kv]
        )
    mamba = kvi.MambaSpec(
        shapes=shapes,
        dtypes=dtypes,
        block_size=bs,
        page_size_padded=cc.mamba_page_size_padded,
        mamba_cache_mode=mode,
    )
    layers = {f"a{i}": attn for i in range(spec.n_attn_layers)}
    layers.update({f"m{i}": mamba for i in range(spec.n_linear_layers)})
    groups = kp._get_kv_cache_groups_uniform_page_size(layers)
    config = kp.get_kv_cache_config_from_groups(vc, groups, avail)
    tokens, conc = ku.get_kv_cache_capacity(vc, config)
    return cc, groups, config, tokens, conc, mamba.real_page_size_bytes


TPS = {n: [t for t in (1, 2, 4, 8) if sz.shipped_spec(n).kda_heads % t == 0] for n in NAMES}
CASES = [(n, tp) for n in NAMES for tp in TPS[n]]


@pytest.mark.parametrize("name, tp", CASES)
@pytest.mark.parametrize("kv", ["bfloat16", "fp8_e4m3"])
@pytest.mark.parametrize("ssm", [None, "bfloat16"])
@pytest.mark.parametrize("mode, length", [("align", 131_072), ("none", 32_768)])
def test_vllm_plan_is_vllms(monkeypatch, name, tp, kv, ssm, mode, length):
    spec = sz.shipped_spec(name)
    avail = 23 * (1 << 30) + 123_456_789
    cc, groups, config, tokens, conc, mamba_page = real_plan(
        monkeypatch, name, tp, kv, ssm, length, avail, mode
    )
    p = sz.vllm_plan(
        spec, avail, tp, kv, ssm_dtype=ssm, max_model_len=length, mamba_cache_mode=mode
    )
    assert p.mamba_page_bytes == mamba_page
    assert p.block_size == cc.block_size
    assert p.page_bytes == (cc.mamba_page_size_padded or mamba_page)
    assert p.attn_groups + p.mamba_groups == len(groups)
    assert max(len(g.layer_names) for g in groups) == p.group_size
    assert p.num_blocks == config.num_blocks
    assert (p.kv_cache_tokens, p.max_concurrency) == (tokens, conc)
    line = next(x for x in sz.vllm_log_lines(p) if x.startswith("GPU KV cache size"))
    assert line == (
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {length:,} tokens per "
        f"request: {conc:.2f}x"
    )


def test_real_club3090_log_numbers_come_out_of_vllms_functions(monkeypatch):
    # noonghunna/club-3090#612: Qwen3.6-35B-A3B, one GPU, fp8 KV, 131,072-token requests,
    # "Available KV cache memory: 5.98 GiB", "GPU KV cache size: 567,978 tokens",
    # "Maximum concurrency for 131,072 tokens per request: 4.33x"
    avail = 299 * 21_463_040
    cc, _, config, tokens, conc, _ = real_plan(
        monkeypatch, "qwen3.6-35b-a3b", 1, "fp8_e4m3", None, 131_072, avail, "align"
    )
    assert (cc.block_size, config.num_blocks, tokens, f"{conc:.2f}") == (2096, 299, 567_978, "4.33")
    assert round(avail / (1 << 30), 2) == 5.98
