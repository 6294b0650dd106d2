"""An EAGLE3 drafter with its own config in vLLM 0.33's KV cache plan, against vLLM's own code.

The target's specs are built as ``test_sizing_configs_vs_vllm.real_plan`` builds them (the
real ``Platform._align_hybrid_block_size``, the model class's state shapes); the drafter's
layers are ``FullAttentionSpec``s of the DRAFT config's shape (heads from vLLM's own
``ModelConfig.get_num_kv_heads`` on the draft, head size from its config) at the aligned block
size, marked ``is_draft`` as ``GPUModelRunner.get_kv_cache_spec`` marks them. Then the real
``get_kv_cache_groups`` (``unify_kv_cache_spec_page_size`` and
``_get_kv_cache_groups_uniform_page_size``), ``get_kv_cache_config_from_groups`` and
``get_kv_cache_capacity`` run. Claimed equal: ``sizing.vllm_plan(..., eagle=draft)``'s groups,
group size, draft block, blocks, tokens and concurrency. Drafts: the shipped Qwen3-Next EAGLE3
config, and stand-ins of other shapes (smaller page that divides, one that does not, a larger
page) to reach every branch of the unification.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing._eagle import read_eagle_draft, shipped_drafts

torch = pytest.importorskip("torch")
cv = pytest.importorskip("test_sizing_configs_vs_vllm")
fc, kp, ku, kvi = cv.fc, cv.kp, cv.ku, cv.kvi

SHIPPED = "qwen3-next-80b-a3b-eagle3"
TARGETS = [n for n in cv.NAMES if fc.spec(n).family in ("qwen3_next", "qwen3_5_text")]
TARGETS += [n for n in cv.NAMES if fc.spec(n).family in ("qwen3_5_moe_text", "nemotron_h")]
# (num_key_value_heads, head_dim) stand-ins beside the shipped draft's (2, 256)
SHAPES = [None, (4, 128), (3, 128), (8, 256), (16, 128)]


def _draft_raw(shape: tuple[int, int] | None, layers: int = 1) -> dict:
    raw = dict(shipped_drafts()[SHIPPED]["config"])
    if shape is not None:
        raw["num_key_value_heads"], raw["head_dim"] = shape
    raw["num_hidden_layers"] = layers
    return raw


def _draft_spec(raw: dict, bs: int, tp: int, kv: str):
    """The drafter's attention spec as vLLM registers it: heads from vLLM's
    ``ModelConfig.get_num_kv_heads`` on the draft config, head size its ``head_dim``."""
    arch = SimpleNamespace(total_num_kv_heads=raw["num_key_value_heads"], head_size=0)
    mc = SimpleNamespace(use_mla=False, model_arch_config=arch)
    pc = SimpleNamespace(tensor_parallel_size=tp)
    heads = cv.ModelConfig.get_num_kv_heads(mc, pc)
    return kvi.FullAttentionSpec(
        block_size=bs, num_kv_heads=heads, head_size=raw["head_dim"], dtype=cv.TORCH[kv]
    )


def real_eagle_plan(monkeypatch, name, tp, kv, length, avail, mode, raw, k):
    """vLLM's groups, config and capacity with the drafter's layers registered."""
    spec = fc.spec(name)
    shapes, dtypes, checkpoint = cv.real_state(name, tp, None, k)
    model = SimpleNamespace(
        get_mamba_state_shape_from_config=lambda _vc: shapes,
        get_mamba_state_dtype_from_config=lambda _vc: dtypes,
    )
    cc = cv.CacheConfig()
    cc.cache_dtype, cc.mamba_cache_mode, cc.kv_cache_layout = cv.CACHE_DTYPE[kv], mode, "LBHNC"
    vc = SimpleNamespace(
        cache_config=cc,
        model_config=cv._model_config(spec, length),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp, decode_context_parallel_size=1),
        attention_config=SimpleNamespace(hisparse_config=None),
        scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=False),
    )
    with monkeypatch.context() as m:
        m.setattr("vllm.config.vllm.set_current_vllm_config", lambda _c: nullcontext())
        m.setattr(
            "vllm.model_executor.layers.mamba.abstract.get_mamba_prefill_checkpoint_alignment",
            lambda _c: None,
        )
        m.setattr(cv.ModelRegistry, "resolve_model_cls", lambda a, model_config=None: (model, a))
        m.setattr(cv.Platform, "_find_non_ssm_backends", classmethod(lambda c, v: [cv._Backend]))
        cv.Platform._align_hybrid_block_size(vc, cv._Backend)
    bs = cc.block_size
    heads = vc.model_config.get_num_kv_heads(vc.parallel_config)
    attn = kvi.FullAttentionSpec(
        block_size=bs, num_kv_heads=heads, head_size=spec.attn_head_dim, dtype=cv.TORCH[kv]
    )
    mamba = cv.mamba_spec(cc, shapes, dtypes, mode, k, checkpoint)
    layers = {f"a{i}": attn for i in range(spec.n_attn_layers)}
    layers.update({f"m{i}": mamba for i in range(spec.n_linear_layers)})
    draft = dataclasses.replace(_draft_spec(raw, bs, tp, kv), is_draft=True)
    layers.update({f"draft.layers.{i}": draft for i in range(raw["num_hidden_layers"])})
    warned: list[str] = []
    with monkeypatch.context() as m:  # the "Add N padding layers" lines vLLM logs
        m.setattr(kp.logger, "warning", lambda msg, *a: warned.append(msg % a))
        groups = kp.get_kv_cache_groups(vc, layers)
    config = kp.get_kv_cache_config_from_groups(vc, groups, avail)
    tokens, conc = ku.get_kv_cache_capacity(vc, config)
    return cc, groups, config, tokens, conc, warned


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "kv, mode, length", [("bfloat16", "align", 131_072), ("fp8_e4m3", "none", 32_768)]
)
@pytest.mark.parametrize("layers", [1, 2])
def test_eagle_draft_layers_in_vllms_kv_groups(monkeypatch, name, shape, kv, mode, length, layers):
    raw = _draft_raw(shape, layers)
    draft = read_eagle_draft(raw, "draft")
    avail = 23 * (1 << 30) + 123_456_789
    k = 3
    for tp in fc.tps(name, 4):
        cc, groups, config, tokens, conc, warned = real_eagle_plan(
            monkeypatch, name, tp, kv, length, avail, mode, raw, k
        )
        p = sz.vllm_plan(
            fc.spec(name),
            avail,
            tp,
            kv,
            max_model_len=length,
            mamba_cache_mode=mode,
            num_speculative_tokens=k,
            eagle=draft,
        )
        names = {n for g in groups for n in g.layer_names}
        real_draft = [g for g in groups if all(n.startswith("draft.") for n in g.layer_names)]
        in_draft = [g for g in groups if any(n.startswith("draft.") for n in g.layer_names)]
        assert p.block_size == cc.block_size
        assert p.group_size == max(len(g.layer_names) for g in groups)
        assert p.attn_groups + p.mamba_groups + p.draft_groups == len(groups)
        assert p.draft_groups == len(real_draft)
        assert p.draft_block_size == in_draft[0].kv_cache_spec.block_size
        assert p.page_bytes == groups[0].kv_cache_spec.page_size_bytes
        assert p.num_blocks == config.num_blocks
        assert (p.kv_cache_tokens, p.max_concurrency) == (tokens, conc)
        assert sum(n.startswith("draft.") for n in names) == layers
        padding = [x for x in sz.vllm_log_lines(p) if x.startswith("Add ")]
        assert sorted(padding) == sorted(x for x in warned if x.startswith("Add "))


def test_shipped_draft_pairs_with_a_shipped_target():
    entry = shipped_drafts()[SHIPPED]
    assert entry["pairs_with"] in fc.CONFIGS
    target = fc.spec(entry["pairs_with"])
    draft = read_eagle_draft(SHIPPED)
    # the head's attention is the target's: 2 KV heads of 256
    assert (draft.num_kv_heads, draft.head_dim) == (target.attn_kv_heads, target.attn_head_dim)
