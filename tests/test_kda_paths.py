"""kda.chunked with heads split over threads equals one thread and the recurrence; how many
threads it picks."""

from __future__ import annotations

import numpy as np
import pytest
from kda_testdata import kda_inputs

from kda_core import kda
from kda_core.kda import chunkwise, intra


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_threaded_chunked_equals_one_thread(rng, monkeypatch):
    # heads split over threads (large inputs only) must not change a head's arithmetic
    q, k, v, g, beta, S0 = kda_inputs(rng, 300, H=5)
    monkeypatch.setenv("KDA_THREADS", "1")
    o1, S1 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setenv("KDA_THREADS", "3")
    assert [(s.start, s.stop) for s in chunkwise._head_groups(5, 1)] == [(0, 1), (1, 3), (3, 5)]
    o3, S3 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert rel(o3, o1) <= 1e-13 and rel(S3, S1) <= 1e-13
    assert rel(o3, o_rec) <= 1e-10 and rel(S3, S_rec) <= 1e-10


def test_small_inputs_stay_on_one_thread(monkeypatch):
    monkeypatch.setenv("KDA_THREADS", "4")
    assert len(chunkwise._head_groups(8, chunkwise._THREAD_ELEMENTS - 1)) == 1
    assert len(chunkwise._head_groups(8, chunkwise._THREAD_ELEMENTS)) == 4
    # never more groups than heads
    assert len(chunkwise._head_groups(2, chunkwise._THREAD_ELEMENTS)) == 2
    monkeypatch.setenv("KDA_THREADS", "junk")
    assert chunkwise._threads() == 1  # threads are opt-in
    monkeypatch.delenv("KDA_THREADS")
    assert chunkwise._threads() == 1
    monkeypatch.setenv("KDA_THREADS", "1")
    assert chunkwise._threads() == 1


def test_thread_pool_is_per_process(monkeypatch):
    """A pool inherited through fork has no live threads: the child gets its own."""
    a = chunkwise._pool(2)
    assert chunkwise._pool(2) is a
    monkeypatch.setattr(chunkwise.os, "getpid", lambda: -1)
    assert chunkwise._pool(2) is not a


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
