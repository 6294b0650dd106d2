"""Every config vLLM serves (``sizing_family_configs``: the shipped ones and one per family)
against vLLM 0.33's own hybrid KV cache code, at two or more TP sizes, both state dtypes (and
"auto"), two KV dtypes and two context lengths.

State shapes and dtypes come from the model class vLLM's registry names for the config's
architecture (``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``:
``FalconH1ForCausalLM``, ``Lfm2ForCausalLM``, ``Lfm2MoeForCausalLM``, ``JambaForCausalLM``,
``Zamba2ForCausalLM``, ``GraniteMoeHybridForCausalLM``, ``NemotronHForCausalLM``,
``OlmoHybridForCausalLM``, ``BailingMoeV25ForCausalLM``, ``Qwen3NextForCausalLM``, Qwen3.5,
``InternS2MobiusForConditionalGeneration``) after the architecture's ``MODELS_CONFIG_MAP``
handler (Nemotron-H's float32, Qwen3.5's declared dtype); KDA's from
``MambaStateShapeCalculator.kda_state_shape`` with the fields ``kimi_k3`` passes (that module
needs GPU-only packages). Mamba2 mixers declare one prefill-checkpoint block
(``MambaMixer2.get_kv_cache_spec``). The block size comes from the real
``Platform._align_hybrid_block_size`` (a stand-in attention backend with 16-token kernel
blocks), the groups from ``_get_kv_cache_groups_uniform_page_size``, the blocks from
``get_kv_cache_config_from_groups`` and the log line's numbers from ``get_kv_cache_capacity``.
Claimed equal: ``sizing.vllm_plan`` (block size, padded page, groups, blocks, concurrency,
tokens) for every case. A family vLLM does not serve is refused by name by the lab.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from contextlib import nullcontext
from types import SimpleNamespace

import fakes
import pytest

from kda_core import sizing as sz
from kda_core.sizing.families import FAMILIES

torch = pytest.importorskip("torch")
mutils = pytest.importorskip("vllm.model_executor.layers.mamba.mamba_utils")
kp = pytest.importorskip("vllm.v1.core.kv_cache_planning")
ku = pytest.importorskip("vllm.v1.core.kv_cache_utils")
kvi = pytest.importorskip("vllm.v1.kv_cache_interface")
fc = pytest.importorskip("sizing_family_configs")
from transformers import CONFIG_MAPPING  # noqa: E402
from vllm.config.cache import CacheConfig  # noqa: E402
from vllm.config.model import ModelConfig  # noqa: E402
from vllm.model_executor.models import ModelRegistry  # noqa: E402
from vllm.model_executor.models.config import MODELS_CONFIG_MAP  # noqa: E402
from vllm.model_executor.models.registry import (  # noqa: E402
    _MULTIMODAL_MODELS,
    _TEXT_GENERATION_MODELS,
)
from vllm.platforms.interface import Platform  # noqa: E402
from vllm.v1.attention.backend import MultipleOf  # noqa: E402

# a few model modules annotate with unions of Triton types, which the fakes stand in for
fakes._Anything.__or__ = fakes._Anything.__ror__ = lambda self, _other: self

S, D = mutils.MambaStateShapeCalculator, mutils.MambaStateDtypeCalculator
TORCH = {"bfloat16": torch.bfloat16, "float32": torch.float32, "fp8_e4m3": torch.uint8}
CACHE_DTYPE = {"bfloat16": "auto", "fp8_e4m3": "fp8"}
NAMES = sorted(n for n in fc.CONFIGS if not sz.engine_refusal(fc.spec(n), "vllm"))
_TRANSFORMERS_AS = {"interns2_mobius": "qwen3_5_moe", "nemotron_h_puzzle": "nemotron_h"}


def _hf_config(name: str):
    """The hf config object vLLM would hold: transformers' class where it has one (InternS2 as
    its Qwen3.5-MoE base, Nemotron-H Puzzle as Nemotron-H), else the fields as attributes."""
    raw = fc.raw(name)
    mtype = _TRANSFORMERS_AS.get(raw["model_type"], raw["model_type"])
    if mtype not in CONFIG_MAPPING:
        return SimpleNamespace(**raw)
    if "text_config" in raw:
        raw["text_config"]["model_type"] = f"{mtype}_text"
    return CONFIG_MAPPING[mtype](**{k: v for k, v in raw.items() if k != "model_type"})


def _arch(name: str) -> str:
    archs = fc.raw(name).get("architectures") or [FAMILIES[fc.spec(name).family].vllm]
    return archs[0]


def _kda_state(name: str, tp: int, ssm: str | None, num_spec: int = 0):
    lin = fc.raw(name).get("text_config", fc.raw(name))["linear_attn_config"]
    k = lin["short_conv_kernel_size"]
    shapes = S.kda_state_shape(
        tp, lin["num_heads"], lin["head_dim"], conv_kernel_size=k, num_spec=num_spec
    )
    return shapes, D.kda_state_dtype(torch.bfloat16, "auto", ssm or "auto")


def real_state(name: str, tp: int, ssm: str | None, num_spec: int = 0):
    """(shapes, dtypes, prefill checkpoint blocks) vLLM's model class gives for the config
    (``num_spec`` speculative tokens: the model's ``speculative_config``; KDA's as
    ``KimiK3DeltaAttention.get_state_shape`` passes them)."""
    if "linear_attn_config" in fc.raw(name).get("text_config", fc.raw(name)):  # Kimi
        return (*_kda_state(name, tp, ssm, num_spec), 0)
    arch = _arch(name)
    module, cls = _TEXT_GENERATION_MODELS.get(arch) or _MULTIMODAL_MODELS[arch]
    model = getattr(importlib.import_module(f"vllm.model_executor.models.{module}"), cls)
    hf = _hf_config(name)
    cache = SimpleNamespace(
        mamba_cache_dtype="auto", mamba_ssm_cache_dtype=ssm or "auto", use_replayssm=False
    )
    mc = SimpleNamespace(
        hf_config=hf, hf_text_config=getattr(hf, "text_config", hf), dtype=torch.bfloat16
    )
    vc = SimpleNamespace(
        model_config=mc,
        cache_config=cache,
        parallel_config=SimpleNamespace(tensor_parallel_size=tp),
        num_speculative_tokens=num_spec,
        speculative_config=SimpleNamespace(num_speculative_tokens=num_spec) if num_spec else None,
    )
    if arch in MODELS_CONFIG_MAP:
        MODELS_CONFIG_MAP[arch].verify_and_update_config(vc)
    shapes = model.get_mamba_state_shape_from_config(vc)
    dtypes = model.get_mamba_state_dtype_from_config(vc)
    checkpoint = 1 if fc.spec(name).linear_kind == "mamba2" else 0  # MambaMixer2's spec
    return shapes, dtypes, checkpoint


def real_layers(name: str) -> tuple[int, int]:
    """(attention, linear) layers as vLLM's model builds them: Ling 3.0's
    ``BailingMoeV3DecoderLayer`` asks ``_is_kda_layer`` per layer (a trailing partial group is
    attention); every other class builds the layers the lab's spec counts."""
    spec = fc.spec(name)
    if _arch(name) != "BailingMoeV3ForCausalLM":
        return spec.n_attn_layers, spec.n_linear_layers
    from vllm.model_executor.models.bailing_moe_v3 import _is_kda_layer

    raw = fc.raw(name)
    n, g = raw["num_hidden_layers"], raw["layer_group_size"]
    kda = sum(_is_kda_layer(i, g, n) for i in range(n))
    return n - kda, kda


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


