"""kda.chunked proves q, k and v finite from its outputs (inputs._validate_deferred): a NaN or
inf anywhere in them must still be refused by name, whatever else conspires to hide it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kda_testdata import kda_inputs

from kda_core import kda
from kda_core.kda import inputs


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
        inputs._validate_deferred(q, k, v, g, beta, None, None)
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
