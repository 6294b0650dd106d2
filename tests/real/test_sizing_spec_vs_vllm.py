"""Speculative decoding in vLLM 0.33's KV cache plan, against vLLM's own code (the harness of
``test_sizing_configs_vs_vllm``: ``real_plan`` runs ``Platform._align_hybrid_block_size``,
``_get_kv_cache_groups_uniform_page_size``, ``get_kv_cache_config_from_groups`` and
``get_kv_cache_capacity``).

An MTP drafter's attention layers join as ``GPUModelRunner.get_kv_cache_spec`` registers them
(the target's attention spec marked ``is_draft``), with the module count the family's MTP class
builds; ``--use-replayssm`` on KDA (RecoverSSM) drops ``MambaSpec.num_speculative_blocks``
(the real ``MambaBase.get_kv_cache_spec``) and allocates ``KDARecoverSSMRecords`` (the real
class, run on CPU). Claimed equal: ``sizing.vllm_plan`` (block size, groups, blocks, tokens,
concurrency, the draft's layers, the records' bytes).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kda_core import sizing as sz

torch = pytest.importorskip("torch")
cv = pytest.importorskip("test_sizing_configs_vs_vllm")
fc = cv.fc
real_plan = cv.real_plan
NAMES = cv.NAMES


# Kimi: K3 only (vLLM's hf_config_override maps kimi_k3 to KimiK3MTP; Kimi Linear has no MTP
# drafter and its checkpoints name no module, which the lab refuses: the test below)
MTP_NAMES = [n for n in NAMES if fc.spec(n).family == "qwen3_next" or n == "kimi-k3"]
MTP_NAMES += [n for n in NAMES if fc.spec(n).family.startswith("qwen3_5")]


def _with_mtp(name: str, nextn: int | None, mtp_hidden: int | None) -> sz.ModelSpec:
    raw = fc.raw(name)
    text = raw.get("text_config", raw)
    for key, v in (("num_nextn_predict_layers", nextn), ("mtp_num_hidden_layers", mtp_hidden)):
        if v is not None:
            text[key] = v
    return sz.from_hf_config(raw, name)


def _modules_vllm_builds(spec: sz.ModelSpec, nextn, mtp_hidden) -> int:
    """The ``num_mtp_layers`` of the MTP class vLLM 0.33 builds for the family, read off
    ``Qwen3NextMultiTokenPredictor`` / ``Qwen3_5MultiTokenPredictor`` /
    ``KimiK3MultiTokenPredictor.__init__`` (independent of the lab's table)."""
    if spec.family == "qwen3_next":
        return nextn or 1  # getattr(config, "num_nextn_predict_layers", 1)
    if spec.family.startswith("qwen3_5"):
        return mtp_hidden or 1  # getattr(config, "mtp_num_hidden_layers", 1)
    return nextn  # config.num_nextn_predict_layers


def _n_predict(name: str, nextn, mtp_hidden) -> int | None:
    """vLLM's ``n_predict`` (``SpeculativeConfig.hf_config_override`` on the config), the
    default ``num_speculative_tokens`` of an MTP draft."""
    from vllm.config.speculative import SpeculativeConfig

    raw = fc.raw(name)
    text = raw.get("text_config", raw)
    if nextn is not None:
        text["num_nextn_predict_layers"] = nextn
    if mtp_hidden is not None:
        text["mtp_num_hidden_layers"] = mtp_hidden
    hf = SimpleNamespace(**{**text, "model_type": raw["model_type"]})
    hf.architectures = list(raw.get("architectures") or ["X"])
    if "text_config" in raw:
        hf.text_config = SimpleNamespace(**text)
    hf.update = lambda d: vars(hf).update(d)
    hf.get_text_config = lambda: getattr(hf, "text_config", hf)
    return SpeculativeConfig.hf_config_override(hf).n_predict


@pytest.mark.parametrize("name", MTP_NAMES)
@pytest.mark.parametrize("nextn, mtp_hidden", [(None, None), (1, None), (None, 2), (3, 1)])
@pytest.mark.parametrize("mode, length", [("align", 131_072), ("none", 32_768)])
def test_mtp_draft_layers_join_vllms_kv_groups(monkeypatch, name, nextn, mtp_hidden, mode, length):
    spec = _with_mtp(name, nextn, mtp_hidden)
    draft = _modules_vllm_builds(spec, nextn, mtp_hidden)
    if not draft:
        with pytest.raises(ValueError, match="num_nextn_predict_layers"):
            sz.vllm_plan(spec, 8 << 30, max_model_len=length, mtp=True, num_speculative_tokens=1)
        return
    n_predict = _n_predict(name, nextn, mtp_hidden)
    if not n_predict:  # vLLM asks for num_speculative_tokens; the lab too
        with pytest.raises(ValueError, match="num_speculative_tokens must be given"):
            sz.vllm_plan(spec, 8 << 30, max_model_len=length, mtp=True)
    k = n_predict or 1
    tp = fc.tps(name)[0]
    avail = 23 * (1 << 30) + 123_456_789
    cc, groups, config, tokens, conc, _ = real_plan(
        monkeypatch, name, tp, "bfloat16", None, length, avail, mode, draft=draft, k=k, blocks=k
    )
    knobs = {"max_model_len": length, "mamba_cache_mode": mode, "mtp": True}
    p = sz.vllm_plan(spec, avail, tp, num_speculative_tokens=0 if n_predict else 1, **knobs)
    assert (p.draft_attn_layers, p.num_speculative_tokens) == (draft, k)
    assert p.block_size == cc.block_size
    assert p.attn_groups + p.mamba_groups == len(groups)
    assert max(len(g.layer_names) for g in groups) == p.group_size
    assert p.num_blocks == config.num_blocks
    assert (p.kv_cache_tokens, p.max_concurrency) == (tokens, conc)
    # the draft's share: fewer tokens than the same plan without it, never more
    off = sz.vllm_plan(
        spec, avail, tp, max_model_len=length, mamba_cache_mode=mode, num_speculative_tokens=k
    )
    _, _, _, tokens_off, _, _ = real_plan(
        monkeypatch, name, tp, "bfloat16", None, length, avail, mode, k=k, blocks=k
    )
    assert off.kv_cache_tokens == tokens_off >= tokens


def test_kimi_k3_mtp_module_count_is_vllms_hf_config_override():
    # SpeculativeConfig.hf_config_override: a kimi_k3 config's n_predict is its text config's
    # num_nextn_predict_layers, the count KimiK3MultiTokenPredictor builds
    from vllm.config.speculative import SpeculativeConfig

    raw = fc.raw("kimi-k3")
    raw["text_config"]["num_nextn_predict_layers"] = 2
    hf = SimpleNamespace(
        model_type="kimi_k3",
        architectures=list(raw["architectures"]),
        text_config=SimpleNamespace(**raw["text_config"]),
    )
    hf.update = lambda d: vars(hf).update(d)
    out = SpeculativeConfig.hf_config_override(hf)
    assert (out.model_type, out.n_predict) == ("kimi_k3_mtp", 2)
    plan = sz.vllm_plan(sz.from_hf_config(raw, "k3"), 8 << 30, mtp=True)
    assert (plan.draft_attn_layers, plan.num_speculative_tokens) == (2, 2)


KDA_NAMES = [n for n in NAMES if fc.spec(n).linear_kind == "kda"]


def _real_speculative_blocks(k: int, use_replayssm: bool) -> int:
    """``MambaBase.get_kv_cache_spec``'s ``num_speculative_blocks`` (0 under ReplaySSM)."""
    from vllm.model_executor.layers.mamba.abstract import MambaBase

    cache = SimpleNamespace(
        mamba_block_size=16,
        mamba_page_size_padded=None,
        mamba_cache_mode="align",
        use_replayssm=use_replayssm,
    )
    me = SimpleNamespace(
        get_state_shape=lambda: ((3, 8), (1, 8, 8)),
        get_state_dtype=lambda: (torch.bfloat16, torch.float32),
        mamba_type="gdn_attention",
        is_kv_cache_tp_replicated=False,
    )
    vc = SimpleNamespace(cache_config=cache, num_speculative_tokens=k)
    return MambaBase.get_kv_cache_spec(me, vc).num_speculative_blocks


def _real_records_class():
    """``KDARecoverSSMRecords`` from vLLM's source (its module imports GPU-only packages)."""
    import ast
    import pathlib
    from dataclasses import dataclass

    import vllm

    path = pathlib.Path(vllm.__file__).parent / "models/kimi_k3/nvidia/ops/recoverssm.py"
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if getattr(n, "name", "") == "KDARecoverSSMRecords")
    scope = {"dataclass": dataclass, "torch": torch}
    exec(compile(ast.Module([node], []), str(path), "exec"), scope)
    return scope["KDARecoverSSMRecords"]


