"""kda.chunked with heads split over threads equals one thread and the recurrence; how many
threads it picks."""

from __future__ import annotations

import numpy as np
from kda_testdata import kda_inputs

from kda_core import kda


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


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
    assert kda._threads() == 1  # threads are opt-in
    monkeypatch.delenv("KDA_THREADS")
    assert kda._threads() == 1


def test_thread_pool_is_per_process(monkeypatch):
    """A pool inherited through fork has no live threads: the child gets its own."""
    a = kda._pool(2)
    assert kda._pool(2) is a
    monkeypatch.setattr(kda.os, "getpid", lambda: -1)
    assert kda._pool(2) is not a
