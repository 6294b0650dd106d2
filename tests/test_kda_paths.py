"""kda.chunked's fast paths against each other and the recurrence: whole-chunk score
factorisation (tame decays) vs the per-sub-chunk one vs the masked exact fallback, and heads
split over threads vs one thread."""

from __future__ import annotations

import numpy as np
import pytest
from kda_testdata import kda_inputs

from kda_core import kda


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _spy(monkeypatch) -> list[str]:
    calls: list[str] = []
    whole = kda._intra_whole_chunks

    def spy(*a, **kw):
        calls.append("whole")
        return whole(*a, **kw)

    monkeypatch.setattr(kda, "_intra_whole_chunks", spy)
    return calls


@pytest.mark.parametrize("T", [64, 200, 513])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_chunk_and_sub_chunk_paths_agree(rng, monkeypatch, T, dtype):
    q, k, v, g, beta, S0 = (x.astype(dtype) for x in kda_inputs(rng, T))
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    calls = _spy(monkeypatch)
    o_w, S_w = kda.chunked(q, k, v, g, beta, initial_state=S0)
    assert calls  # logsigmoid gates: chunk spread ~50 < 80 (float32) and 600 (float64)
    spread = {np.dtype(np.float64): 600.0, np.dtype(np.float32): 80.0}
    monkeypatch.setattr(kda, "_BLOCK_SPREAD", {d: s / 20 for d, s in spread.items()})
    calls.clear()
    o_s, S_s = kda.chunked(q, k, v, g, beta, initial_state=S0)
    assert not calls  # the per-sub-chunk path (and its masked fallback) ran instead
    tol = 1e-12 if dtype == np.float64 else 2e-5
    assert rel(o_w, o_s) <= tol and rel(S_w, S_s) <= tol
    tol = 1e-10 if dtype == np.float64 else 1e-4
    assert rel(o_w, o_rec) <= tol and rel(S_w, S_rec) <= tol


def test_one_wild_chunk_sends_its_slab_down_the_sub_chunk_path(rng, monkeypatch):
    q, k, v, g, beta, S0 = kda_inputs(rng, 300)
    g[70:90] = -40.0  # chunk 1's spread is ~800 > 600: not factorisable around its first row
    calls = _spy(monkeypatch)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0)
    assert not calls
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert rel(o, o_rec) <= 1e-10 and rel(S, S_rec) <= 1e-10


def test_threaded_chunked_equals_one_thread(rng, monkeypatch):
    # heads split over threads (large inputs only) must not change a head's arithmetic
    q, k, v, g, beta, S0 = kda_inputs(rng, 300, H=5)
    monkeypatch.setenv("KDA_THREADS", "1")
    o1, S1 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    monkeypatch.setattr(kda, "_THREAD_ELEMENTS", 0)
    monkeypatch.setenv("KDA_THREADS", "3")
    assert [(s.start, s.stop) for s in kda._head_groups(5, 1)] == [(0, 1), (1, 3), (3, 5)]
    o3, S3 = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o_rec, S_rec = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert rel(o3, o1) <= 1e-13 and rel(S3, S1) <= 1e-13
    assert rel(o3, o_rec) <= 1e-10 and rel(S3, S_rec) <= 1e-10


def test_small_inputs_stay_on_one_thread(monkeypatch):
    monkeypatch.setenv("KDA_THREADS", "4")
    assert len(kda._head_groups(8, kda._THREAD_ELEMENTS - 1)) == 1
    assert len(kda._head_groups(8, kda._THREAD_ELEMENTS)) == 4
    assert len(kda._head_groups(2, kda._THREAD_ELEMENTS)) == 2  # never more groups than heads
    monkeypatch.setenv("KDA_THREADS", "junk")
    assert 1 <= kda._threads() <= kda._MAX_THREADS