def mamba_spec(cc, shapes, dtypes, mode: str, blocks: int, checkpoint: int):
    """vLLM's ``MambaSpec`` of the linear layers as its config resolved them (``cc``: the
    ``CacheConfig`` after ``_align_hybrid_block_size``), with its prefill checkpoint blocks."""
    mamba = kvi.MambaSpec(
        shapes=shapes,
        dtypes=dtypes,
        block_size=cc.block_size,
        page_size_padded=cc.mamba_page_size_padded,
        mamba_cache_mode=mode,
        num_speculative_blocks=blocks,
    )
    if not checkpoint:
        return mamba
    return dataclasses.replace(
        mamba, num_prefill_checkpoint_blocks=checkpoint, prefill_checkpoint_alignment=1
    )


def real_plan(monkeypatch, name, tp, kv, ssm, length, avail, mode, draft=0, k=0, blocks=0):
    """vLLM's plan; ``draft`` MTP attention layers join as ``get_kv_cache_spec`` registers
    them: the target's attention spec marked ``is_draft``; ``k`` speculative tokens widen the
    conv window, ``blocks`` is ``MambaSpec.num_speculative_blocks``."""
    spec = fc.spec(name)
    shapes, dtypes, checkpoint = real_state(name, tp, ssm, k)
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
    mamba = mamba_spec(cc, shapes, dtypes, mode, blocks, checkpoint)
    n_attn, n_linear = real_layers(name)
    layers = {f"a{i}": attn for i in range(n_attn)}
    layers.update({f"m{i}": mamba for i in range(n_linear)})
    drafts = dataclasses.replace(attn, is_draft=True)
    layers.update({f"mtp.layers.{i}": drafts for i in range(draft)})
    groups = kp._get_kv_cache_groups_uniform_page_size(layers)
    config = kp.get_kv_cache_config_from_groups(vc, groups, avail)
    tokens, conc = ku.get_kv_cache_capacity(vc, config)
    return cc, groups, config, tokens, conc, mamba.real_page_size_bytes


