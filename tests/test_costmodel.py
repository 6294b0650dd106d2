from __future__ import annotations

import numpy as np
import pytest

from kda_core.sim import costmodel as C


def _marconi_reference(L: float, D: float = 4096.0, N: float = 128.0) -> float:
    """Marconi (Pan et al., MLSys 2025), Table 1 FLOPs for its 7B hybrid: 4 attention, 24 Mamba,
    28 MLP layers (docs/simulator.md, "Marconi's FLOP formulas")."""
    attn = 8 * L * D * D + 4 * L * L * D
    mlp = 16 * L * D * D
    mamba = 12 * L * D * D + 16 * L * D * N + 10 * L * D
    return 4 * attn + 24 * mamba + 28 * mlp


@pytest.mark.parametrize("L", [1, 32, 1000, 10_000, 32_768])
def test_marconi_preset_reproduces_the_paper_formulas(L: int) -> None:
    got = C.prefill_flops("marconi-7b", 0, L)
    assert got == pytest.approx(_marconi_reference(L), rel=1e-12)


def test_marconi_relative_to_parent_savings() -> None:
    # Marconi's savings of a node relative to its parent: Attn(L_tot) - Attn(L_par), etc.
    par, tot = 3000, 7000
    want = _marconi_reference(tot) - _marconi_reference(par)
    assert C.prefill_flops("marconi-7b", par, tot) == pytest.approx(want, rel=1e-12)


def test_extend_is_additive_and_matches_a_naive_sum() -> None:
    spec = C.cost_spec("kimi-k3")
    a, b, c = 0, 1234, 5000
    whole = C.prefill_flops(spec, a, c)
    assert whole == pytest.approx(C.prefill_flops(spec, a, b) + C.prefill_flops(spec, b, c))
    # naive twin: sum the per-token cost of each query over its causal context
    naive = 0.0
    for t in range(b, c):
        naive += spec.per_token_flops + spec.n_attn_layers * spec.attn_pair_flops * (t + 1)
    assert C.prefill_flops(spec, b, c) == pytest.approx(naive, rel=1e-12)


def test_breakdown_sums_and_vectorises() -> None:
    s = np.array([0, 100, 5000])
    e = np.array([10, 100, 9000])
    b = C._prefill_breakdown("kimi-k3", s, e)
    assert np.allclose(b.attn_proj + b.attn_context + b.linear + b.mlp, b.total, rtol=1e-14)
    assert np.allclose(b.total, C.prefill_flops("kimi-k3", s, e), rtol=1e-14)
    assert b.total[1] == 0.0
    for i in range(3):
        assert b.total[i] == pytest.approx(C.prefill_flops("kimi-k3", int(s[i]), int(e[i])))


def test_k3_coefficients_from_the_config() -> None:
    spec = C.cost_spec("kimi-k3")
    d = 7168
    # MLA: q_a + q_b + kv_a + kv_b + o + output gate, x2 FLOPs per multiply-add
    mla = d * 1536 + 1536 * 96 * 192 + d * 576 + 512 * 96 * 256 + 96 * 128 * d + d * 96 * 128
    assert spec.attn_proj_flops == 2 * mla
    assert spec.attn_pair_flops == 2 * 96 * (128 + 64 + 128)
    # one MoE layer with latent routed experts, and one dense layer
    moe = 3 * d * 3072 * 2 + d * 896 + 16 * 3 * 3584 * 3072 + 2 * d * 3584
    assert spec.mlp_flops == 2 * (3 * d * 33792 + 92 * moe)
    assert (spec.n_attn_layers, spec.n_linear_layers) == (24, 69)
    # about 207 GFLOP per token outside attention's context term (~100B active parameters)
    assert 1.5e11 < spec.per_token_flops < 2.5e11


def test_context_pairs() -> None:
    assert C._context_pairs(0, 4) == 1 + 2 + 3 + 4
    assert C._context_pairs(2, 4) == 3 + 4
    assert C._context_pairs(2, 4, causal=False) == 16 - 4


def test_time_model_and_queue() -> None:
    tm = C.TimeModel(flops_per_s=1e15, overhead_s=0.01)
    assert tm.seconds(2e15) == pytest.approx(2.01)
    start, finish = C.fcfs_queue(np.array([0.0, 0.5, 0.6, 10.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert start.tolist() == [0.0, 1.0, 2.0, 10.0]
    assert finish.tolist() == [1.0, 2.0, 3.0, 11.0]
    start2, _ = C.fcfs_queue(np.array([0.0, 0.5, 0.6]), np.ones(3), servers=2)
    assert start2.tolist() == [0.0, 0.5, 1.0]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="model"):
        C.cost_spec("gpt")
    with pytest.raises(ValueError, match="start and end"):
        C.prefill_flops("kimi-k3", 10, 5)
    with pytest.raises(ValueError, match="start and end"):
        C.prefill_flops("kimi-k3", -1, 5)
    with pytest.raises(ValueError, match="flops_per_s"):
        C.TimeModel(flops_per_s=0.0)
    with pytest.raises(ValueError, match="servers"):
        C.fcfs_queue(np.zeros(2), np.zeros(2), servers=0)
    with pytest.raises(ValueError, match="linear_flops"):
        C.CostSpec("x", 1, 1, 1.0, 1.0, float("nan"), 1.0)
