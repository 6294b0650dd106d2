"""chunked_varlen checks q, k, v, g and the initial states from its run, as kda.chunked does
(varlen._validate_deferred / inputs.check_deferred): a NaN or inf in any of them, or a positive
g, must still be refused by name and in the full check's order, whatever the sequence layout
(empty sequences, tails in the batched rounds, long ones through chunkwise) or the threads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kda_testdata import kda_inputs

from kda_core.kda import _varlen_rounds as varlen_rounds
from kda_core.kda import chunkwise, varlen

H, K, V = 2, 4, 3


def packed(rng, lens):
    T = int(sum(lens))
    q, k, v, g, beta, _ = kda_inputs(rng, T, H, K, V)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return q, k, v, g, beta, cu, rng.standard_normal((len(lens), H, K, V))


@settings(max_examples=80, deadline=None)
@given(
    lens=st.lists(st.integers(0, 200), min_size=1, max_size=6).filter(lambda x: sum(x) > 0),
    name=st.sampled_from(["q", "k", "v", "g", "initial_states"]),
    bad=st.sampled_from([np.nan, np.inf, -np.inf, 0.5]),
    where=st.floats(0, 1, exclude_max=True),
    chunk=st.sampled_from([16, 64]),
    hide=st.sampled_from(["none", "beta0", "k0", "zero_states"]),
    seed=st.integers(0, 2**16),
    per_piece=st.booleans(),
)
def test_a_bad_entry_is_refused_by_name(lens, name, bad, where, chunk, hide, seed, per_piece):
    """0.5 is bad only for g (a positive log decay); the others are bad everywhere. An
    initial state's bad entry may sit in an empty sequence's state (it is only carried).
    ``per_piece``: the rounds step big states piece by piece (varlen_rounds._STATE_VIEW_BYTES)."""
    with pytest.MonkeyPatch.context() as mp:
        if per_piece:
            mp.setattr(varlen_rounds, "_STATE_VIEW_BYTES", 0)
        _refused_by_name(lens, name, bad, where, chunk, hide, seed)


def _refused_by_name(lens, name, bad, where, chunk, hide, seed):
    rng = np.random.default_rng(seed)
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    t, h = int(where * cu[-1]), int(rng.integers(H))
    if hide == "beta0":
        beta[t, h] = 0.0
    if hide == "k0":
        k[t, h] = 0.0
    if hide == "zero_states":
        S0[:] = 0.0
    args = {"q": q, "k": k, "v": v, "g": g, "initial_states": S0}
    x = args[name]
    if name == "initial_states":
        x[int(where * len(lens)), h, int(rng.integers(K)), int(rng.integers(V))] = bad
    else:
        x[t, h, int(rng.integers(x.shape[2]))] = bad
    if bad == 0.5 and name != "g":
        return  # a finite value: nothing to refuse
    message = "g is a log decay" if (name == "g" and bad == 0.5) else f"{name} must be finite"
    with pytest.raises(ValueError, match=f"^{message}"):
        varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0, chunk_size=chunk)


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ({"initial_states": np.nan, "cu": True}, "^cu_seqlens must start at 0"),  # cu first
        ({"initial_states": np.nan, "q": np.inf}, "^q must be finite"),
        ({"g": 1.0, "beta": 5.0}, "^g is a log decay"),
        ({"initial_states": np.inf, "beta": 5.0}, "^beta must be in"),  # beta before states
    ],
)
def test_two_bad_arguments_give_the_full_checks_first_error(plant, message):
    rng = np.random.default_rng(3)
    q, k, v, g, beta, cu, S0 = packed(rng, [40, 0, 90])
    for name, value in plant.items():
        if name == "cu":
            cu = cu.copy()
            cu[0] = 1
        elif name == "initial_states":
            S0[1, 0, 0, 0] = value
        else:
            {"q": q, "g": g, "beta": beta}[name][(5, 1) if name == "beta" else (5, 1, 0)] = value
    with pytest.raises(ValueError, match=message):
        varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    with pytest.raises(ValueError, match=message):  # the full check's own order
        varlen.chunked_varlen_naive(q, k, v, g, beta, cu, initial_states=S0)


def test_sequences_split_over_threads_equal_one_thread(monkeypatch):
    """Balanced sequences go to threads whole (every head of each): the same results as one
    thread, and a bad entry in the second thread's sequences is still named."""
    rng = np.random.default_rng(9)
    lens = [300, 5, 64, 1, 130, 290, 0]
    q, k, v, g, beta, cu, S0 = packed(rng, lens)
    monkeypatch.setenv("KDA_THREADS", "1")
    o1, S1 = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    monkeypatch.setattr(chunkwise, "_THREAD_ELEMENTS", 0)
    monkeypatch.setattr(chunkwise, "_GROUP_STATE", 0)
    monkeypatch.setenv("KDA_THREADS", "2")
    parts = varlen._balanced_parts(np.diff(cu), 2)
    assert parts is not None and sorted(np.concatenate(parts)) == list(range(len(lens)))
    loads = [int(np.diff(cu)[p].sum()) for p in parts]
    assert max(loads) <= 1.1 * sum(lens) / 2  # LPT: 300 | 290, then 130, 64, ... to the lighter
    o2, S2 = varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)
    np.testing.assert_allclose(o2, o1, atol=1e-13, rtol=0)
    np.testing.assert_allclose(S2, S1, atol=1e-13, rtol=0)
    o3, S3 = varlen.chunked_varlen_naive(q, k, v, g, beta, cu, initial_states=S0)
    np.testing.assert_allclose(o2, o3, atol=1e-10, rtol=0)
    np.testing.assert_allclose(S2, S3, atol=1e-10, rtol=0)
    k[cu[5] + 7, 1, 2] = np.nan  # sequence 5 (290 tokens) is in the other part from sequence 0
    assert not any(0 in p and 5 in p for p in parts)
    with pytest.raises(ValueError, match="^k must be finite"):
        varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0)


def test_one_long_sequence_among_short_ones_splits_heads():
    """The heaviest part would carry far more than its share: no sequence split."""
    assert varlen._balanced_parts(np.array([900, 10, 20, 30]), 2) is None
    assert varlen._balanced_parts(np.array([100, 100]), 1) is None
    assert varlen._balanced_parts(np.array([500]), 2) is None


@pytest.mark.parametrize("per_piece", [False, True])
@pytest.mark.parametrize("name", ["q", "v"])
def test_a_bad_entry_in_a_gathered_round_is_refused(monkeypatch, per_piece, name):
    """Chunk 64, lengths 16, 40, 16: sequences 0 and 2 share a 16-row bucket, not numbered
    consecutively, so their states are gathered (or, ``per_piece``, stepped on their own rows).
    A NaN in q there reaches only o, so the rounds' measured sum of o must carry it."""
    if per_piece:
        monkeypatch.setattr(varlen_rounds, "_STATE_VIEW_BYTES", 0)
    rng = np.random.default_rng(3)
    q, k, v, g, beta, cu, S0 = packed(rng, [16, 40, 16])
    buckets = [list(seqs) for _, seqs, _, _ in varlen_rounds.rounds(cu[:-1], np.diff(cu), 64)]
    assert [0, 2] in buckets
    dict(q=q, v=v)[name][cu[2] + 3, 1, 0] = np.nan  # row 3 of sequence 2
    with pytest.raises(ValueError, match=f"^{name} must be finite"):
        varlen.chunked_varlen(q, k, v, g, beta, cu, initial_states=S0, chunk_size=64)
