"""Differential: SGLang 0.5.23's ``KVCacheConfigurator`` arithmetic against ``kda_core.sizing``.

Runs in the real-engine venv (tests/real/, sglang==0.5.23 importable on CPU); skipped elsewhere.
The real methods run unbound on a stand-in ``self`` holding only what they read; the module's
server-args accessors (``get_schedule``, ``get_exec``, ``get_memory``, ``get_spec``,
``get_context``, ``envs``) are replaced for the duration of each call by the deployment under
test. The per-request state sizes come from SGLang's own ``KimiLinearCacheParams``.

Claimed equal: ``_calculate_mamba_ratio`` = ``sizing.slots_per_request``;
``resolve_max_num_reqs`` = ``sizing.slots.resolve_max_num_reqs``; ``_handle_max_mamba_cache``
= ``sizing.split_memory`` (slots, and the KV share to the byte); SGLang's per-slot and ring
bytes = ``sizing.slot_bytes`` / ``sizing.replayssm_ring_bytes``.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing.slots import resolve_max_num_reqs

kvc = pytest.importorskip("sglang.srt.mem_cache.kv_cache_configurator")
mu = pytest.importorskip("sglang.srt.configs.mamba_utils")
torch = pytest.importorskip("torch")

GIB = 1 << 30
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
STRATEGY_FLAGS = {  # strategy -> (radix off, extra buffer, lazy)
    "radix_off": (True, False, False),
    "no_buffer": (False, False, False),
    "extra_buffer": (False, True, False),
    "extra_buffer_lazy": (False, True, True),
}


def cache_params(model: str, tp: int, ssm_dtype: str, conv_dtype: str = "bfloat16"):
    spec = sz.preset(model)
    shape = mu.KimiLinearStateShape.create(
        tp_world_size=tp,
        num_heads=spec.kda_heads,
        head_dim=spec.head_v_dim,
        num_k_heads=spec.kda_heads,
        head_k_dim=spec.head_k_dim,
        conv_kernel_size=spec.conv_kernel,
    )
    dtype = mu.Mamba2StateDType(conv=TORCH_DTYPES[conv_dtype], temporal=TORCH_DTYPES[ssm_dtype])
    return mu.KimiLinearCacheParams(shape=shape, layers=list(range(spec.n_kda_layers)), dtype=dtype)


@contextmanager
def deployment(
    monkeypatch,
    *,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip: bool = False,
    ratio: float = 0.9,
    draft_tokens: int = 0,
    replayssm: bool = False,
    max_running: int | None = None,
    max_mamba_cache_size: int | None = None,
):
    radix_off, extra, lazy = STRATEGY_FLAGS[strategy]
    sched = SimpleNamespace(
        max_mamba_cache_size=max_mamba_cache_size,
        mamba_full_memory_ratio=ratio,
        max_running_requests=max_running,
        disable_overlap_schedule=not overlap,
    )
    mamba = SimpleNamespace(
        enable_mamba_extra_buffer=extra,
        enable_mamba_extra_buffer_lazy=lazy,
        enable_linear_replayssm_spec=replayssm,
        linear_replayssm_cache_len=16,
    )
    with monkeypatch.context() as m:
        m.setattr(kvc, "get_schedule", lambda: sched)
        m.setattr(kvc, "get_exec", lambda: SimpleNamespace(mamba=mamba))
        m.setattr(kvc, "get_memory", lambda: SimpleNamespace(disable_radix_cache=radix_off))
        m.setattr(
            kvc, "get_spec", lambda: SimpleNamespace(speculative_num_draft_tokens=draft_tokens)
        )
        m.setattr(
            kvc,
            "get_context",
            lambda: SimpleNamespace(override=lambda _name, **kw: vars(sched).update(kw)),
        )
        m.setattr(kvc, "_pd_prefill_skips_mamba_spec_state", lambda: False)
        env = SimpleNamespace(get=lambda: skip)
        m.setattr(kvc, "envs", SimpleNamespace(SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=env))
        yield sched


def configurator(params, draft_tokens: int = 0, context_len: int = 262_144):
    me = SimpleNamespace(
        mambaish_config=SimpleNamespace(mamba2_cache_params=params),
        pp_size=1,
        attn_dp_size=1,
        fused_entry_bytes=lambda _name: None,
        spec_algorithm=SimpleNamespace(is_none=lambda: draft_tokens == 0),
        hybrid_gdn_config=None,
        hybrid_kda_config=object(),
        extra_mamba_cache_bytes_per_req=0,
        model_config=SimpleNamespace(context_len=context_len, num_hidden_layers=93),
    )
    me._calculate_mamba_ratio = lambda: kvc.KVCacheConfigurator._calculate_mamba_ratio(me)
    return me


MODES = [
    (s, o, k)
    for s, o, k in itertools.product(STRATEGY_FLAGS, (True, False), (False, True))
    if not (s == "extra_buffer_lazy" and not o)
]


@pytest.mark.parametrize("strategy, overlap, skip", MODES)
def test_slots_per_request_is_sglangs_ratio(monkeypatch, strategy, overlap, skip):
    with deployment(monkeypatch, strategy=strategy, overlap=overlap, skip=skip):
        real = kvc.KVCacheConfigurator._calculate_mamba_ratio(configurator(None))
    assert sz.slots_per_request(strategy, overlap, skip) == real


def test_resolve_max_num_reqs_agrees(monkeypatch):
    n = 0
    grid = itertools.product(
        MODES, (4, 80, 119, 20_000), (1_000, 974_656, 1_947_648, 10**8), (4096, 262_144)
    )
    for (strategy, overlap, skip), slots, tokens, ctx in grid:
        for requested in (None, 8, 5000):
            with deployment(
                monkeypatch,
                strategy=strategy,
                overlap=overlap,
                skip=skip,
                max_running=requested,
                max_mamba_cache_size=slots,
            ):
                me = configurator(None, context_len=ctx)
                try:
                    real = kvc.KVCacheConfigurator.resolve_max_num_reqs(me, tokens)
                except RuntimeError:
                    real = None
            args = (slots, tokens, ctx, strategy, overlap, skip, requested)
            if real is None:
                with pytest.raises(ValueError, match="serves no request"):
                    resolve_max_num_reqs(*args)
            else:
                assert resolve_max_num_reqs(*args) == real, args
            n += 1
    assert n == len(MODES) * 4 * 4 * 2 * 3


@pytest.mark.parametrize("model, tp", [("kimi-k3", 8), ("kimi-k3", 4), ("kimi-linear-48b", 1)])
@pytest.mark.parametrize("ssm_dtype", ["float32", "bfloat16"])
def test_slot_and_ring_bytes_are_sglangs(model, tp, ssm_dtype):
    p = cache_params(model, tp, ssm_dtype)
    assert sz.slot_bytes(model, tp, ssm_dtype, "bfloat16") == p.mamba_cache_per_req
    ring = sum(sz.replayssm_ring_bytes(model, 1, tp, 16, "bfloat16").values())
    assert ring == p.replayssm_ring_bytes_per_req(record_len=16)


@pytest.mark.parametrize("rest_gib", [12, 30, 61])
@pytest.mark.parametrize("ratio", [0.5, 0.9, 3.0])
@pytest.mark.parametrize(
    "strategy, overlap, skip", [("extra_buffer", True, False), ("no_buffer", True, True)]
)
@pytest.mark.parametrize("draft_tokens, replayssm", [(0, False), (0, True), (8, True), (8, False)])
def test_auto_sizing_is_sglang_0523(
    monkeypatch, rest_gib, ratio, strategy, overlap, skip, draft_tokens, replayssm
):
    rest = rest_gib * GIB + 123_456_789
    with deployment(
        monkeypatch,
        strategy=strategy,
        overlap=overlap,
        skip=skip,
        ratio=ratio,
        draft_tokens=draft_tokens,
        replayssm=replayssm,
        max_running=10**6,
    ) as sched:
        me = configurator(cache_params("kimi-k3", 8, "float32"), draft_tokens)
        left_gib = kvc.KVCacheConfigurator._handle_max_mamba_cache(me, rest / GIB)
        slots = sched.max_mamba_cache_size
    ours = sz.split_memory(
        "kimi-k3",
        rest,
        ratio,
        8,
        "float32",
        strategy=strategy,
        overlap=overlap,
        skip_decode_lock=skip,
        draft_tokens=draft_tokens,
        replayssm=replayssm,
    )
    assert ours.max_mamba_cache_size == slots
    assert abs(ours.kv_bytes - left_gib * GIB) < 1.0
