"""kda.chunked with heads split over threads equals one thread and the recurrence; how many
threads it picks."""

from __future__ import annotations

import os

import numpy as np
import pytest
from kda_testdata import kda_inputs

from kda_core import kda
from kda_core.kda import _intra as intra
from kda_core.kda import _threads as threads
from kda_core.kda import chunkwise


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_threaded_chunked_equals_one_thread(rng, monkeypatch):
    # heads split over threads (large inputs only) must not change a head's arithmetic
    q, k, v, g, beta, S0 = kda_inputs(rng, 300, H=5)
    monkeypatch.setenv("KDA_THREADS", "1")
    o1, S1 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setattr(chunkwise, "_GROUP_STATE", 0)
    monkeypatch.setenv("KDA_THREADS", "3")
    groups = chunkwise._head_groups(1, 5, 8, 6)
    assert [(s.start, s.stop) for s in groups] == [(0, 1), (1, 3), (3, 5)]
    o3, S3 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert rel(o3, o1) <= 1e-13 and rel(S3, S1) <= 1e-13
    assert rel(o3, o_rec) <= 1e-10 and rel(S3, S_rec) <= 1e-10


def test_small_inputs_stay_on_one_thread(monkeypatch):
    monkeypatch.setenv("KDA_THREADS", "4")
    T = chunkwise._THREAD_ELEMENTS // (8 * 128)  # T * H * max(K, V) at the threshold
    assert len(chunkwise._head_groups(T - 1, 8, 128, 128)) == 1
    assert len(chunkwise._head_groups(T, 8, 128, 128)) == 4  # 2 heads of 128 x 128 per group
    # never more groups than heads
    assert len(chunkwise._head_groups(8 * T, 2, 128, 128)) == 2
    # small heads: groups keep >= _GROUP_STATE = 2^14 state elements (2 heads of 64 x 64 are
    # too few, 4 are enough)
    assert len(chunkwise._head_groups(8 * T, 8, 64, 64)) == 2
    assert len(chunkwise._head_groups(8 * T, 4, 32, 32)) == 1


