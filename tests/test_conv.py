"""Short conv: whole pass == fla-style decode loop == split at every position with the window."""

from __future__ import annotations

import numpy as np
import pytest
from kda_testdata import conv_naive

from kda_core.kda.conv import short_conv


@pytest.fixture
def data(rng):
    return rng.standard_normal((23, 6)), rng.standard_normal((6, 4)), rng.standard_normal((3, 6))


@pytest.mark.parametrize("activation", ["silu", "identity"])
def test_vectorised_matches_decode_loop(data, activation):
    x, w, win = data
    y, new = short_conv(x, w, win, activation)
    y_ref, new_ref = conv_naive(x, w, win, activation)
    assert np.max(np.abs(y - y_ref)) <= 1e-14
    assert np.array_equal(new, new_ref)


def test_formula_and_window_contents(data):
    x, w, win = data
    y, new = short_conv(x, w, win, "identity")
    full = np.vstack([win, x])
    for t in range(23):
        assert np.allclose(y[t], np.sum(w.T * full[t : t + 4], axis=0), atol=1e-14)
    assert np.array_equal(new, x[-3:])  # the last W-1 raw inputs, oldest first


def test_short_input_keeps_old_window_tail(data):
    x, w, win = data
    _, new = short_conv(x[:2], w, win)
    assert np.array_equal(new, np.vstack([win[2:], x[:2]]))


def test_split_at_every_position(data):
    x, w, win = data
    y_full, w_full = short_conv(x, w, win)
    for s in range(24):
        y1, mid = short_conv(x[:s], w, win)
        y2, end = short_conv(x[s:], w, mid)
        assert np.max(np.abs(np.vstack([y1, y2]) - y_full)) <= 1e-14
        assert np.array_equal(end, w_full)


def test_token_by_token_decode(data):
    x, w, win = data
    y_full, w_full = short_conv(x, w, win)
    window = win
    for t in range(23):  # the decode path: one token at a time, the window carried
        y_t, window = short_conv(x[t][None], w, window)
        assert np.max(np.abs(y_t[0] - y_full[t])) <= 1e-14
    assert np.array_equal(window, w_full)


def test_zero_window_by_default(data):
    x, w, _ = data
    assert np.array_equal(short_conv(x, w)[0], short_conv(x, w, np.zeros((3, 6)))[0])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(x=np.zeros((4, 5))), "x"),
        (dict(w=np.zeros(6)), "w"),
        (dict(window=np.zeros((4, 6))), "window"),
        (dict(activation="relu"), "activation"),
        (dict(x=np.full((4, 6), np.nan)), "x"),
    ],
)
def test_bad_inputs(data, kwargs, name):
    x, w, win = data
    args = dict(x=x, w=w, window=win, activation="silu") | kwargs
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        short_conv(**args)


def test_contract_facade_is_the_real_conv():
    # kda_core.conv.short_conv is the public API entry; the code lives in kda_core.kda.conv
    import kda_core.conv as facade
    from kda_core.kda import conv as real

    assert facade.short_conv is real.short_conv and facade.silu is real.silu
