"""An MTP draft's KV in SGLang 0.5.23's pool sizing, against SGLang's own code.

For a path-less NEXTN/EAGLE draft SGLang's ``_resolve_eagle_aux_hidden_state`` (run here on
the real config class's ``num_nextn_predict_layers``, read as ``ModelConfig`` reads it) sets
``eagle_draft_num_layers``; the real ``DefaultPoolConfigurator.__init__`` then adds the draft's
share to the per-token cell and ``calculate_pool_sizes`` turns a byte budget into tokens.
Claimed equal: ``sizing.split_memory(..., mtp=True)`` (the draft's cell share and the KV
tokens) for the Qwen3-Next and Qwen3.5 configs with and without the MTP fields; SGLang
registers no MTP draft class for Kimi, which the lab refuses by name.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing.families import FAMILIES

sc = pytest.importorskip("sglang_configs")
fc = pytest.importorskip("sizing_family_configs")
aux = pytest.importorskip("sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state")
pc = sc.pc

GIB = 1 << 30
NAMES = [n for n in fc.CONFIGS if fc.spec(n).family == "qwen3_next"]
NAMES += [n for n in fc.CONFIGS if fc.spec(n).family.startswith("qwen3_5")]
KIMI = [n for n in fc.CONFIGS if fc.spec(n).family == "kimi_linear"]


def _raw(name: str, nextn: int | None, mtp_hidden: int | None) -> dict:
    raw = fc.raw(name)
    text = raw.get("text_config", raw)
    for key, v in (("num_nextn_predict_layers", nextn), ("mtp_num_hidden_layers", mtp_hidden)):
        if v is not None:
            text[key] = v
    return raw


def _config(name: str, raw: dict):
    """The real config class SGLang reads (``sglang_configs.sglang_config`` on ``raw``)."""
    cls = sc.CLASSES.get(raw["model_type"])
    if cls is None:
        cls_name = FAMILIES[fc.spec(name).family].sglang
        module = importlib.import_module(f"sglang.srt.configs.{sc.MODULES[cls_name]}")
        cls = getattr(module, cls_name)
    return sc.text_config(cls(**raw))


def _draft_layers(monkeypatch, cfg) -> int | None:
    """``eagle_draft_num_layers`` from the real ``_resolve_eagle_aux_hidden_state`` for a
    path-less MTP draft; the target's ``num_nextn_predict_layers`` is ``ModelConfig.
    _derive_model_shapes``'s ``getattr(hf_text_config, "num_nextn_predict_layers", None)``."""
    target = SimpleNamespace(
        num_nextn_predict_layers=getattr(cfg, "num_nextn_predict_layers", None),
        is_hybrid_swa=False,
    )
    draft_mode = SimpleNamespace(num_nextn_predict_layers=1, is_hybrid_swa=False)
    return resolved_draft_layers(monkeypatch, target, None, lambda *a, **k: draft_mode, False)


def resolved_draft_layers(monkeypatch, target, path, draft_config, eagle3: bool) -> int | None:
    """``eagle_draft_num_layers`` as SGLang's real ``_resolve_eagle_aux_hidden_state`` sets it
    for ``target``, with the draft at ``path`` (None: none) read by ``draft_config`` (standing
    in for ``ModelConfig.from_server_args``)."""
    spec = SimpleNamespace(speculative_draft_model_path=path, speculative_draft_model_revision=None)
    with monkeypatch.context() as m:
        m.setattr(aux, "get_spec", lambda: spec)
        m.setattr(aux.ModelConfig, "from_server_args", draft_config)
        out = aux.SpecAuxHiddenStateConfig()
        algo = SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False)
        algo.is_eagle3 = lambda: eagle3
        aux._resolve_eagle_aux_hidden_state(
            config=out,
            server_args=None,
            model_config=target,
            spec_algorithm=algo,
            is_draft_worker=False,
        )
    return out.eagle_draft_num_layers


