"""The batched serve's fast paths against their naive twins.

* ``padded_latents`` (every request's MLA latents in one padded array, built once per decode
  step) against per-request concatenation;
* ``mla_attend_padded`` on a strided per-layer view (how ``decode_packed`` calls it) against
  one request at a time through ``TinyHybrid.mla_mixer``'s attention written out;
* the checkpoint pool's digest: any one-byte change of any stored array is caught;
* ``mla_attend_chunks`` (the packed prefill's MLA, chunks batched) against causal attention per
  query, and ``forward_batch`` on the batch shapes that pick each MLA path;
* ``serve._heap.keep_freed_memory``: freed blocks are not faulted in again; an Engine sets it
  once per process unless the environment declines it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kda_core.model import KDALayerState
from kda_core.model._attend import mla_attend_padded
from kda_core.model._attend import padded_latents as _padded_latents
from kda_core.serve._checkpoints import CheckpointPool
from kda_core.serve._slots import ActivePool, PoolError, StateShape
from tests.pool_helpers import bind


@pytest.mark.parametrize("lens", [[0, 0, 0], [4, 4], [0, 5, 17, 2], [3]])
def test_padded_latents_equals_per_request_concatenation(lens):
    rng = np.random.default_rng(len(lens) + sum(lens))
    pasts = [rng.standard_normal((n, 2, 3)) for n in lens]
    new = rng.standard_normal((len(lens), 1, 2, 3))
    lat, n = _padded_latents(pasts, new)
    assert lat.shape == (len(lens), max(lens) + 1, 2, 3)
    np.testing.assert_array_equal(n, np.array(lens) + 1)
    for b, p in enumerate(pasts):
        np.testing.assert_array_equal(lat[b, : n[b]], np.concatenate([p, new[b]], axis=0))
        assert not lat[b, n[b] :].any()  # the padding is zeros (and masked by the attention)


def _attend_one(q, lat, uk, uv, dh):
    """One request, its latents up-projected (the naive, non-absorbed form): K_h = lat W_uk,h
    and V_h = lat W_uv,h^T, softmax(q_h K_h^T / sqrt(dh)) V_h per head."""
    out = []
    for h in range(uk.shape[0]):
        keys = lat @ uk[h].T  # [n, dh]
        vals = lat @ uv[h]  # [n, dh]
        s = keys @ q[h * dh : (h + 1) * dh] / np.sqrt(dh)
        p = np.exp(s - s.max())
        out.append((p / p.sum()) @ vals)
    return np.concatenate(out)


@pytest.mark.parametrize("lens", [[3, 3, 3], [0, 6, 1, 9]])
def test_mla_attend_padded_strided_view_equals_one_request_at_a_time(lens):
    """Bound: float64 rounding of sums of <= 32 O(1) terms (~1e-14), with room."""
    rng = np.random.default_rng(sum(lens))
    B, C, Hm, dh = len(lens), 8, 2, 4
    pasts = [rng.standard_normal((n, 2, C)) for n in lens]
    lat, n = _padded_latents(pasts, rng.standard_normal((B, 1, 2, C)))
    q = rng.standard_normal((B, Hm * dh))
    uk, uv = rng.standard_normal((Hm, dh, C)), rng.standard_normal((Hm, C, dh))
    for j in range(2):  # each MLA layer's latents: a strided view of the padded array
        got = mla_attend_padded(q, lat[:, :, j], n, uk, uv, dh)
        for b in range(B):
            ref = _attend_one(q[b], lat[b, : n[b], j], uk, uv, dh)
            np.testing.assert_allclose(got[b], ref, atol=1e-12, rtol=0)


SHAPE = StateShape(s=(2, 2, 4, 3), conv=(2, 3, 24))


@pytest.mark.parametrize("int8", [False, True])
def test_checkpoint_digest_catches_any_one_byte_change(int8):
    rng = np.random.default_rng(3)
    active = ActivePool(SHAPE, 1)
    a = active.allocate("r")
    bind(
        active,
        a,
        [
            KDALayerState(rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 24)))
            for _ in range(2)
        ],
    )
    pool = CheckpointPool(SHAPE, 1, int8=int8)
    c = pool.store(*active.buffers(a), "tree")
    pool.check_integrity()
    for arr in pool.raw(c):
        arr.flags.writeable = True  # force writes: the digest must notice each one
        raw = arr.reshape(-1).view(np.uint8)
        for pos in (0, raw.size // 2, raw.size - 1):  # first, middle and last byte
            raw[pos] ^= 1  # the lowest bit of one byte
            with pytest.raises(PoolError, match="changed while shared"):
                pool.check_integrity()
            raw[pos] ^= 1  # restored: the digest agrees again
            pool.check_integrity()
        arr.flags.writeable = False


def test_exp_form_logistic_equals_the_models_tanh_form():
    """``fused.sigmoid`` / ``fused.silu`` (exp form, clipped at -x = 700) against the logistic
    computed stably branch by branch (relative 1e-14: a few ulps) and against the model's tanh
    form ``functional.sigmoid`` / ``conv.silu`` (absolute: 1 + tanh cancels for x < 0, so the
    tanh form itself is only good to ~1e-16 absolute), from the middle to far past exp's
    overflow (|x| > 709): finite and no overflow raised (the clip)."""
    from kda_core.kda.conv import silu as silu_ref
    from kda_core.model._functional import sigmoid as sigmoid_ref
    from kda_core.model._fused import sigmoid, silu

    x = np.concatenate([np.linspace(-40, 40, 4001), [-1e4, -800.0, -710.0, 710.0, 800.0, 1e4]])
    with np.errstate(over="raise", invalid="raise"):  # an overflow in exp would raise
        s, f = sigmoid(x), silu(x)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(x))  # in (0, 1]: the stable branches
        exact = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    small = x > -700  # below, the clip gives e^-700 (~1e-304) where the truth is smaller
    np.testing.assert_allclose(s[small], exact[small], rtol=1e-14, atol=0)
    np.testing.assert_allclose(f[small], (x * exact)[small], rtol=1e-14, atol=0)
    assert np.all(np.abs(s[~small]) < 1e-300) and np.all(np.abs(f[~small]) < 1e-295)
    np.testing.assert_allclose(s, sigmoid_ref(x), rtol=0, atol=4.5e-16)  # 2 ulps of 1
    np.testing.assert_allclose(f, silu_ref(x), rtol=0, atol=1e-14)
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(f))


def test_packed_prefill_unclipped_logistic_equals_stable_branches():
    """The packed prefill's four-pass logistic forms (``batch._silu_into``, written over its
    input, and ``batch._gated`` = sigmoid(x) o), exp not clipped, against the logistic
    computed stably branch by branch (relative 1e-14, as above), from the middle to far past
    exp's overflow (x < -709), where exp(-x) = inf must give exactly 0 (the truth is below
    1e-300 there; finite, no warning raised)."""
    from kda_core.model.batch import _gated, _silu_into

    x = np.concatenate([np.linspace(-40, 40, 4001), [-1e4, -800.0, -710.0, 710.0, 800.0, 1e4]])
    o = np.random.default_rng(0).standard_normal(x.shape)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(x))
        exact = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    y = x.copy()
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # overflow handled inside
        f, gated = _silu_into(y), _gated(x, o)
    assert f is y  # written over its input (the conv's fresh output)
    fine = x > -709  # below, exp(-x) overflows: 0 where the truth is below 1e-300
    np.testing.assert_allclose(f[fine], (x * exact)[fine], rtol=1e-14, atol=0)
    np.testing.assert_allclose(gated[fine], (o * exact)[fine], rtol=1e-14, atol=0)
    assert np.all(f[~fine] == 0.0) and np.all(gated[~fine] == 0.0)
    assert np.all(np.abs((x * exact)[~fine]) < 1e-300)


@pytest.mark.parametrize("pasts, n", [([0, 0, 0], 5), ([4, 4], 3), ([0, 6, 1, 9], 4), ([2], 1)])
def test_mla_attend_chunks_equals_causal_attention_per_query(pasts, n):
    """The packed prefill's batched chunk attention (equal and ragged pasts: the zero padding
    of the shorter ones must be masked) against each query of each chunk alone over the
    latents it may see, its chunk's pasts then its own first t + 1 (the naive form above).
    Bound: as the test above."""
    from kda_core.model._attend import mla_attend_chunks

    rng = np.random.default_rng(sum(pasts) + n)
    B, C, Hm, dh = len(pasts), 8, 2, 4
    past = [rng.standard_normal((p, C)) for p in pasts]
    new = rng.standard_normal((B, n, C))
    q = rng.standard_normal((B, n, Hm * dh))
    uk, uv = rng.standard_normal((Hm, dh, C)), rng.standard_normal((Hm, C, dh))
    got = mla_attend_chunks(q, new, past, uk, uv, dh)
    assert got.shape == (B, n, Hm * dh)
    for b in range(B):
        lat = np.concatenate([past[b], new[b]], axis=0)
        for t in range(n):
            ref = _attend_one(q[b, t], lat[: pasts[b] + t + 1], uk, uv, dh)
            np.testing.assert_allclose(got[b, t], ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "pasts, lens",
    [
        ([16, 16, 16], [16, 16, 16]),  # second chunks: equal pasts, one batched group
        ([0, 5, 0, 11], [6, 6, 6, 6]),  # ragged pasts in one group (padded, masked)
        ([0, 0, 0, 90], [4, 4, 4, 4]),  # one long past: the group runs chunk by chunk
        ([3, 0, 7, 7, 2, 0], [16, 1, 9, 16, 1, 9]),  # decodes + two groups, interleaved
        ([0, 4, 2, 0, 3], [8, 8, 8, 8, 8]),  # cut by the score cap (set small below)
    ],
)
def test_packed_prefill_fast_paths_equal_per_request_forward(pasts, lens, monkeypatch):
    """forward_batch (fused projections, batched MLA chunk groups) against TinyHybrid.forward
    per request, for the batch shapes that pick each MLA path. Bounds as
    tests/test_serve_batch.py: rounding of O(1) float64 dot products, with room."""
    from kda_core.model import TinyHybrid, _attend
    from kda_core.model._attend import chunk_groups as _chunk_groups
    from kda_core.model.batch import forward_batch

    if lens == [8] * 5:  # a cap of two chunks' scores: groups of 2, 2 and 1
        heads = TinyHybrid(weights="random", seed=7).config.mla_heads
        monkeypatch.setattr(_attend, "MAX_GROUP_SCORES", 2 * heads * 8 * (4 + 8))
        cut = _chunk_groups(np.array(lens), np.array(pasts), heads)
        assert [g.tolist() for g in cut] == [[0, 1], [2, 3], [4]]

    model = TinyHybrid(weights="random", seed=7)
    rng = np.random.default_rng(sum(lens))
    states = []
    for p in pasts:
        st = model.new_state()
        if p:
            model.prefill([int(t) for t in rng.integers(0, 256, p)], st)
        states.append(st)
    seqs = [[int(t) for t in rng.integers(0, 256, n)] for n in lens]
    logits, new = forward_batch(model, seqs, states)
    for i, (seq, st) in enumerate(zip(seqs, states)):
        ref, ref_state = model.forward(seq, st)
        np.testing.assert_allclose(logits[i], ref, atol=1e-10, rtol=0)
        np.testing.assert_allclose(new[i].mla_kv, ref_state.mla_kv, atol=1e-12, rtol=0)
        for a, b in zip(new[i].kda, ref_state.kda):
            np.testing.assert_allclose(a.S, b.S, atol=1e-10, rtol=0)
            np.testing.assert_allclose(a.conv, b.conv, atol=1e-12, rtol=0)


def test_keep_freed_memory_stops_refaulting_the_packed_prefill():
    """serve._heap: after ``keep_freed_memory`` a packed prefill of 32 x 16 tokens reuses the
    heap its previous call freed, so a repeat call faults (almost) no pages in; glibc's
    default thresholds measured 2,500-6,500 minor faults per call (its multi-megabyte
    temporaries freshly mmapped or the heap top trimmed and grown again). Counts pages, not
    time; glibc only."""
    import resource

    from kda_core.model import TinyHybrid
    from kda_core.model._fused import FusedWeights
    from kda_core.model.batch import forward_packed
    from kda_core.serve._heap import keep_freed_memory

    if not keep_freed_memory():
        pytest.skip("not glibc, or the environment declines it: keep_freed_memory does nothing")
    assert keep_freed_memory()  # idempotent
    model = TinyHybrid(weights="random", seed=7)
    c, N = model.config, 32
    rng = np.random.default_rng(0)
    ids = [[int(t) for t in rng.integers(0, 256, 16)] for _ in range(N)]
    L = len(model.kda_layers)
    S = np.zeros((L, N, c.n_heads, c.head_dim, c.head_dim))
    W = np.zeros((L, N, c.conv_size - 1, 3 * c.n_heads * c.head_dim))
    pasts = [np.zeros((0, len(model.mla_layers), c.mla_latent)) for _ in range(N)]
    wts = FusedWeights.of(model)
    faults = []
    for _ in range(3):  # the first call may grow the heap
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        forward_packed(model, ids, S, W, pasts, wts)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert min(faults[1:]) < 300, faults


@pytest.mark.parametrize(
    "env, expect",
    [
        ({}, "[True] None"),
        ({"KDA_KEEP_FREED_MEMORY": "0"}, "[False] KDA_KEEP_FREED_MEMORY"),
        ({"MALLOC_TRIM_THRESHOLD_": "1048576"}, "[False] MALLOC_TRIM_THRESHOLD_"),
        ({"KDA_KEEP_FREED_MEMORY": "Off"}, "[False] KDA_KEEP_FREED_MEMORY"),
        ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "[False] GLIBC_TUNABLES"),
        ({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"}, "[True] None"),  # not a threshold
    ],
)
def test_engine_sets_the_heap_thresholds_once_unless_declined(env, expect):
    """serve._heap in a fresh process (the setting is process-wide): nothing is set on import,
    making an Engine sets the thresholds (so ``generate`` and ``serve`` run alike), and
    KDA_KEEP_FREED_MEMORY=0 or a glibc MALLOC_*_ variable of the user's own declines it."""
    import platform
    import subprocess
    import sys
    from pathlib import Path

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc: keep_freed_memory does nothing")
    code = (
        "from kda_core.serve import _heap as heap\n"
        "from kda_core.serve.engine import Engine\n"
        "assert heap.keep_freed_memory.cache_info().currsize == 0\n"
        "Engine(); Engine()\n"
        "runs = heap.keep_freed_memory.cache_info().misses\n"
        "print([heap.keep_freed_memory()] * runs, heap.declined())\n"
    )
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KDA_KEEP_FREED_MEMORY", "GLIBC_TUNABLES") and not k.startswith("MALLOC_")
    }
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=base | env | {"PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert out.strip() == expect