CASES = [(n, tp) for n in NAMES for tp in fc.tps(n)]


@pytest.mark.parametrize("name, tp", CASES)
@pytest.mark.parametrize("kv", ["bfloat16", "fp8_e4m3"])
@pytest.mark.parametrize("ssm", [None, "float32", "bfloat16"])
@pytest.mark.parametrize("mode, length", [("align", 131_072), ("none", 32_768)])
def test_vllm_plan_is_vllms(monkeypatch, name, tp, kv, ssm, mode, length):
    spec = fc.spec(name)
    avail = 23 * (1 << 30) + 123_456_789
    cc, groups, config, tokens, conc, mamba_page = real_plan(
        monkeypatch, name, tp, kv, ssm, length, avail, mode
    )
    p = sz.vllm_plan(
        spec, avail, tp, kv, ssm_dtype=ssm, max_model_len=length, mamba_cache_mode=mode
    )
    shapes, dtypes, _ = real_state(name, tp, ssm)
    assert (
        p.mamba_page_bytes
        == mamba_page
        == sum(math.prod(x) * d.itemsize for x, d in zip(shapes, dtypes))
    )
    assert TORCH[p.ssm_dtype] == dtypes[-1] or len(dtypes) == 1  # vLLM's default, or the flag
    assert p.block_size == cc.block_size
    assert p.page_bytes == (cc.mamba_page_size_padded or mamba_page)
    assert (p.spec.n_attn_layers, p.spec.n_linear_layers) == real_layers(name)
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


@pytest.mark.parametrize("name", [n for n in fc.CONFIGS if n not in NAMES])
def test_families_vllm_does_not_serve_are_refused_by_name(name):
    spec = fc.spec(name)
    assert sz.engine_refusal(spec, "vllm") == (
        f"vLLM 0.33 does not serve {spec.family} ({FAMILIES[spec.family].label})"
    )
    with pytest.raises(ValueError, match="vLLM 0.33 does not serve"):
        sz.vllm_plan(spec, 8 << 30, max_model_len=4096)
