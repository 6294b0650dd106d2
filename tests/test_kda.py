"""KDA recurrence: chunked == recurrent == step loop; affine maps compose associatively, not
commutatively; gates; validation."""

from __future__ import annotations

import numpy as np
import pytest
from kda_testdata import kda_inputs, step

from kda_core import kda
from kda_core.kda.reference import _token_maps


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("T", [1, 63, 64, 65, 300, 1000])
@pytest.mark.parametrize("C", [16, 32, 64])
def test_chunked_matches_recurrent(rng, T, C):
    q, k, v, g, beta, S0 = kda_inputs(rng, T)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0, chunk_size=C)
    assert o.shape == (T, 3, 6) and S.shape == (3, 8, 6)
    assert rel(o, o_ref) <= 1e-10
    assert rel(S, S_ref) <= 1e-10


@pytest.mark.parametrize("C", [1, 5, 17, 100])
@pytest.mark.parametrize("T", [1, 4, 16, 17, 99, 101, 257])
def test_chunked_at_chunk_sizes_not_multiples_of_16(rng, T, C):
    """Chunk sizes below, between and above the 16-row sub-chunks, with a ragged last chunk
    (T not a multiple of C) and a last sub-chunk shorter than 16 rows."""
    q, k, v, g, beta, S0 = kda_inputs(rng, T)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0, chunk_size=C)
    assert rel(o, o_ref) <= 1e-10
    assert rel(S, S_ref) <= 1e-10


def test_chunked_with_extreme_gates_uses_the_masked_path(rng):
    # g = -1000 on some tokens (fla's varlen test) makes exp(-Gamma) overflow: the chunk must
    # take the masked path and still agree, with nothing NaN.
    q, k, v, g, beta, S0 = kda_inputs(rng, 130)
    g[::7] = -1000.0
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0, chunk_size=64)
    assert np.all(np.isfinite(o)) and np.all(np.isfinite(S))
    assert rel(o, o_ref) <= 1e-10 and rel(S, S_ref) <= 1e-10


def test_zero_initial_state_is_default(rng):
    q, k, v, g, beta, _ = kda_inputs(rng, 40)
    o1, S1 = kda.chunked(q, k, v, g, beta)
    o2, S2 = kda.chunked(q, k, v, g, beta, initial_state=np.zeros((3, 8, 6)))
    assert np.array_equal(o1, o2) and np.array_equal(S1, S2)
    assert np.abs(S1).max() > 0.1


def test_step_loop_equals_recurrent(rng):
    q, k, v, g, beta, S0 = kda_inputs(rng, 50)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0, scale=0.3)
    S = S0
    for t in range(50):
        o_t, S = step(S, q[t], k[t], v[t], g[t], beta[t], scale=0.3)
        assert np.allclose(o_t, o_ref[t], rtol=0, atol=1e-13)
    assert rel(S, S_ref) <= 1e-13


def test_recurrent_matches_written_out_formula(rng):
    # S_t = (I - b k k^T) Diag(alpha) S + b k v^T; o_t = scale S_t^T q_t, one head at a time
    q, k, v, g, beta, S0 = kda_inputs(rng, 12, H=2, K=4, V=3)
    o, S = kda.recurrent(q, k, v, g, beta, initial_state=S0, scale=0.5)
    for h in range(2):
        Sh = S0[h].copy()
        for t in range(12):
            kt = k[t, h][:, None]
            Sh = (np.eye(4) - beta[t, h] * kt @ kt.T) @ np.diag(np.exp(g[t, h])) @ Sh
            Sh += beta[t, h] * kt @ v[t, h][None, :]
            assert np.allclose(o[t, h], 0.5 * Sh.T @ q[t, h], atol=1e-13)
        assert np.allclose(S[h], Sh, atol=1e-13)


def test_decay_order_matters(rng):
    # delta correction applied before the decay gives a different state: the tests can tell
    q, k, v, g, beta, S0 = kda_inputs(rng, 64, H=1, K=4, V=3)
    _, S = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    Sw = S0[0].copy()
    for t in range(64):
        kt = k[t, 0][:, None]
        Sw = np.diag(np.exp(g[t, 0])) @ (np.eye(4) - beta[t, 0] * kt @ kt.T) @ Sw
        Sw += beta[t, 0] * kt @ v[t, 0][None, :]
    assert rel(Sw, S[0]) > 1e-3


def test_float32_inputs_stay_float32(rng):
    q, k, v, g, beta, S0 = (x.astype(np.float32) for x in kda_inputs(rng, 100))
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert o.dtype == np.float32 and S.dtype == np.float32
    assert rel(o, o_ref) <= 1e-4


# ------------------------------------------------------------------------------------------
# affine maps


def _segments(rng, T=90, H=2, K=5, V=4):
    _, k, v, g, beta, S0 = kda_inputs(rng, T, H, K, V)
    cuts = [0, 17, 40, 71, T]
    segs = [kda.segment_map(k[a:b], v[a:b], g[a:b], beta[a:b]) for a, b in zip(cuts, cuts[1:])]
    return (k, v, g, beta, S0), segs


def test_segment_map_matches_token_composition(rng):
    _, k, v, g, beta, _ = kda_inputs(rng, 70, 2, 5, 4)
    closed = kda.segment_map(k, v, g, beta, chunk_size=16)
    naive = kda.segment_map_naive(k, v, g, beta)
    assert np.max(np.abs(closed.M - naive.M)) <= 1e-12
    assert np.max(np.abs(closed.b - naive.b)) <= 1e-12


