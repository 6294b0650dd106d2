"""Decode on fixed shapes (``Engine(cuda_graph_bs=...)``, ``serve._graphs``).

SGLang replays a decode graph captured for the smallest captured batch size that holds the
batch (``model_executor/runner/base_cuda_graph_runner.py`` ``BaseCudaGraphRunner._pad_to_bucket``);
the padding rows reach their state through the per-row state index, which points at the Mamba
pool's slot 0, never given to a request (``mem_cache/allocator/mamba.py``
``MambaSlotAllocator.clear``). Here every all-decode step runs on the padded size with the sink's
rows, the results are exactly the eager ones, and each step's index table is in the report.
tests/real/test_graphs_vs_sglang.py runs SGLang's bucket choice and slot allocator.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kda_core import sizing
from kda_core.model import TinyHybrid, encode
from kda_core.serve import _graphs, _runner
from kda_core.serve.engine import Engine, Request

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "


def assert_uncached(rep, reqs) -> None:
    for i, rq in enumerate(reqs):
        ids, logits = MODEL.generate(encode(rq.prompt), rq.max_new_tokens)
        assert rep.reports[i].tokens == ids, f"request {i}"
        np.testing.assert_allclose(rep.reports[i].logits, logits, atol=1e-9, rtol=0)


def test_padded_size_is_the_smallest_captured_size_that_holds_the_batch():
    sizes = (1, 2, 4, 8, 16)
    assert [_graphs.padded_size(n, sizes) for n in (1, 2, 3, 5, 8, 9, 16)] == [
        1,
        2,
        4,
        8,
        8,
        16,
        16,
    ]
    with pytest.raises(ValueError, match="exceeds the largest captured size 16"):
        _graphs.padded_size(17, sizes)


def test_every_decode_step_runs_padded_with_the_sink_and_stays_exact(monkeypatch):
    calls = []
    real = _runner.decode_window

    def spy(wts, tokens, window, conv, pasts, write):
        calls.append((list(tokens), window.base.shape[1], len(pasts)))
        return real(wts, tokens, window, conv, pasts, write)

    monkeypatch.setattr(_runner, "decode_window", spy)
    reqs = [Request(SYSTEM + f"q{i}", 6 + i % 3, arrival=i // 2) for i in range(7)]
    e = Engine(model=MODEL, state_slots=60, chunk_size=16, cuda_graph_bs=[1, 2, 4, 8])
    rep = e.serve(reqs, max_batch_tokens=64)
    assert_uncached(rep, reqs)
    e.check_integrity()
    graphs = [row.graph for row in rep.steps if row.graph is not None]
    assert len(graphs) == len(calls) > 0
    assert all(row.graph is None for row in rep.steps if row.prefill_tokens)
    for g, (tokens, rows, n_pasts) in zip(graphs, calls):
        assert g.padded_size == _graphs.padded_size(g.batch_size, (1, 2, 4, 8))
        assert rows == n_pasts == len(tokens) == g.padded_size  # the pass runs on the padded shape
        pad = g.padded_size - g.batch_size
        assert tokens[g.batch_size :] == [0] * pad  # the sink rows feed token 0
        assert g.state_index[g.batch_size :] == (0,) * pad  # ... on SGLang's slot 0
        assert 0 not in g.state_index[: g.batch_size]  # a request's index is its slot + 1
    assert any(g.padded_size > g.batch_size for g in graphs)


def test_long_steady_decoding_on_a_padded_shape():
    """Many steps pending in the window with the sink's rows among them (latents carried)."""
    reqs = [Request(SYSTEM + "a", 40), Request(SYSTEM + "bb", 33), Request(SYSTEM + "c", 25)]
    e = Engine(model=MODEL, state_slots=60, chunk_size=64, cuda_graph_bs=[4])
    rep = e.serve(reqs, max_batch_tokens=256)
    assert_uncached(rep, reqs)
    assert {row.graph.padded_size for row in rep.steps if row.graph} == {4}


def test_the_largest_captured_size_caps_the_running_requests():
    reqs = [Request(f"q{i}", 4) for i in range(9)]
    e = Engine(model=MODEL, state_slots=100, chunk_size=16, cuda_graph_bs=[2, 4, 3])
    assert e.graph_bs == (2, 3, 4)
    rep = e.serve(reqs, max_batch_tokens=256)
    assert rep.max_running == 4 == sizing.max_running_requests(100, cuda_graph_max_bs=4)
    assert rep.peak_running == 4
    assert_uncached(rep, reqs)


@pytest.mark.parametrize(
    "bad, match",
    [
        ([], "hold 1 to 64 sizes"),
        ([0, 2], r"cuda_graph_bs\[0\] must be in \[1, 4096\]"),
        ([True], r"cuda_graph_bs\[0\] must be an integer in \[1, 4096\]"),
        ("8", "sequence of batch sizes"),
        (list(range(1, 70)), "hold 1 to 64 sizes"),
    ],
)
def test_bad_captured_sizes_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        Engine(model=MODEL, cuda_graph_bs=bad)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.integers(1, 12), st.integers(0, 4)), min_size=1, max_size=8
    ),
    st.sampled_from([(1,), (2, 4), (1, 3, 8), (8,)]),
    st.sampled_from(["no_buffer", "extra_buffer", "extra_buffer_lazy"]),
)
def test_any_workload_is_exact_on_fixed_shapes(spec, sizes, strategy):
    reqs = [Request(SYSTEM[: 10 + k] + str(k), n, arrival=a) for k, n, a in spec]
    e = Engine(model=MODEL, state_slots=60, chunk_size=16, strategy=strategy, cuda_graph_bs=sizes)
    rep = e.serve(reqs, max_batch_tokens=48)
    assert_uncached(rep, reqs)
    assert rep.peak_running <= sizes[-1]
    e.check_integrity()
