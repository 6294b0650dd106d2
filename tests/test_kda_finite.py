"""kda.chunked proves q, k and v finite from its outputs and g finite and <= 0 from what its
head threads measure (inputs.validate_deferred / _check_deferred): a NaN or inf anywhere in
them, or a positive g, must still be refused by name and in the full check's order, whatever
else conspires to hide it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kda_testdata import kda_inputs

from kda_core import kda
from kda_core.kda import _inputs as inputs


def conspiring_inputs(seed: int, T: int, where: float, hide: str):
    """Seeded inputs (H=2, K=4, V=3) and the token t, head h a test spoils, with what could
    hide a bad entry there: its token writes nothing (beta 0), its key is zero, the state
    starts at zero, all three, or decays so strong that the sub-chunk path with masked
    exponents runs. Returns (rng, inputs, t, h); rng goes on to pick the channel."""
    rng = np.random.default_rng(seed)
    q, k, v, g, beta, S0 = kda_inputs(rng, T, H=2, K=4, V=3)
    t, h = int(where * T), int(rng.integers(2))
    if hide in ("beta0", "all"):
        beta[t, h] = 0.0
    if hide in ("k0", "all"):
        k[t, h] = 0.0
    if hide in ("zero_state", "all"):
        S0[:] = 0.0
    if hide == "strong_decay":
        g *= 300.0
    return rng, (q, k, v, g, beta, S0), t, h


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 150),
    name=st.sampled_from(["q", "k", "v"]),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
    where=st.floats(0, 1, exclude_max=True),
    chunk=st.sampled_from([1, 16, 64]),
    dtype=st.sampled_from([np.float32, np.float64]),
    hide=st.sampled_from(["none", "beta0", "k0", "zero_state", "all", "strong_decay"]),
    seed=st.integers(0, 2**16),
)
def test_a_non_finite_q_k_or_v_is_refused_by_name(T, name, bad, where, chunk, dtype, hide, seed):
    """Conspiracies that could hide the bad entry: its token writes nothing (beta 0), its key
    is zero, the state starts at zero, all three, or decays so strong that the sub-chunk path
    with masked exponents runs."""
    rng, (q, k, v, g, beta, S0), t, h = conspiring_inputs(seed, T, where, hide)
    args = {"q": q, "k": k, "v": v}
    args[name][t, h, int(rng.integers(args[name].shape[2]))] = bad
    cast = [x.astype(dtype) for x in (q, k, v, g, beta, S0)]
    with pytest.raises(ValueError, match=f"^{name} must be finite"):
        kda.chunked(*cast[:5], initial_state=cast[5], chunk_size=chunk)


def test_the_deferred_check_reports_what_the_full_check_reports(rng):
    q, k, v, g, beta, S0 = kda_inputs(rng, 20)
    v[3, 0, 0] = np.nan
    beta[0, 0] = 3.0  # two bad arguments: the full check's order decides (v before beta)
    with pytest.raises(ValueError, match="^v must be finite"):
        kda.chunked(q, k, v, g, beta)
    with pytest.raises(ValueError, match="^v must be finite"):
        inputs.validate_deferred(q, k, v, g, beta, None, None)
    k = k[:, :, :3]  # a shape error after a finiteness error: still the finiteness error
    with pytest.raises(ValueError, match="^v must be finite"):
        kda.chunked(q, k, v, g, beta)


def test_finite_inputs_that_overflow_warn_and_return(rng):
    """Finite but huge values overflow inside: no argument is to blame, so the results come
    back (as before the deferral) with one RuntimeWarning saying so."""
    q, k, v, g, beta, S0 = kda_inputs(rng, 8)
    q = np.full_like(q, 1e308)  # q S0 with S0 = 1e10 is far beyond float64's 1.8e308
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        o, S = kda.chunked(q, k, v, g, beta, initial_state=np.full_like(S0, 1e10))
    assert not np.all(np.isfinite(o)) and np.all(np.isfinite(S))
    assert [str(w.message) for w in caught] == [
        "kda.chunked: finite inputs overflowed to NaN or inf"
    ]


def test_finite_inputs_pass_without_warning(rng):
    q, k, v, g, beta, S0 = kda_inputs(rng, 70)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        o, S = kda.chunked(q, k, v, g, beta, initial_state=S0)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert np.abs(o - o_ref).max() <= 1e-10 and np.abs(S - S_ref).max() <= 1e-10


def test_refused_when_heads_run_on_threads(rng, monkeypatch):
    from kda_core.kda import chunkwise

    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setattr(chunkwise, "_GROUP_STATE", 0)
    monkeypatch.setenv("KDA_THREADS", "2")
    q, k, v, g, beta, _ = kda_inputs(rng, 90, H=4)
    k[77, 3, 1] = np.nan  # in the second thread's heads
    with pytest.raises(ValueError, match="^k must be finite"):
        kda.chunked(q, k, v, g, beta)


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 150),
    bad=st.sampled_from([np.nan, np.inf, -np.inf, 0.25]),
    where=st.floats(0, 1, exclude_max=True),
    chunk=st.sampled_from([1, 16, 64]),
    dtype=st.sampled_from([np.float32, np.float64]),
    hide=st.sampled_from(["none", "beta0", "k0", "zero_state", "all", "strong_decay"]),
    seed=st.integers(0, 2**16),
)
def test_a_bad_g_is_refused_by_name(T, bad, where, chunk, dtype, hide, seed):
    """g's checks run on the head threads: its max (NaN, +inf and positive entries) and each
    chunk's sum of g (a -inf makes it -inf), whatever the token's key, beta or state."""
    rng, (q, k, v, g, beta, S0), t, h = conspiring_inputs(seed, T, where, hide)
    g[t, h, int(rng.integers(4))] = bad
    cast = [x.astype(dtype) for x in (q, k, v, g, beta, S0)]
    message = "^g is a log decay and must be <= 0" if bad == 0.25 else "^g must be finite"
    with pytest.raises(ValueError, match=message):
        kda.chunked(*cast[:5], initial_state=cast[5], chunk_size=chunk)


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ({"g": np.nan, "beta": 3.0}, "^g must be finite"),  # finiteness checks come first
        ({"g": 0.5, "beta": 3.0}, "^g is a log decay"),  # g's range before beta's
        ({"q": np.inf, "g": 0.5}, "^q must be finite"),
        ({"g": -np.inf, "v": np.nan}, "^v must be finite"),  # v is checked before g
    ],
)
def test_two_bad_arguments_give_the_full_checks_first_error(rng, plant, message):
    q, k, v, g, beta, _ = kda_inputs(rng, 40)
    args = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    for name, value in plant.items():
        args[name][(7, 1)] = value
    with pytest.raises(ValueError, match=message):
        kda.chunked(q, k, v, g, beta)
    with pytest.raises(ValueError, match=message):  # the full check's own order
        kda.recurrent(q, k, v, g, beta)


def test_a_finite_g_whose_chunk_sum_overflows_is_not_refused():
    """float32 g of -3e38 twice in one chunk sums to -inf: the run's measure flags it, the full
    check finds g finite, so no argument is refused; what the run made of such a decay stands
    with the overflow warning, exactly as when g is checked up front (`_validate`)."""
    rng = np.random.default_rng(5)
    q, k, v, g, beta, S0 = (x.astype(np.float32) for x in kda_inputs(rng, 48))
    g[10:12, 0, 2] = -3e38
    inputs.validate(q, k, v, g, beta, S0, None)  # the full check passes
    with pytest.warns(RuntimeWarning, match="finite inputs overflowed"):
        kda.chunked(q, k, v, g, beta, initial_state=S0)


def test_a_bad_g_is_refused_when_heads_run_on_threads(rng, monkeypatch):
    from kda_core.kda import chunkwise

    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setattr(chunkwise, "_GROUP_STATE", 0)
    monkeypatch.setenv("KDA_THREADS", "2")
    q, k, v, g, beta, _ = kda_inputs(rng, 90, H=4)
    g[77, 3, 1] = -np.inf  # in the second thread's heads
    with pytest.raises(ValueError, match="^g must be finite"):
        kda.chunked(q, k, v, g, beta)
    g[77, 3, 1] = 1.0
    with pytest.raises(ValueError, match="^g is a log decay"):
        kda.chunked(q, k, v, g, beta)