def _configurator(monkeypatch, cfg, spec, tp: int, kv: str, draft: int | None):
    """The real ``DefaultPoolConfigurator`` built for the target with the draft's layers."""
    full = list(cfg.full_attention_layer_ids)
    mc = SimpleNamespace(
        hf_config=cfg,
        context_len=spec.context_len or 4096,
        kv_lora_rank=getattr(cfg, "kv_lora_rank", None),
        qk_rope_head_dim=getattr(cfg, "qk_rope_head_dim", None),
        head_dim=getattr(cfg, "head_dim", None),
        v_head_dim=getattr(cfg, "head_dim", None),
    )
    heads = getattr(cfg, "num_key_value_heads", 1)
    stand_in = SimpleNamespace(get_total_num_kv_heads=lambda: heads, is_draft_model=False)
    mc.get_num_kv_heads = lambda t, d=1: sc.ModelConfig.get_num_kv_heads(stand_in, t, d)
    algo = SimpleNamespace(
        is_eagle=lambda: True, is_standalone=lambda: False, is_dflash_family=lambda: False
    )
    kvc = SimpleNamespace(
        model_config=mc,
        kv_cache_dtype=sc.TORCH[kv],
        kv_cache_dtype_str=kv,
        server_args=SimpleNamespace(enable_hisparse=False),
        use_mla_backend=spec.attn_kind == "mla",
        layer_info=SimpleNamespace(start_layer=0, end_layer=10_000),
        pp_size=1,
        is_draft_worker=False,
        spec_algorithm=algo,
        spec_aux_config=SimpleNamespace(eagle_draft_num_layers=draft),
        fused_entry_bytes=lambda _name: None,
    )
    with monkeypatch.context() as m:
        m.setattr(pc, "mambaish_config", lambda _mc: SimpleNamespace(full_attention_layer_ids=full))
        m.setattr(pc, "compute_page_shard_scratch_bytes", lambda *_a, **_k: 0)
        m.setattr(pc, "get_schedule", lambda: SimpleNamespace(max_total_tokens=None))
        m.setattr(pc, "get_memory", lambda: SimpleNamespace(enable_hisparse=False))
        return pc.DefaultPoolConfigurator(kvc)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("nextn, mtp_hidden", [(None, None), (None, 2), (1, None), (3, 1)])
@pytest.mark.parametrize("kv, page", [("bfloat16", 1), ("fp8_e4m3", 64)])
def test_mtp_draft_cell_and_tokens_are_sglangs(monkeypatch, name, nextn, mtp_hidden, kv, page):
    raw = _raw(name, nextn, mtp_hidden)
    spec = sz.from_hf_config(raw, name)
    tp = fc.tps(name, 1)[0]
    rest = 21 * GIB + 987_654_321
    with sc.runtime_tp(monkeypatch, tp):
        cfg = _config(name, raw)
        draft = _draft_layers(monkeypatch, cfg)
        real = _configurator(monkeypatch, cfg, spec, tp, kv, draft)
        base = sc.cell_size(cfg, spec, tp, kv)
    ours = sz.split_memory(spec, rest, 0.9, tp, None, "bfloat16", kv, page_size=page, mtp=True)
    assert ours.draft_cell_bytes == real._cell_size - base
    assert (draft or 0) == (nextn or 0)  # the target's own field, never mtp_num_hidden_layers
    tokens = real.calculate_pool_sizes(ours.kv_bytes, page).max_total_num_tokens
    assert ours.kv_tokens == tokens
    off = sz.split_memory(spec, rest, 0.9, tp, None, "bfloat16", kv, page_size=page)
    assert off.kv_bytes == ours.kv_bytes and off.kv_tokens >= ours.kv_tokens
    # the draft layers SGLang builds but does not price: the one module of the rewritten draft
    unpriced = max(1 - (nextn or 0), 0)
    assert ours.draft_unpriced_bytes == unpriced * (base // spec.n_attn_layers) * ours.kv_tokens


def _entry_classes(module: str) -> list[str]:
    """The class names a model module registers (``EntryClass``), read off its source (the
    Kimi module imports GPU-only packages)."""
    import ast
    import pathlib

    import sglang.srt.models as models

    path = pathlib.Path(list(models.__path__)[0]) / f"{module}.py"
    tree = ast.parse(path.read_text())
    node = next(
        n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "EntryClass"
    )
    items = node.value.elts if isinstance(node.value, ast.List) else [node.value]
    return [x.id for x in items]


@pytest.mark.parametrize("name", KIMI)
def test_sglang_serves_no_mtp_draft_for_kimi(name):
    assert _entry_classes("kimi_k3") == [
        "KimiK3ForConditionalGeneration",
        "KimiK3LinearForCausalLM",
    ]
    assert _entry_classes("qwen3_next_mtp") == ["Qwen3NextForCausalLMMTP"]
    spec = sz.from_hf_config(_raw(name, 1, None), name)
    with pytest.raises(ValueError, match="SGLang 0.5.23 has no MTP draft model for Kimi"):
        sz.split_memory(spec, GIB, mtp=True)
