"""SGLang 0.5.23's own config classes built from the configs tests/real sizes (tests/real only).

``sglang_config(name)`` returns the family's real config class (``sizing.families.FAMILIES``
names it: ``KimiLinearConfig``, ``KimiK3Config``, ``Qwen3NextConfig``, ``Qwen3_5Config`` /
``Qwen3_5MoeConfig``, ``NemotronHConfig``, ``FalconH1Config``, ``Lfm2Config``, ...) built from
``sizing_family_configs.CONFIGS[name]``, unwrapped to its text config, with the ``head_dim``
``ModelConfig`` fills in when the config has none. Under ``runtime_tp(monkeypatch, tp)`` the
runtime TP size they read (``get_parallel()``, ``linear_attn_tp_size()``) is ``tp``.
``cell_size`` runs ``DefaultPoolConfigurator._compute_cell_size`` on a stand-in configurator
carrying the real hf config.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from types import SimpleNamespace

import sglang.srt.configs.kimi_k3 as k3
import sglang.srt.configs.kimi_linear as kl
import sglang.srt.configs.nemotron_h as nh
import sglang.srt.configs.qwen3_5 as q35
import sglang.srt.configs.qwen3_next as q3n
import sglang.srt.layers.cp.utils as cp_utils
import sglang.srt.model_executor.pool_configurator as pc
import sizing_family_configs as fc
import torch
from sglang.srt.configs.model_config import ModelConfig

from kda_core import sizing as sz
from kda_core.sizing.families import FAMILIES

CLASSES = {  # by the config's top-level model_type, where it is not the family's class
    "kimi_k3": k3.KimiK3Config,
    "qwen3_5_moe": q35.Qwen3_5MoeConfig,
}
MODULES = {  # SGLang config class -> its module under sglang.srt.configs
    "FalconH1Config": "falcon_h1",
    "Lfm2Config": "lfm2",
    "Lfm2MoeConfig": "lfm2_moe",
    "NemotronHConfig": "nemotron_h",
    "NemotronHPuzzleConfig": "nemotron_h",
    "GraniteMoeHybridConfig": "granitemoehybrid",
    "BailingHybridConfig": "bailing_hybrid",
    "JetNemotronConfig": "jet_nemotron",
    "ZayaConfig": "zaya",
    "MiniCPMHybridConfig": "minicpm",
    "InternS2MobiusConfig": "interns2_mobius",
    "InternS2PreviewConfig": "interns2preview",
    "KimiLinearConfig": "kimi_linear",
    "Qwen3NextConfig": "qwen3_next",
    "Qwen3_5Config": "qwen3_5",
}
_TP_MODULES = ("falcon_h1", "lfm2", "lfm2_moe", "granitemoehybrid", "bailing_hybrid")
_TP_MODULES += ("jet_nemotron", "zaya", "minicpm")
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn}


@contextmanager
def runtime_tp(monkeypatch, tp: int):
    par = SimpleNamespace(attn_tp_size=tp, tp_size=tp, attn_dcp_size=1, attn_cp_size=1)
    with monkeypatch.context() as m:
        for mod in (nh, kl, q3n, pc):
            m.setattr(mod, "get_parallel", lambda: par)
        for name in _TP_MODULES:
            m.setattr(f"sglang.srt.configs.{name}.get_parallel", lambda: par)
        m.setattr(q3n, "linear_attn_tp_size", lambda: tp)
        m.setattr(q3n, "_is_cpu", False)  # the CPU backend re-pads heads; GPUs do not
        m.setattr(cp_utils, "is_glm_dsa_cache_layer_split_enabled", lambda _r: False)
        yield


def text_config(cfg):
    return getattr(cfg, "text_config", cfg)


def sglang_config(name: str):
    raw = fc.raw(name)
    cls = CLASSES.get(raw["model_type"])
    if cls is None:
        cls_name = FAMILIES[fc.spec(name).family].sglang
        module = importlib.import_module(f"sglang.srt.configs.{MODULES[cls_name]}")
        cls = getattr(module, cls_name)
    cfg = text_config(cls(**raw))
    if getattr(cfg, "head_dim", None) is None:  # ModelConfig.__init__ fills it so
        cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
    return cfg


def cell_size(cfg, spec: sz.ModelSpec, tp: int, kv_dtype: str) -> int:
    """``DefaultPoolConfigurator._compute_cell_size`` for the real config's attention layers."""
    kv_heads = getattr(cfg, "num_key_value_heads", 1)
    model_config = SimpleNamespace(
        hf_config=cfg,
        kv_lora_rank=getattr(cfg, "kv_lora_rank", None),
        qk_rope_head_dim=getattr(cfg, "qk_rope_head_dim", None),
        head_dim=getattr(cfg, "head_dim", None),
        v_head_dim=getattr(cfg, "head_dim", None),
    )
    stand_in = SimpleNamespace(get_total_num_kv_heads=lambda: kv_heads, is_draft_model=False)
    model_config.get_num_kv_heads = lambda t, d=1: ModelConfig.get_num_kv_heads(stand_in, t, d)
    kvc = SimpleNamespace(
        model_config=model_config,
        kv_cache_dtype=TORCH[kv_dtype],
        server_args=SimpleNamespace(enable_hisparse=False),
        use_mla_backend=spec.attn_kind == "mla",
    )
    qsa = pc.DefaultPoolConfigurator._compute_qsa_cell_size
    me = SimpleNamespace(kv_cache_dtype_str=kv_dtype, _compute_qsa_cell_size=qsa)
    layers = len(cfg.full_attention_layer_ids)
    return pc.DefaultPoolConfigurator._compute_cell_size(me, kvc, layers)


def pool_tokens(cell: int, available_bytes: int, page_size: int) -> int:
    """``DefaultPoolConfigurator.calculate_pool_sizes``: tokens in whole pages."""
    me = SimpleNamespace(_cell_size=cell, _fixed_overhead_bytes=0, _zero_kv_max_tokens=0)
    cfg = pc.DefaultPoolConfigurator.calculate_pool_sizes(me, available_bytes, page_size)
    return cfg.max_total_num_tokens
