"""kda_core.model.train: the torch network equals TinyHybrid, and a short run repeats bit for bit.

Skipped without torch (the optional `[train]` extra); CI installs torch. The full training run
(hours on a shared CPU) never runs here: a 20-step run on a small batch checks determinism.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the optional [train] extra")

from kda_core import kda  # noqa: E402
from kda_core import model as M  # noqa: E402
from kda_core.model import _torch_net as N  # noqa: E402
from kda_core.model import corpus  # noqa: E402
from kda_core.model import train as T  # noqa: E402

TEXT = "Return the number of bytes in the buffer. 状态大小固定。" * 4


@pytest.mark.parametrize(("length", "chunk"), [(1, 16), (37, 16), (64, 16), (50, 32), (9, 4)])
def test_kda_chunked_equals_the_numpy_recurrence(rng, length, chunk):
    H, K = 2, 8
    q = rng.standard_normal((length, H, K))
    k = kda.l2norm(rng.standard_normal((length, H, K)))
    v = rng.standard_normal((length, H, K))
    g = -rng.uniform(0.0, 5.0, (length, H, K))  # the lower-bound gate's whole range
    beta = rng.uniform(0.0, 1.0, (length, H))
    o_ref, _ = kda.recurrent(q, k, v, g, beta)
    args = [torch.tensor(x)[None] for x in (q, k, v, g, beta)]
    o = N._kda_chunked(*args, chunk=chunk)[0].numpy()
    np.testing.assert_allclose(o, o_ref, atol=1e-12, rtol=0)


def test_kda_chunked_float32_survives_the_strongest_decay(rng):
    """g at the lower bound for a whole chunk: every factor stays finite in float32."""
    length, H, K = 64, 1, 8
    q, k, v = (kda.l2norm(rng.standard_normal((length, H, K))) for _ in range(3))
    g = np.full((length, H, K), -4.999)
    beta = np.full((length, H), 0.9)
    o_ref, _ = kda.recurrent(q, k, v, g, beta)
    args = [torch.tensor(x, dtype=torch.float32)[None] for x in (q, k, v, g, beta)]
    o = N._kda_chunked(*args, chunk=32)[0].numpy()
    assert np.isfinite(o).all()
    np.testing.assert_allclose(o, o_ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("weights", ["trained", "random"])
def test_torch_forward_equals_numpy_forward(weights):
    """Max |dlogit| <= 1e-4 in float32 (the required bound) and <= 1e-9 in float64 (same math)."""
    tiny = M.TinyHybrid(weights=weights)
    ids = M.encode(TEXT)
    ref = tiny.prefill(ids, tiny.new_state())
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-9)):
        p = N.params_from(tiny, dtype)
        with torch.no_grad():
            out = N.forward(p, torch.tensor([ids]), tiny.config, 16)[0].double().numpy()
        assert np.abs(out - ref).max() <= tol, (weights, dtype)


def _short_run() -> tuple[dict, list[dict]]:
    cfg = T._TrainConfig(steps=20, batch=2, seq_len=32, warmup=5, log_every=5)
    return T.train(cfg, text=corpus.load("train")[:20000], log=lambda _row: None)


def test_twenty_steps_are_bit_for_bit_reproducible():
    a, rows_a = _short_run()
    b, rows_b = _short_run()
    assert a.keys() == b.keys() == M.named_weights(M.TinyHybrid(weights="random")).keys()
    for k in a:
        assert a[k].dtype == np.float32 and np.array_equal(a[k], b[k]), k
    assert [r["bpb"] for r in rows_a] == [r["bpb"] for r in rows_b]
    # it trains: 20 steps move the loss below uniform guessing (8 bits) from ~8.5 at init
    assert rows_a[-1]["bpb"] < rows_a[0]["bpb"] and rows_a[-1]["bpb"] < 8.0


def test_the_step_only_schedule_makes_a_short_run_the_prefix_of_a_long_one():
    """rsqrt: lr depends on the step alone, so k steps of an n-step run are a k-step run (a
    continuation stopped at any step is reproducible); cosine depends on n."""
    cfg = T._TrainConfig(steps=9, batch=2, seq_len=32, warmup=4, schedule="rsqrt", log_every=1)
    assert [T._lr(cfg, s) for s in (0, 3, 15)] == pytest.approx([1e-3, 4e-3, 2e-3])
    text, init = corpus.load("train")[:20000], _short_run()[0]
    seen = {}
    T.train(cfg, text, lambda _r: None, lambda step, w: seen.setdefault(step, w), init)
    short, _ = T.train(dataclasses.replace(cfg, steps=5), text, lambda _r: None, init=init)
    assert sorted(seen) == list(range(1, 10))  # keyed by the steps done
    assert all(np.array_equal(short[k], seen[5][k]) for k in short)
    assert not np.array_equal(seen[9]["embed"], seen[5]["embed"])
    cosine = dataclasses.replace(cfg, schedule="cosine")
    assert T._lr(cosine, 6) != T._lr(dataclasses.replace(cosine, steps=20), 6)
    with pytest.raises(ValueError, match="schedule must be"):
        T._TrainConfig(schedule="linear")