def _real_supports_replayssm(name: str) -> bool:
    """vLLM's ``supports_replayssm`` on the architecture's model class (what
    ``VllmConfig.validate_mamba_cached_kernel`` asks through ``ModelConfig``)."""
    import importlib

    from vllm.model_executor.models.interfaces import supports_replayssm

    module, cls = (
        cv._TEXT_GENERATION_MODELS.get(cv._arch(name)) or cv._MULTIMODAL_MODELS[cv._arch(name)]
    )
    if not module.startswith("vllm."):
        module = f"vllm.model_executor.models.{module}"
    return supports_replayssm(getattr(importlib.import_module(module), cls))


@pytest.mark.parametrize("name", KDA_NAMES)
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("mode, length", [("align", 131_072), ("none", 32_768)])
@pytest.mark.parametrize("use_replayssm", [False, True])
def test_recoverssm_blocks_and_records_are_vllms(monkeypatch, name, k, mode, length, use_replayssm):
    spec = fc.spec(name)
    tp = fc.tps(name)[-1]
    avail = 23 * (1 << 30) + 123_456_789
    if use_replayssm and not _real_supports_replayssm(name):  # Ling 3.0: vLLM refuses the flag
        with pytest.raises(ValueError, match="does not support --use-replayssm"):
            sz.vllm_plan(
                spec, avail, tp, max_model_len=length, num_speculative_tokens=k, use_replayssm=True
            )
        return
    blocks = _real_speculative_blocks(k, use_replayssm)
    assert blocks == (0 if use_replayssm else k)
    cc, groups, config, tokens, conc, _ = real_plan(
        monkeypatch, name, tp, "bfloat16", None, length, avail, mode, k=k, blocks=blocks
    )
    seqs = 8
    p = sz.vllm_plan(
        spec,
        avail,
        tp,
        max_model_len=length,
        mamba_cache_mode=mode,
        num_speculative_tokens=k,
        use_replayssm=use_replayssm,
        max_num_seqs=seqs,
    )
    assert (p.block_size, p.num_blocks) == (cc.block_size, config.num_blocks)
    assert (p.kv_cache_tokens, p.max_concurrency) == (tokens, conc)
    if not use_replayssm:
        assert p.recoverssm_records_bytes == 0
        return
    lin = fc.raw(name).get("text_config", fc.raw(name))["linear_attn_config"]
    rec = _real_records_class().allocate(
        seqs, lin["num_heads"] // tp, 1 + k, lin["head_dim"], torch.bfloat16, "cpu"
    )
    one_layer = sum(t.numel() * t.element_size() for t in (rec.correction, rec.key_gate))
    assert p.recoverssm_records_bytes == spec.n_linear_layers * one_layer


def test_kimi_linear_names_no_mtp_module():
    spec = fc.spec("kimi-linear-48b-a3b-instruct")
    with pytest.raises(ValueError, match="names no MTP module"):
        sz.vllm_plan(spec, 8 << 30, mtp=True, num_speculative_tokens=1)
