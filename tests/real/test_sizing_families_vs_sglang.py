"""Every hybrid family SGLang 0.5.23 serves, sized by SGLang's own config classes at two TP
sizes and both SSM dtypes, against the lab's numbers.

For each config of ``sizing_family_configs`` the family's real config class
(``sglang.srt.configs``: ``FalconH1Config``, ``Lfm2Config``, ``Lfm2MoeConfig``,
``NemotronHConfig`` / ``NemotronHPuzzleConfig``, ``GraniteMoeHybridConfig``,
``BailingHybridConfig``, ``JetNemotronConfig``, ``ZayaConfig``, ``MiniCPMHybridConfig``,
``InternS2MobiusConfig``, and the Qwen / Kimi ones) is built from the raw config with its
runtime TP (``get_parallel()``) pinned. Claimed equal: the per-slot state
(``mamba2_cache_params.mamba_cache_per_req``, float32 and bfloat16 states), the linear and
attention layer counts, SGLang's default state dtype for the config, and the KV cell
(``DefaultPoolConfigurator._compute_cell_size``). A family SGLang does not serve (Jamba,
Zamba2, OLMo-Hybrid) is refused by name by the lab.
"""

from __future__ import annotations

import dataclasses

import pytest

from kda_core import sizing as sz
from kda_core.sizing.families import FAMILIES

mu = pytest.importorskip("sglang.srt.configs.mamba_utils")
sc = pytest.importorskip("sglang_configs")
fc = pytest.importorskip("sizing_family_configs")

SERVED = [n for n in fc.CONFIGS if not sz.engine_refusal(fc.spec(n), "sglang")]
CASES = [(n, tp) for n in SERVED for tp in fc.tps(n)]


@pytest.mark.parametrize("name, tp", CASES)
def test_state_layers_dtype_and_cell_are_sglangs(monkeypatch, name, tp):
    spec = fc.spec(name)
    with sc.runtime_tp(monkeypatch, tp):
        cfg = sc.sglang_config(name)
        params = cfg.mamba2_cache_params
        assert len(params.layers) == spec.n_linear_layers
        assert len(cfg.full_attention_layer_ids) == spec.n_attn_layers
        # SGLang's own default state dtype for this config (float32 unless it declares one)
        assert params.dtype.temporal == sc.TORCH[spec.sglang_ssm_dtype]
        for ssm in ("float32", "bfloat16"):
            dtype = dataclasses.replace(params.dtype, temporal=sc.TORCH[ssm])
            p = dataclasses.replace(params, dtype=dtype)
            assert sz.slot_bytes(spec, tp, ssm) == p.mamba_cache_per_req, ssm
        for kv in ("bfloat16", "fp8_e4m3"):
            assert sz.kv_bytes_per_token(spec, tp, kv) == sc.cell_size(cfg, spec, tp, kv), kv


@pytest.mark.parametrize("name", [n for n in fc.CONFIGS if n not in SERVED])
def test_families_sglang_does_not_serve_are_refused_by_name(name):
    spec = fc.spec(name)
    assert sz.engine_refusal(spec, "sglang") == (
        f"SGLang 0.5.23 does not serve {spec.family} ({FAMILIES[spec.family].label})"
    )
    with pytest.raises(ValueError, match="SGLang 0.5.23 does not serve"):
        sz.split_memory(spec, 8 << 30)


def _entry_names() -> set[str]:
    """Every architecture SGLang's model modules register (``EntryClass``, read off the source:
    some modules import GPU-only packages)."""
    import ast
    import pathlib

    import sglang.srt.models as models

    names: set[str] = set()
    for path in pathlib.Path(list(models.__path__)[0]).glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EntryClass":
                items = node.value.elts if isinstance(node.value, ast.List) else [node.value]
                names |= {x.id for x in items if isinstance(x, ast.Name)}
    return names


def test_ling_ring_architectures_as_the_engines_register_them():
    """Which Ling / Ring architecture each engine serves: ``BailingMoeV2_5ForCausalLM`` (the
    lightning + MLA layout, ``model_type`` ``bailing_hybrid``) and ``BailingMoeV3ForCausalLM``
    (Ling 3.0, KDA + MLA, the same ``model_type``) by both; ``BailingMoeLinearV2ForCausalLM``
    (the Ring-*-linear-2.0 checkpoints, ``model_type`` ``bailing_moe_linear``) by neither."""
    vllm_registry = pytest.importorskip("vllm.model_executor.models.registry")
    vllm_names = set(vllm_registry._TEXT_GENERATION_MODELS)
    sglang_names = _entry_names()
    for arch in ("BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM"):
        assert arch in sglang_names and arch in vllm_names, arch
    assert "BailingMoeLinearV2ForCausalLM" not in sglang_names | vllm_names
    # the lab: the lightning layout is sized (by model_type or by architecture), Ling 3.0's
    # KDA layout sized as KDA (a conv kernel under the V2.5 architecture refused: SGLang would
    # build KDA layers, vLLM lightning ones), the Ring-*-linear-2.0 layout refused as served by
    # neither
    lightning = fc.raw("bailing_hybrid")
    assert sz.from_hf_config(lightning).family == "bailing_hybrid"
    assert sz.from_hf_config({**lightning, "model_type": "bailing_moe_linear"}).n_attn_layers == 2
    # without head_dim SGLang's class takes its default 128 (the lab refuses where vLLM's
    # hidden / heads differs)
    from sglang.srt.configs.bailing_hybrid import BailingHybridConfig

    no_hd = {k: v for k, v in lightning.items() if k != "head_dim"}
    assert BailingHybridConfig(**{**no_hd, "hidden_size": 4096}).head_dim == 128
    with pytest.raises(ValueError, match="lightning head size"):
        sz.from_hf_config({**no_hd, "hidden_size": 4096})
    kda = {**lightning, "architectures": ["BailingMoeV3ForCausalLM"], "short_conv_kernel_size": 4}
    assert sz.from_hf_config(kda).linear_kind == "kda"
    with pytest.raises(ValueError, match="under BailingMoeV2_5ForCausalLM"):
        sz.from_hf_config({**lightning, "short_conv_kernel_size": 4})
    ring = {**lightning, "model_type": "bailing_moe_linear"}
    ring["architectures"] = ["BailingMoeLinearV2ForCausalLM"]
    with pytest.raises(ValueError, match="not one of the hybrid families"):
        sz.from_hf_config(ring)
