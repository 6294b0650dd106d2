"""ReplaySSM speculative decoding: ring verify == per-draft states == recurrent; exact commit for
every acceptance count; rejected drafts leave no trace (the engine decoding with it:
tests/test_serve_spec.py)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from kda_testdata import kda_inputs

from kda_core import kda, sizing
from kda_core import model as M
from kda_core.kda.quant import round_bf16
from kda_core.serve import spec
from kda_core.serve.spec._draft import ngram_draft
from kda_core.serve.spec._replay import ring_verify
from kda_core.studies._spec_memory import spec_memory
from kda_core.studies._speculative import fold_state, reconstruct_error, reconstruct_outputs

PROMPT = "ReplaySSM 只保存轻量输入。"
DRAFT = [101, 7, 200, 33, 64, 150, 9, 250]  # D = 8 arbitrary tokens


class Naive(NamedTuple):
    o: np.ndarray
    d: np.ndarray
    states: np.ndarray


def per_draft_states(S0, q, k, v, g, beta) -> Naive:
    """The naive twin of ``ring_verify``: step the recurrence token by token and keep every
    state [n, H, K, V] (what ReplaySSM never materialises)."""
    scale = S0.shape[1] ** -0.5
    S = S0.copy()
    n = k.shape[0]
    states = np.empty((n,) + S.shape)
    d = np.empty_like(v)
    o = np.empty_like(v)
    for t in range(n):
        S = np.exp(g[t])[:, :, None] * S
        d[t] = beta[t][:, None] * (v[t] - np.einsum("hk,hkv->hv", k[t], S))
        S = S + k[t][:, :, None] * d[t][:, None, :]
        states[t] = S
        o[t] = scale * np.einsum("hk,hkv->hv", q[t], S)
    return Naive(o, d, states)


@pytest.fixture(scope="module")
def tiny() -> M.TinyHybrid:
    return M.TinyHybrid()


@pytest.fixture(scope="module")
def committed(tiny) -> M.ModelState:
    st = tiny.new_state()
    tiny.prefill(M.encode(PROMPT), st)
    return st


def _sequential(tiny, state, tokens):
    st = state.copy()
    logits = [tiny.decode_step(t, st) for t in tokens]
    return st, np.array(logits).reshape(len(tokens), M.VOCAB)


# ---------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize("D, L", [(1, 2), (2, 4), (3, 8), (5, 16), (8, 16), (9, 32), (64, 128)])
def test_default_ring_len_is_next_pow2_of_2d(D, L):
    assert spec.check_ring_len(None, D) == L
    assert spec.check_ring_len(4 * L, D) == 4 * L


@pytest.mark.parametrize("bad", [24, 12, 17, 3])
def test_ring_len_not_power_of_two_is_rejected(tiny, bad):
    with pytest.raises(ValueError, match="ring_len must be a power of two"):
        spec.ReplaySSM(tiny, draft_tokens=8, ring_len=bad)


@pytest.mark.parametrize("bad", [8, 4, 1])
def test_ring_len_below_2d_is_rejected(tiny, bad):
    with pytest.raises(ValueError, match=r"ring_len must be >= 2\*draft_tokens = 16"):
        spec.ReplaySSM(tiny, draft_tokens=8, ring_len=bad)


@pytest.mark.parametrize("bad", [0, 65, -1, 2.0, True, "8"])
def test_draft_tokens_range(tiny, bad):
    with pytest.raises(ValueError, match="draft_tokens"):
        spec.ReplaySSM(tiny, draft_tokens=bad)


def test_ring_len_cap(tiny):
    with pytest.raises(ValueError, match=r"ring_len must be in \[1, 1024\]"):
        spec.ReplaySSM(tiny, draft_tokens=8, ring_len=2048)


def test_verify_and_commit_validation(tiny, committed):
    rs = spec.ReplaySSM(tiny, draft_tokens=4)
    with pytest.raises(ValueError, match="at most draft_tokens = 4"):
        rs.verify(committed, DRAFT[:5])
    with pytest.raises(ValueError, match="tokens must not be empty"):
        rs.verify(committed, [])
    with pytest.raises(ValueError, match="tokens must be ids"):
        rs.verify(committed, [1, 256])
    res = rs.verify(committed, DRAFT[:4])
    with pytest.raises(ValueError, match=r"n_accept must be in \[0, 4\]"):
        rs.commit(committed, res, 5)
    other = committed.copy()
    tiny.decode_step(3, other)
    with pytest.raises(ValueError, match="state must be the state that was verified"):
        rs.commit(other, res, 1)
    rs.commit(committed, res, 2)
    with pytest.raises(ValueError, match="latest uncommitted verify"):
        rs.commit(committed, res, 2)  # a result commits once
    old = rs.verify(committed, DRAFT[:2])
    rs.verify(committed, DRAFT[:3])
    with pytest.raises(ValueError, match="latest uncommitted verify"):
        rs.commit(committed, old, 1)  # a newer verify overwrote its ring entries
    with pytest.raises(ValueError, match="model must be a TinyHybrid"):
        spec.ReplaySSM("tiny")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# per-layer math: the ring path vs its naive twin


@pytest.mark.parametrize("T, g_scale", [(1, 1.0), (8, 1.0), (16, 3.0), (37, 0.2)])
def test_ring_verify_matches_per_draft_states_and_recurrent(rng, T, g_scale):
    q, k, v, g, beta, S0 = kda_inputs(rng, T, g_scale=g_scale)
    o, d = ring_verify(S0, q, k, v, g, beta)
    naive = per_draft_states(S0, q, k, v, g, beta)
    o_ref, S_ref = kda.recurrent(q, k, v, g, beta, initial_state=S0)
    assert naive.states.shape == (T,) + S0.shape
    assert np.max(np.abs(o - o_ref)) <= 1e-12
    assert np.max(np.abs(naive.o - o_ref)) <= 1e-12
    assert np.max(np.abs(d - naive.d)) <= 1e-12
    assert np.max(np.abs(naive.states[-1] - S_ref)) <= 1e-12


def test_fold_and_reconstruct_from_s0_and_ring(rng):
    T = 12
    q, k, v, g, beta, S0 = kda_inputs(rng, T)
    naive = per_draft_states(S0, q, k, v, g, beta)
    o = reconstruct_outputs(S0, q, naive.d, k, g)
    assert np.max(np.abs(o - naive.o)) <= 1e-12
    for m in range(1, T + 1):  # every intermediate state, never stored, from (S0, d, k, g)
        S_m = fold_state(S0, naive.d[:m], k[:m], g[:m])
        assert np.max(np.abs(S_m - naive.states[m - 1])) <= 1e-12


def test_exact_replay_is_the_recurrence_on_raw_inputs(rng):
    T = 9
    q, k, v, g, beta, S0 = kda_inputs(rng, T)
    rawk = k * rng.uniform(0.5, 3.0, (T, k.shape[1], 1))  # un-normalised key, same direction
    S = spec.exact_replay(S0, rawk, v, g, beta)
    k_n = rawk / np.sqrt(np.sum(rawk * rawk, axis=-1, keepdims=True) + 1e-6)  # SGLang's eps
    naive = per_draft_states(S0, q, k_n, v, g, beta)  # the twin: one state per token
    assert np.max(np.abs(S - naive.states[-1])) <= 1e-12


def test_one_bf16_rounding_in_the_project():
    """bf16 is rounded once, from float64 (never float64 -> float32 -> bf16, two roundings):
    1 + 2^-8 + 2^-30 lies just above the tie between 1 and 1 + 2^-7, so one rounding gives
    1 + 2^-7 where the double one would give 1."""
    assert not hasattr(spec, "round_bf16")
    x = np.array([1.0, 1 + 2**-8, 1 + 2**-8 + 2**-30, 1 + 3 * 2**-8, -2.0, 0.0, 3.140625])
    assert round_bf16(x).tolist() == [1.0, 1.0, 1.0078125, 1 + 2**-6, -2.0, 0.0, 3.140625]
    r = np.random.default_rng(0).standard_normal(1000)
    assert np.max(np.abs(round_bf16(r) - r) / np.abs(r)) <= 2**-8


def test_bf16_d_fold_drifts_but_exact_replay_does_not(rng):
    """Why the ring also keeps (rawv, rawk): folding a bf16 d leaks its rounding into S."""
    T = 16
    q, rawk, v, g, beta, S0 = kda_inputs(rng, T)
    k = kda.l2norm(rawk)  # what the model feeds the recurrence
    naive = per_draft_states(S0, q, k, v, g, beta)
    folded = fold_state(S0, round_bf16(naive.d), round_bf16(k), g)
    exact = spec.exact_replay(S0, rawk, v, g, beta)
    err_fold = np.max(np.abs(folded - naive.states[-1]))
    err_exact = np.max(np.abs(exact - naive.states[-1]))
    assert err_fold > 1e-4 and err_exact <= 1e-12


# ---------------------------------------------------------------------------------------------
# verify / commit on TinyHybrid


def test_verify_logits_equal_a_plain_forward(tiny, committed):
    rs = spec.ReplaySSM(tiny, draft_tokens=8)
    res = rs.verify(committed, DRAFT)
    logits_ref, _ = tiny.forward(DRAFT, committed)
    assert res.logits.shape == (8, M.VOCAB) and res.start == committed.boundary
    assert np.max(np.abs(res.logits - logits_ref)) <= 1e-12
    assert committed.boundary == len(M.encode(PROMPT))  # verify does not touch the state


def test_outputs_reconstructed_from_s0_and_ring_equal_direct(tiny, committed):
    rs = spec.ReplaySSM(tiny, draft_tokens=8)
    res = rs.verify(committed, DRAFT)
    # layer 0's inputs are known without running the model: recompute its outputs directly
    h = tiny.norm1(0, tiny.embed[DRAFT])
    f = tiny.kda_features(0, h, committed.kda[0].conv)
    o_direct, _ = kda.recurrent(f.q, f.k, f.v, f.g, f.beta, initial_state=committed.kda[0].S)
    d, k, g = (rs.rings[0].read(f, res.start, 8) for f in ("d", "k", "g"))
    rebuilt = reconstruct_outputs(committed.kda[0].S, res.q[0], d, k, g)
    assert np.max(np.abs(rebuilt - o_direct)) <= 1e-12
    assert reconstruct_error(rs, committed, res) <= 1e-12  # every layer
    # ring slots hold positions start..start+7 at p & (L-1)
    ring = rs.rings[0]
    assert len(ring.pos) == 16  # the ring length L
    assert sorted(ring.pos[ring.pos >= 0].tolist()) == list(range(res.start, res.start + 8))


@pytest.mark.parametrize("n_accept", range(9))
def test_commit_equals_sequential_run_for_every_acceptance(tiny, committed, n_accept):
    rs = spec.ReplaySSM(tiny, draft_tokens=8)
    res = rs.verify(committed, DRAFT)
    before = committed.copy()
    new = rs.commit(committed, res, n_accept)
    seq, seq_logits = _sequential(tiny, committed, DRAFT[:n_accept])
    for a, b in zip(new.kda, seq.kda):
        assert np.max(np.abs(a.S - b.S)) <= 1e-12
        assert np.max(np.abs(a.conv - b.conv)) <= 1e-12
    assert new.tokens == seq.tokens and new.boundary == committed.boundary + n_accept
    assert new.mla_kv.shape == seq.mla_kv.shape
    assert np.max(np.abs(new.mla_kv - seq.mla_kv), initial=0.0) <= 1e-12
    assert np.max(np.abs(res.logits[:n_accept] - seq_logits), initial=0.0) <= 1e-12
    for a, b in zip(committed.kda, before.kda):  # the checkpoint is not modified
        assert np.array_equal(a.S, b.S) and np.array_equal(a.conv, b.conv)
    # rejected entries are gone from the ring; accepted ones remain
    pos = rs.rings[0].pos
    assert sorted(pos[pos >= 0].tolist()) == list(range(res.start, res.start + n_accept))
    # and the continuation from the committed state is the continuation of the sequential run
    l1, _ = tiny.forward([42, 43], new)
    l2, _ = tiny.forward([42, 43], seq)
    assert np.max(np.abs(l1 - l2)) <= 1e-12


def test_rejected_tail_leaves_no_trace(tiny, committed):
    a = 3
    states = []
    for tail in ([1, 2, 3, 4, 5], [200, 201, 202, 203, 204]):
        rs = spec.ReplaySSM(tiny, draft_tokens=8)
        res = rs.verify(committed, DRAFT[:a] + tail)
        states.append(rs.commit(committed, res, a))
    s1, s2 = states
    for x, y in zip(s1.kda, s2.kda):
        assert np.array_equal(x.S, y.S) and np.array_equal(x.conv, y.conv)
    assert np.array_equal(s1.mla_kv, s2.mla_kv) and s1.tokens == s2.tokens


def test_rings_wrap_over_many_steps(tiny, committed):
    """Verify/commit 2..5 tokens at a time past several ring lengths: still exact."""
    rs = spec.ReplaySSM(tiny, draft_tokens=4)  # L = 8
    st = committed
    toks = list(range(60, 90))
    i, accepts = 0, [2, 4, 1, 3, 4, 0, 4, 3, 2, 4, 3]
    for a in accepts:
        res = rs.verify(st, toks[i : i + 4])
        st = rs.commit(st, res, a)
        i += a
    seq, _ = _sequential(tiny, committed, toks[:i])
    assert i > 3 * rs.ring_len
    for x, y in zip(st.kda, seq.kda):
        assert np.max(np.abs(x.S - y.S)) <= 1e-12 and np.max(np.abs(x.conv - y.conv)) <= 1e-12


def test_accept_length():
    logits = np.zeros((4, M.VOCAB))
    logits[np.arange(4), [5, 6, 9, 1]] = 1.0  # target after each input: 5, 6, 9, 1
    assert spec.accept_length([0, 5, 6, 7], logits) == 3
    assert spec.accept_length([0, 4, 6, 9], logits) == 1  # a miss stops the prefix
    assert spec.accept_length([0, 5, 6, 9], logits) == 4
    with pytest.raises(ValueError, match="logits must have shape"):
        spec.accept_length([0, 5], logits)


def test_ngram_draft_copies_repeats():
    hist = [1, 2, 3, 9, 1, 2, 3, 7, 1, 2]
    assert ngram_draft(hist, 3) == [3, 7, 1]  # latest "1 2" was followed by 3, then 7
    assert ngram_draft([5], 2) == [5, 5]  # no match: the last token again
    with pytest.raises(ValueError, match="n must be"):
        ngram_draft(hist, 65)


# ---------------------------------------------------------------------------------------------
# memory


def test_tiny_memory_matches_sizing_formula(tiny):
    rs = spec.ReplaySSM(tiny, draft_tokens=8)
    mem32 = spec_memory(sizing.tiny_spec(tiny.config), 8, dtype="float32")
    # float64 arrays here = 2 x the all-4-byte (float32) serving formula
    assert rs.ring_nbytes == 2 * mem32.ring_total
    assert rs.per_draft_state_nbytes == 2 * mem32.per_draft_state_bytes
    assert rs.conv_window_nbytes == 2 * mem32.conv_window_bytes
    n_kda, H, K, L = 6, 4, 32, 16
    assert rs.ring_nbytes == n_kda * L * H * (5 * K + 1) * 8
    assert rs.per_draft_state_nbytes == 8 * n_kda * H * K * K * 8
    assert mem32.ratio == pytest.approx(8 * K * K / (L * (5 * K + 1)))


def test_k3_memory_at_tp8_bf16():
    mem = spec_memory("kimi-k3", draft_tokens=8, tp=8, dtype="bfloat16")
    h, K = 12, 128
    ring_per_layer = 16 * h * (4 * K * 2 + K * 4 + 4)  # d, k, rawv, rawk bf16; g, beta fp32
    assert mem.ring_len == 16 and mem.ring_total == 69 * ring_per_layer
    assert mem.per_draft_state_bytes == 8 * sizing.kda_state_bytes("kimi-k3", 8, "bfloat16")
    assert mem.per_draft_state_bytes == 69 * 8 * h * K * K * 2
    assert mem.ratio == pytest.approx(8 * K * K * 2 / (16 * (4 * K * 2 + K * 4 + 4)))
    # the K3 write-up's log line for 120 physical slots: d = 0.379 GB, g = 0.758 GB, beta = 0.006 GB
    assert round(120 * mem.ring_bytes["d"] / sizing.GIB, 3) == 0.379
    assert round(120 * mem.ring_bytes["g"] / sizing.GIB, 3) == 0.758
    assert round(120 * mem.ring_bytes["beta"] / sizing.GIB, 3) == 0.006
