"""Every config SGLang serves (``sizing_family_configs``: the shipped ones and one per family)
against SGLang 0.5.23's own code, at every TP size of 1-8 the heads allow and several dtypes.

The real config classes (``sglang_configs``) give the per-slot state (``mamba2_cache_params.
mamba_cache_per_req``), the ReplaySSM ring (``replayssm_ring_bytes_per_req``), the linear and
attention layer ids, and the KV cell (``DefaultPoolConfigurator._compute_cell_size``); the real
``KVCacheConfigurator._handle_max_mamba_cache`` then splits a budget and
``DefaultPoolConfigurator.calculate_pool_sizes`` rounds the KV tokens to pages. Claimed equal:
``sizing.slot_bytes`` / ``replayssm_ring_bytes`` / ``kv_bytes_per_token`` / ``split_memory``
(slots and whole-page KV tokens) for every case.
"""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing._kinds import LINEAR_KINDS

kvc = pytest.importorskip("sglang.srt.mem_cache.kv_cache_configurator")
mu = pytest.importorskip("sglang.srt.configs.mamba_utils")
sc = pytest.importorskip("sglang_configs")
fc = pytest.importorskip("sizing_family_configs")

GIB = 1 << 30
NAMES = sorted(n for n in fc.CONFIGS if not sz.engine_refusal(fc.spec(n), "sglang"))
CASES = [(n, tp) for n in NAMES for tp in fc.tps(n, 4)]


def _params(cfg, ssm_dtype: str):
    p = cfg.mamba2_cache_params
    dtype = mu.Mamba2StateDType(conv=sc.TORCH["bfloat16"], temporal=sc.TORCH[ssm_dtype])
    return dataclasses.replace(p, dtype=dtype)


@pytest.mark.parametrize("name, tp", CASES)
def test_state_ring_layers_and_cell_are_sglangs(monkeypatch, name, tp):
    spec = fc.spec(name)
    with sc.runtime_tp(monkeypatch, tp):
        cfg = sc.sglang_config(name)
        assert len(cfg.mamba2_cache_params.layers) == spec.n_linear_layers
        assert len(cfg.full_attention_layer_ids) == spec.n_attn_layers
        for ssm in ("float32", "bfloat16"):
            p = _params(cfg, ssm)
            assert sz.slot_bytes(spec, tp, ssm, "bfloat16") == p.mamba_cache_per_req
            if LINEAR_KINDS[spec.linear_kind].ring:
                ring = sum(sz.replayssm_ring_bytes(spec, 1, tp, 16, "bfloat16").values())
                assert ring == p.replayssm_ring_bytes_per_req(record_len=16)
        for kv in ("bfloat16", "fp8_e4m3"):
            assert sz.kv_bytes_per_token(spec, tp, kv) == sc.cell_size(cfg, spec, tp, kv)
        # the config's own declared SSM dtype is what SGLang uses by default
        default = cfg.mamba2_cache_params.dtype.temporal
        assert default == sc.TORCH[spec.sglang_ssm_dtype]


def _configurator(params, spec: sz.ModelSpec, context_len: int = 262_144):
    return SimpleNamespace(
        mambaish_config=SimpleNamespace(mamba2_cache_params=params),
        pp_size=1,
        attn_dp_size=1,
        fused_entry_bytes=lambda _name: None,
        spec_algorithm=SimpleNamespace(is_none=lambda: True),
        hybrid_gdn_config=object() if LINEAR_KINDS[spec.linear_kind].ring == "gdn" else None,
        hybrid_kda_config=object() if LINEAR_KINDS[spec.linear_kind].ring == "kda" else None,
        extra_mamba_cache_bytes_per_req=0,
        model_config=SimpleNamespace(context_len=context_len, num_hidden_layers=spec.n_layers),
    )


def _sglang_split(monkeypatch, params, spec, rest: int, ratio: float, replayssm: bool):
    sched = SimpleNamespace(
        max_mamba_cache_size=None,
        mamba_full_memory_ratio=ratio,
        max_running_requests=64,
        disable_overlap_schedule=False,
    )
    mamba = SimpleNamespace(
        enable_mamba_extra_buffer=True,
        enable_mamba_extra_buffer_lazy=False,
        enable_linear_replayssm_spec=replayssm,
        linear_replayssm_cache_len=16,
    )
    with monkeypatch.context() as m:
        m.setattr(kvc, "get_schedule", lambda: sched)
        m.setattr(kvc, "get_exec", lambda: SimpleNamespace(mamba=mamba))
        m.setattr(kvc, "get_memory", lambda: SimpleNamespace(disable_radix_cache=False))
        m.setattr(kvc, "get_spec", lambda: SimpleNamespace(speculative_num_draft_tokens=0))
        m.setattr(
            kvc,
            "get_context",
            lambda: SimpleNamespace(override=lambda _name, **kw: vars(sched).update(kw)),
        )
        env = SimpleNamespace(get=lambda: False)
        m.setattr(kvc, "envs", SimpleNamespace(SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=env))
        me = _configurator(params, spec)
        left_gib = kvc.KVCacheConfigurator._handle_max_mamba_cache(me, rest / GIB)
    return sched.max_mamba_cache_size, int(left_gib * GIB)


SPLITS = list(itertools.product(("float32", "bfloat16"), ("bfloat16", "fp8_e4m3"), (0.5, 0.9, 3.0)))


@pytest.mark.parametrize("name, tp", CASES)
@pytest.mark.parametrize("replayssm, page", [(False, 1), (True, 64)])
def test_split_memory_is_sglangs(monkeypatch, name, tp, replayssm, page):
    spec = fc.spec(name)
    if replayssm and not LINEAR_KINDS[spec.linear_kind].ring:
        pytest.skip("ReplaySSM applies to the GDN- and KDA-shaped states only")
    rest = 21 * GIB + 987_654_321
    n = 0
    with sc.runtime_tp(monkeypatch, tp):
        cfg = sc.sglang_config(name)
        for ssm, kv, ratio in SPLITS:
            params = _params(cfg, ssm)
            slots, left = _sglang_split(monkeypatch, params, spec, rest, ratio, replayssm)
            tokens = sc.pool_tokens(sc.cell_size(cfg, spec, tp, kv), left, page)
            ours = sz.split_memory(
                spec,
                rest,
                ratio,
                tp,
                ssm,
                "bfloat16",
                kv,
                replayssm=replayssm,
                page_size=page,
                max_running_requests=64,
            )
            assert (ours.max_mamba_cache_size, ours.kv_bytes) == (slots, left), (ssm, kv, ratio)
            assert ours.kv_tokens == tokens, (ssm, kv, ratio)
            n += 1
    assert n == len(SPLITS)
