"""The strategy rules SGLang 0.5.23 enforces at start-up, in the engine: no_buffer without the
overlap scheduler, extra_buffer_lazy only with it, ``auto`` resolved by overlap and page size;
``clear()`` frees every checkpoint slot; the INT8 checkpoint pool estimated and checked against
free memory before it is allocated.

SGLang sources (0.5.23): ``arg_groups/mamba_hook.py`` ``validate_mamba_no_buffer``,
``validate_mamba_extra_buffer``; ``arg_groups/overrides.py`` ``_mamba_radix_cache_resolution``;
``mem_cache/kv_cache_configurator.py`` ``_calculate_mamba_ratio``; ``server_args.py``
``ServerArgs._handle_mamba_radix_cache`` of earlier releases (the log line when it turned
overlap off for no_buffer: 0.5.23 asserts instead, the lab keeps the older resolution);
``managers/scheduler.py`` ``Scheduler.flush_cache``; ``mem_cache/memory_pool.py``
``HybridReqToTokenPool.clear``; ``mem_cache/mamba_checkpoint_pool.py``
``maybe_init_int8_mamba_checkpoint_pool``. tests/real/test_strategy_rules_vs_sglang.py runs
SGLang's validators and estimate against the same values.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.model import TinyHybrid, encode
from kda_core.serve import _pools
from kda_core.serve._checkpoints import int8_pool_estimate
from kda_core.serve._slots import StateShape
from kda_core.serve.engine import Engine, Request

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "


def test_no_buffer_turns_overlap_off_and_refuses_it_explicitly():
    e = Engine(model=MODEL, strategy="no_buffer")
    assert (e.strategy, e.overlap) == ("no_buffer", False)
    assert e.strategy_notes and "Disabling overlap schedule" in e.strategy_notes[0]
    assert Engine(model=MODEL, strategy="no_buffer", overlap=False).strategy_notes == ()
    with pytest.raises(ValueError, match="no_buffer do not support overlap schedule"):
        Engine(model=MODEL, strategy="no_buffer", overlap=True)
    # without the radix cache SGLang applies none of the mamba strategy rules
    assert Engine(model=MODEL, strategy="no_buffer", overlap=True, cache=False).overlap


def test_lazy_requires_overlap_with_sglangs_message():
    assert Engine(model=MODEL, strategy="extra_buffer_lazy").overlap
    with pytest.raises(ValueError, match=r"Lazy extra buffer requires overlap schedule"):
        Engine(model=MODEL, strategy="extra_buffer_lazy", overlap=False)


@pytest.mark.parametrize(
    "overlap, strategy, resolved_overlap",
    [(None, "extra_buffer", True), (True, "extra_buffer", True), (False, "no_buffer", False)],
)
def test_auto_resolves_by_overlap_at_page_size_one(overlap, strategy, resolved_overlap):
    e = Engine(model=MODEL, strategy="auto", overlap=overlap)
    assert (e.strategy, e.overlap) == (strategy, resolved_overlap)


def test_bad_strategy_names_the_choices():
    with pytest.raises(ValueError, match=r"strategy must be one of \('auto', 'no_buffer'"):
        Engine(model=MODEL, strategy="lazy")
    with pytest.raises(ValueError, match="overlap must be a bool"):
        Engine(model=MODEL, overlap="yes")


@pytest.mark.parametrize("int8", [False, True])
def test_clear_frees_every_checkpoint_slot(int8):
    e = Engine(model=MODEL, int8_checkpoints=int8, state_slots=40, chunk_size=16)
    prompts = [SYSTEM * 2 + "A", SYSTEM * 2 + "B", SYSTEM + "C"]
    first = e.serve([Request(p, 3) for p in prompts])
    held = e.pools.checkpoints.n_used
    assert held == e.cache.n_states > 0
    assert e.clear() == held
    assert e.pools.checkpoints.n_used == 0 and e.cache.n_states == 0 and e.cache.kv_tokens == 0
    assert e.cache.n_nodes == 0 and len(e.cache.export()) == 1  # the root alone
    e.check_integrity()
    # after the flush nothing is restored, and the answers are the same
    again = e.serve([Request(p, 3) for p in prompts])
    for a, b in zip(first.reports, again.reports):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.logits, b.logits, atol=1e-9, rtol=0)
    assert again.reports[0].restore_at == 0
    e.check_integrity()


def test_clear_is_refused_while_a_request_holds_slots():
    e = Engine(model=MODEL)
    seen = []

    def observe(stage, engine):
        if stage == "restored":
            with pytest.raises(ValueError, match="pending requests"):
                engine.clear()
            seen.append(stage)

    e.generate(SYSTEM + "x", 2, observe=observe)
    assert seen == ["restored"]


def test_int8_pool_estimate_counts_codes_scales_and_conv():
    shape = StateShape.of(MODEL)
    L, H, K, V = shape.s
    est = int8_pool_estimate(shape, 10)
    assert est["qdata"] == 10 * L * H * K * V
    assert est["scale"] == 10 * L * H * K * 8
    assert est["conv"] == 10 * 8 * np.prod(shape.conv)
    assert est["total"] == 10 * (L * H * K * V + 8 * L * H * K + 8 * np.prod(shape.conv))
    e = Engine(model=MODEL, int8_checkpoints=True, state_slots=8)
    assert e.pools.int8_estimate == int8_pool_estimate(shape, 16)  # 2 x state_slots
    assert Engine(model=MODEL).pools.int8_estimate is None


def test_int8_pool_refused_before_allocation_when_memory_is_short(monkeypatch):
    shape = StateShape.of(MODEL)
    need = int8_pool_estimate(shape, 64)["total"]
    monkeypatch.setattr(_pools, "free_memory_bytes", lambda: need)  # est >= free: refused
    with pytest.raises(ValueError, match=r"checkpoint_slots: the INT8 checkpoint pool needs"):
        Engine(model=MODEL, int8_checkpoints=True, checkpoint_slots=64)
    monkeypatch.setattr(_pools, "free_memory_bytes", lambda: need + 1)
    Engine(model=MODEL, int8_checkpoints=True, checkpoint_slots=64)
    monkeypatch.setattr(_pools, "free_memory_bytes", lambda: None)  # unknown: no check
    Engine(model=MODEL, int8_checkpoints=True, checkpoint_slots=64)


def test_free_memory_is_read_from_the_system():
    free = _pools.free_memory_bytes()
    assert free is None or free > 0


def test_without_the_cache_a_request_holds_one_state_slot():
    """SGLang with the radix cache off reserves one state slot per request whatever the
    strategy (``_calculate_mamba_ratio`` returns 1; tests/real/test_sizing_vs_real.py checks
    ``sizing``'s "radix_off" against it): 20 slots run 20 requests at once, not 20 // 5."""
    reqs = [Request(f"q{i} hello", 3) for i in range(30)]
    for strategy in ("extra_buffer", "no_buffer"):
        e = Engine(model=MODEL, cache=False, state_slots=20, strategy=strategy)
        rep = e.serve(reqs)
        assert rep.max_running == rep.peak_running == 20
        assert rep.max_running == sizing.max_running_requests(20, "radix_off")
        for rq, r in zip(reqs, rep.reports):
            assert r.tokens == MODEL.generate(encode(rq.prompt), 3)[0]
        e.check_integrity()
    assert Engine(model=MODEL, state_slots=20).serve(reqs).max_running == 4  # 5 per request
