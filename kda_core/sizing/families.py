"""Every hybrid family SGLang 0.5.23 or vLLM 0.33 serves: its reader and what serves it.

``FAMILIES`` maps a config's ``model_type`` to a family: a label, the reader that turns the
config into ModelSpec fields (``_readers``, ``_readers_mamba``, ``_readers_bailing``), and the
class each engine serves it with ("" = that engine does not serve the family; found in SGLang's
``srt/configs/`` + ``srt/models/`` and vLLM's ``model_executor/models/registry.py``).
``engine_refusal(spec, engine)`` is the sentence a page or the command line prints instead of an
engine's numbers ("" when the engine serves the spec). docs/sizing.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kda_core.sizing import _readers as r
from kda_core.sizing import _readers_bailing as b
from kda_core.sizing import _readers_mamba as m
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.presets import ModelSpec


@dataclass(frozen=True, slots=True)
class _Family:
    """A hybrid family: ``read`` (config dict -> ModelSpec fields) and the class each engine
    serves it with ("" = not served); ``vllm_ssm_flag`` False: vLLM's classes for it never read
    ``--mamba-ssm-cache-dtype`` (the state dtype is the kind's ``auto``)."""

    label: str
    read: Callable[[dict], dict[str, Any]]
    sglang: str
    vllm: str
    vllm_ssm_flag: bool = True


_KIMI = _Family("Kimi-Linear", r.read_kimi, "KimiLinearConfig", "KimiLinearForCausalLM")
_QWEN35 = _Family("Qwen3.5", r.read_qwen3_5, "Qwen3_5Config", "Qwen3_5ForConditionalGeneration")
_INTERNS2 = _Family(
    "InternS2 (GDN)", r.read_gdn, "InternS2MobiusConfig", "InternS2MobiusForConditionalGeneration"
)
_NEMOTRON = _Family("Nemotron-H", m.read_nemotron_h, "NemotronHConfig", "NemotronHForCausalLM")
_LFM2 = _Family("LFM2", r.read_lfm2, "Lfm2Config", "Lfm2ForCausalLM")

FAMILIES: dict[str, _Family] = {
    "kimi_linear": _KIMI,
    "kimi_k3": _Family("Kimi K3", r.read_kimi, "KimiK3Config", "KimiK3ForConditionalGeneration"),
    "qwen3_next": _Family("Qwen3-Next", r.read_gdn, "Qwen3NextConfig", "Qwen3NextForCausalLM"),
    "qwen3_5": _QWEN35,
    "qwen3_5_text": _QWEN35,
    "qwen3_5_moe": _QWEN35,
    "qwen3_5_moe_text": _QWEN35,
    "interns2_mobius": _INTERNS2,
    "interns2_mobius_text": _INTERNS2,
    "intern_s2_preview": _Family(
        "InternS2-Preview (GDN)",
        r.read_gdn,
        "InternS2PreviewConfig",
        "InternS2PreviewForConditionalGeneration",
    ),
    "nemotron_h": _NEMOTRON,
    "nemotron_h_puzzle": _Family(
        "Nemotron-H Puzzle", m.read_nemotron_h, "NemotronHPuzzleConfig", "NemotronHForCausalLM"
    ),
    "falcon_h1": _Family("Falcon-H1", m.read_falcon_h1, "FalconH1Config", "FalconH1ForCausalLM"),
    "granitemoehybrid": _Family(
        "Granite-4.0-H",
        m.read_granitemoehybrid,
        "GraniteMoeHybridConfig",
        "GraniteMoeHybridForCausalLM",
    ),
    "lfm2": _LFM2,
    "lfm2_moe": _Family("LFM2-MoE", r.read_lfm2, "Lfm2MoeConfig", "Lfm2MoeForCausalLM"),
    # vLLM: BailingMoeV25ForCausalLM (lightning: linear_attention_state_dtype, the cache dtype)
    # and BailingMoeV3ForCausalLM (Ling 3.0, KDA: get_mamba_state_dtype_from_config and
    # BailingMoeV3KimiDeltaAttention.get_state_dtype call kda_state_dtype without the SSM flag,
    # so its recurrent state is float32 whatever the flag)
    "bailing_hybrid": _Family(
        "Ling / Ring linear, Ling 3.0",
        b.read_bailing,
        "BailingHybridConfig",
        "BailingMoeV25ForCausalLM",
        vllm_ssm_flag=False,
    ),
    "jet_nemotron": _Family("Jet-Nemotron", r.read_jet_nemotron, "JetNemotronConfig", ""),
    "minicpm_sala": _Family("MiniCPM hybrid", r.read_minicpm_sala, "MiniCPMHybridConfig", ""),
    "zaya": _Family("ZAYA1", r.read_zaya, "ZayaConfig", ""),
    "jamba": _Family("Jamba", m.read_jamba, "", "JambaForCausalLM"),
    "zamba2": _Family("Zamba2", m.read_zamba2, "", "Zamba2ForCausalLM"),
    "olmo_hybrid": _Family("OLMo-Hybrid", r.read_olmo_hybrid, "", "OlmoHybridForCausalLM"),
}


def engine_refusal(spec: ModelSpec, engine: str) -> str:
    """ "" when ``engine`` ("sglang" / "vllm") serves ``spec``; else the sentence saying that
    it does not, by name (a family from the table, or the spec's linear kind)."""
    version = {"sglang": "SGLang 0.5.23", "vllm": "vLLM 0.33"}[engine]
    fam = FAMILIES.get(spec.family)
    if fam is not None:
        served = fam.sglang if engine == "sglang" else fam.vllm
        return "" if served else f"{version} does not serve {spec.family} ({fam.label})"
    kind = LINEAR_KINDS[spec.linear_kind]
    served = kind.sglang if engine == "sglang" else kind.vllm
    return "" if served else f"{version} serves no {kind.label} model"