def test_thread_count_defaults_to_every_available_core(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("KDA_THREADS", raising=False)
    assert threads.kda_threads() == min(cores, 64)
    monkeypatch.setenv("KDA_THREADS", "junk")  # not a count: the default
    assert threads.kda_threads() == min(cores, 64)
    monkeypatch.setenv("KDA_THREADS", "0")
    assert threads.kda_threads() == min(cores, 64)
    monkeypatch.setenv("KDA_THREADS", "1")
    assert threads.kda_threads() == 1
    monkeypatch.setenv("KDA_THREADS", "1000")
    assert threads.kda_threads() == 64
    # on one of the pool's own threads: never a nested split (it could wait on itself)
    assert threads.pool(2).submit(threads.kda_threads).result() == 1


def test_thread_pool_is_per_process(monkeypatch):
    """A pool inherited through fork has no live threads: the child gets its own."""
    a = threads.pool(2)
    assert threads.pool(2) is a
    monkeypatch.setattr(threads.os, "getpid", lambda: -1)
    assert threads.pool(2) is not a


def test_reduce_rows_splits_large_arrays_and_combines_exactly(rng, monkeypatch):
    monkeypatch.setenv("KDA_THREADS", "3")
    x = rng.standard_normal((7, 5))
    parts = threads.reduce_rows(np.max, x)
    assert len(parts) == 1 and parts[0] == x.max()  # small: one call
    monkeypatch.setattr(threads, "_REDUCE_ELEMENTS", 0)
    parts = threads.reduce_rows(np.max, x)
    assert len(parts) == 3 and max(parts) == x.max()
    assert np.isclose(sum(threads.reduce_rows(np.sum, x)), x.sum(), rtol=1e-13)
    x[5, 2] = np.nan  # a non-finite entry in any part reaches the caller's check
    assert np.isnan(np.max(threads.reduce_rows(np.max, x)))
    q, k, v, g, beta, _ = kda_inputs(rng, 30, H=2)
    q[-1, 1, 0] = np.inf  # in the last of the three row ranges
    with pytest.raises(ValueError, match="q must be finite"):
        kda.chunked(q, k, v, g, beta)
    g[-1, 1, 0] = 1e-3  # g's max comes from the same split reduction
    with pytest.raises(ValueError, match="g is a log decay and must be <= 0, got max 0.001"):
        kda.chunked(k, k, v, g, beta)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
def test_whole_chunk_factorisation_and_sub_chunk_path_agree(rng, monkeypatch, dtype, tol):
    """Slabs whose chunks decay by at most _CHUNK_SPREAD take `_intra_smooth` (scores factorised
    around the chunk start); forcing the limit below zero sends the same inputs down the
    16-row sub-chunk path. Both equal the recurrence (float32 against float64 at the float32
    bound the other tests use). The gates put a chunk's decay close to the float32 limit of 60
    (64 tokens of -0.9), where the factors reach exp(+-58)."""
    q, k, v, g, beta, S0 = kda_inputs(rng, 200, H=2, K=8, V=4)
    g = np.full_like(g, -0.9)
    args = [x.astype(dtype) for x in (q, k, v, g, beta)]
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    calls = []
    smooth = intra._intra_smooth
    monkeypatch.setattr(intra, "_intra_smooth", lambda *a: calls.append(1) or smooth(*a))
    o1, S1 = kda.chunked(*args, initial_state=S0.astype(dtype))
    assert calls, "the whole-chunk factorisation was not used"
    monkeypatch.setattr(intra, "_CHUNK_SPREAD", {np.dtype(dtype): -1.0})
    calls.clear()
    o2, S2 = kda.chunked(*args, initial_state=S0.astype(dtype))
    assert not calls
    for o, S in ((o1, S1), (o2, S2)):
        assert o.dtype == dtype
        assert rel(o.astype(np.float64), o_ref) <= tol
        assert rel(S.astype(np.float64), S_ref) <= tol


@pytest.mark.parametrize("C, H, K", [(64, 8, 128), (16, 3, 5), (1, 2, 4), (48, 1, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunk_cumsum_equals_the_row_loop(rng, C, H, K, dtype):
    g = -rng.random((3, C, H, K)).astype(dtype)
    fast, naive = intra._chunk_cumsum(g), intra._chunk_cumsum_naive(g)
    tol = 1e-6 if dtype == np.float32 else 1e-14  # C terms of magnitude <= 1
    np.testing.assert_allclose(fast, naive, atol=tol * C, rtol=0)
    np.testing.assert_allclose(naive[:, -1], g.sum(axis=1), atol=tol * C, rtol=0)


@pytest.mark.parametrize("C", [1, 5, 16, 32, 48, 64, 128])
def test_unit_lower_inverse_equals_a_dense_inverse(rng, C):
    """The UT transform's (I + L)^-1 (row substitution in 16-row blocks, blocks merged) against
    LAPACK's general inverse; only L's strictly lower part may be read (garbage above it)."""
    L = rng.standard_normal((3, 2, C, C)) * 0.3
    lower = np.tril(L, -1)
    T = intra._unit_lower_inverse(L.copy())
    ref = np.linalg.inv(np.eye(C) + lower)
    # float64 round-off relative to the inverse's size (its entries grow with C: ~20 at 128)
    np.testing.assert_allclose(T, ref, atol=1e-13 * max(1.0, np.abs(ref).max()), rtol=0)
    assert np.all(np.triu(T, 1) == 0)


@pytest.mark.parametrize("C", [1, 5, 16, 32, 64])
def test_smooth_scores_equal_dense_products(rng, C):
    """The whole-chunk scores (one product for chunks of <= 16 rows, the lower three quarters
    above) against the dense products written out: L = Diag(beta) (k-k scores), read only
    strictly below the diagonal, and Aqk = the causal q-k scores (zeros above the diagonal)."""
    N, H, K = 2, 3, 8
    X = rng.standard_normal((N, H, 2, C, K))
    knT = rng.standard_normal((N, H, K, C))
    beta = rng.random((N, H, C))
    L, Aqk = intra._smooth_scores(X, knT, beta)
    P = np.einsum("nhsik,nhkj->nhsij", X, knT)
    strict = np.tril(np.ones((C, C), bool), -1)
    np.testing.assert_allclose(L[..., strict], (beta[..., None] * P[:, :, 0])[..., strict],
                               atol=1e-13, rtol=0)  # fmt: skip
    np.testing.assert_allclose(Aqk, np.tril(P[:, :, 1]), atol=1e-13, rtol=0)


def test_any_memory_layout_gives_the_same_result(rng):
    """Fortran-ordered arrays and transposed views (non-C layouts reach the chunk cumsum's
    blocked product, whose output must be a view of C-ordered memory) equal C-ordered input."""
    q, k, v, g, beta, S0 = kda_inputs(rng, 128, H=4, K=16, V=16)
    o_ref, S_ref = kda.chunked(q, k, v, g, beta, initial_state=S0)
    fortran = [np.asfortranarray(x) for x in (q, k, v, g, beta)]
    transposed = [np.ascontiguousarray(x.swapaxes(1, -1)).swapaxes(1, -1) for x in (q, k, v, g)]
    for args in (fortran, [*transposed, beta]):
        o, S = kda.chunked(*args, initial_state=S0)
        np.testing.assert_allclose(o, o_ref, atol=1e-12, rtol=0)
        np.testing.assert_allclose(S, S_ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("shape", [(8, 0, 4), (8, 2, 0)])
def test_empty_heads_or_channels_are_refused(shape):
    x = np.zeros(shape)
    with pytest.raises(ValueError, match="q must have H >= 1 heads of K >= 1 channels"):
        kda.chunked(x, x, np.zeros((8, shape[1], 3)), x, np.zeros(shape[:2]))


def test_empty_value_channels_are_refused():
    x = np.zeros((8, 2, 4))
    with pytest.raises(ValueError, match="v must have V >= 1 channels"):
        kda.chunked(x, x, np.zeros((8, 2, 0)), x, np.zeros((8, 2)))