def test_segment_map_apply_equals_recurrent_final_state(rng):
    (k, v, g, beta, S0), _ = _segments(rng)
    q = np.zeros_like(k)
    _, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    S = kda.segment_map(k, v, g, beta).apply(S0)
    assert np.max(np.abs(S - S_ref)) <= 1e-12


def test_groupings_agree(rng):
    (_, _, _, _, S0), (a, b, c, d) = _segments(rng)
    left = a.then(b).then(c).then(d)
    right = a.then(b.then(c.then(d)))
    middle = a.then(b.then(c)).then(d)
    for m in (right, middle):
        assert np.max(np.abs(m.M - left.M)) <= 1e-12
        assert np.max(np.abs(m.apply(S0) - left.apply(S0))) <= 1e-12


def test_order_matters(rng):
    (_, _, _, _, S0), (a, b, c, d) = _segments(rng)
    ab = a.then(b).apply(S0)
    ba = b.then(a).apply(S0)
    assert rel(ba, ab) > 1e-3


def test_then_rejects_mismatched_maps(rng):
    (_, _, _, _, _), (a, _, _, _) = _segments(rng)
    with pytest.raises(ValueError, match="later"):
        a.then(kda.AffineMap.identity(3, 5, 4))


# ------------------------------------------------------------------------------------------
# gates and norms


def test_l2norm_matches_fla_form(rng):
    x = rng.standard_normal((5, 3, 8))
    y = kda.l2norm(x)
    assert np.allclose(y, x / np.sqrt((x**2).sum(-1, keepdims=True) + 1e-6), rtol=1e-15)
    assert np.allclose(np.linalg.norm(y, axis=-1), 1.0, atol=1e-6)


def test_gates(rng):
    f = rng.standard_normal((4, 2, 3)) * 3
    A_log = np.log(np.array([1.0, 8.0]))
    dt_bias = rng.standard_normal(6)
    g = kda.softplus_gate(f, A_log, dt_bias)
    z = f + dt_bias.reshape(2, 3)
    assert np.allclose(g, -np.exp(A_log)[:, None] * np.log1p(np.exp(z)), rtol=1e-13)
    lb = kda.lowerbound_gate(f, dt_bias, -5.0, A_log=A_log)
    assert np.allclose(lb, -5.0 / (1 + np.exp(-np.exp(A_log)[:, None] * z)), rtol=1e-13)
    assert np.all(lb >= -5.0) and np.all(lb <= 0)  # saturates to -5 in floating point
    lb0 = kda.lowerbound_gate(f, dt_bias, -5.0)
    assert np.allclose(lb0, -5.0 / (1 + np.exp(-z)), rtol=1e-13)


# ------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    "mutate, name",
    [
        (lambda a: a.update(q=a["q"][0]), "q"),
        (lambda a: a.update(k=a["k"][:, :, :3]), "k"),
        (lambda a: a.update(v=a["v"][:5]), "v"),
        (lambda a: a.update(g=np.abs(a["g"])), "g"),
        (lambda a: a.update(beta=a["beta"] + 2.5), "beta"),
        (lambda a: a.update(beta=a["beta"][:, :1]), "beta"),
        (lambda a: a.update(initial_state=np.zeros((3, 8, 5))), "initial_state"),
        (lambda a: a["v"].__setitem__((0, 0, 0), np.nan), "v"),
        (lambda a: a["q"].__setitem__((1, 0, 0), np.inf), "q"),
    ],
)
@pytest.mark.parametrize("fn", [kda.recurrent, kda.chunked])
def test_bad_inputs_name_the_argument(rng, fn, mutate, name):
    q, k, v, g, beta, S0 = kda_inputs(rng, 10)
    args = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=S0)
    mutate(args)
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        fn(**args)


@pytest.mark.parametrize("scale", ["a", np.nan, True, [1.0]])
def test_bad_scale(rng, scale):
    q, k, v, g, beta, _ = kda_inputs(rng, 10)
    with pytest.raises(ValueError, match="^scale"):
        kda.chunked(q, k, v, g, beta, scale=scale)


def test_segment_map_rejects_wrong_rank(rng):
    _, k, v, g, beta, _ = kda_inputs(rng, 10)
    with pytest.raises(ValueError, match="^k must have shape"):
        kda.segment_map(k[0], v, g, beta)
    with pytest.raises(ValueError, match="^k must have shape"):
        _token_maps(k[0], v, g, beta)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-4)])
def test_mixed_sub_chunks_some_beyond_the_spread_limit(rng, dtype, tol):
    # one sub-chunk decays hard enough to take the masked path, its neighbours do not
    q, k, v, g, beta, S0 = kda_inputs(rng, 150, H=2, K=8, V=4)
    g[40:48] = -12.0 if dtype == np.float32 else -80.0
    args = [x.astype(dtype) for x in (q, k, v, g, beta)]
    o_ref, S_ref = kda.recurrent(*args, initial_state=S0.astype(dtype))
    o, S = kda.chunked(*args, initial_state=S0.astype(dtype))
    assert np.all(np.isfinite(o))
    assert rel(o.astype(np.float64), o_ref.astype(np.float64)) <= tol
    assert rel(S.astype(np.float64), S_ref.astype(np.float64)) <= tol


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 5000])
def test_bad_chunk_size(rng, bad):
    q, k, v, g, beta, _ = kda_inputs(rng, 10)
    with pytest.raises(ValueError, match="chunk_size"):
        kda.chunked(q, k, v, g, beta, chunk_size=bad)
