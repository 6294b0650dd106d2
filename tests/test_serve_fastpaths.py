"""The batched serve's fast paths against their naive twins (issue 13's speed work).

* ``padded_latents`` (every request's MLA latents in one padded array, built once per decode
  step) against per-request concatenation;
* ``mla_attend_padded`` on a strided per-layer view (how ``decode_packed`` calls it) against
  one request at a time through ``TinyHybrid.mla_mixer``'s attention written out;
* the checkpoint pool's digest: any one-byte change of any stored array is caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.cache.pool import ActivePool, CheckpointPool, PoolError, StateShape
from kda_core.model import KDALayerState
from kda_core.serve.batch import mla_attend_padded, padded_latents


@pytest.mark.parametrize("lens", [[0, 0, 0], [4, 4], [0, 5, 17, 2], [3]])
def test_padded_latents_equals_per_request_concatenation(lens):
    rng = np.random.default_rng(len(lens) + sum(lens))
    pasts = [rng.standard_normal((n, 2, 3)) for n in lens]
    new = rng.standard_normal((len(lens), 1, 2, 3))
    lat, n = padded_latents(pasts, new)
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
    lat, n = padded_latents(pasts, rng.standard_normal((B, 1, 2, C)))
    q = rng.standard_normal((B, Hm * dh))
    uk, uv = rng.standard_normal((Hm, dh, C)), rng.standard_normal((Hm, C, dh))
    for j in range(2):  # each MLA layer's latents: a strided view of the padded array
        got = mla_attend_padded(q, lat[:, :, j], n, uk, uv, dh)
        for b in range(B):
            ref = _attend_one(q[b], lat[b, : n[b], j], uk, uv, dh)
            np.testing.assert_allclose(got[b], ref, atol=1e-12, rtol=0)


SHAPE = StateShape(layers=2, heads=2, k=4, v=3, conv_rows=3, conv_dim=24)


@pytest.mark.parametrize("int8", [False, True])
def test_checkpoint_digest_catches_any_one_byte_change(int8):
    rng = np.random.default_rng(3)
    active = ActivePool(SHAPE, 1)
    a = active.allocate("r")
    active.bind(
        a,
        [
            KDALayerState(rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 24)))
            for _ in range(2)
        ],
    )
    pool = CheckpointPool(SHAPE, 1, int8=int8)
    c = pool.store_from_active(active, a, "tree")
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
    from kda_core.model.functional import sigmoid as sigmoid_ref
    from kda_core.serve.fused import sigmoid, silu

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
