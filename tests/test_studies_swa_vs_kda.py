"""kda_core.studies.swa_vs_kda: SWA window checkpoints vs KDA state checkpoints, and the maths
behind them on real arrays (``recent_tokens``, here: no app draws it; docs/swa_vs_kda.md quotes
its figures)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from kda_core import kda
from kda_core.studies import swa_vs_kda as sv
from kda_core.studies._kda_inputs import Inputs, model_inputs, random_inputs
from kda_core.workloads import parse_mooncake_lines


def test_checkpoint_costs_kimi_k3_by_hand():
    c = sv.checkpoint_costs("kimi-k3", (64, 128, 4096))
    # an SWA layer shaped like a K3 KDA layer: 96 heads x (K 128 + V 128) x bf16, 69 layers
    assert c.swa_bytes_per_token == 69 * 96 * 256 * 2 == 3_391_488
    assert c.kda_state_bytes == 69 * 96 * 128 * 128 * 4  # float32 state
    assert c.kda_conv_bytes == 69 * 3 * 96 * 384 * 2
    assert c.swa_window_bytes.tolist() == [64 * 3_391_488, 128 * 3_391_488, 4096 * 3_391_488]
    assert c.crossover_window == pytest.approx(132.5)  # 128 (state) + 4.5 (conv) tokens
    # grouped KV (8 KV heads for 96 query heads) moves the crossover 12x further
    assert sv.checkpoint_costs(kv_heads=8).crossover_window == pytest.approx(1590.0)
    # per GPU at TP8 every size is an eighth, the crossover stays
    tp8 = sv.checkpoint_costs(tp=8)
    assert tp8.kda_checkpoint_bytes * 8 == c.kda_checkpoint_bytes
    assert tp8.crossover_window == pytest.approx(132.5)


def _trace(*requests: tuple[int, list[int]]):
    lines = [
        json.dumps({"timestamp": i, "input_length": n, "output_length": 1, "hash_ids": ids})
        for i, (n, ids) in enumerate(requests)
    ]
    return parse_mooncake_lines(lines, name="hand")


def test_window_held_by_a_longer_request_resumes_swa_at_the_match():
    # A: 10 blocks of 512 tokens; B shares A's first 7 blocks, then diverges
    a = list(range(1, 11))
    b = a[:7] + [100, 101]
    trace = _trace((10 * 512, a), (9 * 512, b))
    # checkpoints every 4096 tokens (8 blocks), window 4096: A keeps the state at 4096 and
    # the K/V of tokens [0, 4096); B matches 3584 tokens
    r = sv.resume_on_workload(trace, (4096,), window=4096)
    assert r.token_match == 7 * 512
    assert r.kda_resume.tolist() == [0]  # no state at or below 3584
    assert r.swa_resume.tolist() == [3584]  # the K/V of the last 4096 tokens are all held
    assert r.kda_replay.tolist() == [3584] and r.swa_replay.tolist() == [0]
    # held at the end: a state at 4096 on each path; A's 8 window blocks + B's 8th block
    assert (r.kda_states.tolist(), r.swa_blocks.tolist()) == ([2], [9])
    # a window of 2048 held before 4096 does not reach back from 3584: SWA resumes at 0 too,
    # but rebuilding its window from the last 2048 matched tokens bounds its replay
    r = sv.resume_on_workload(trace, (4096,), window=2048)
    assert r.swa_resume.tolist() == [0] and r.swa_rebuild_replay.tolist() == [2048]
    # checkpoints every 1024 (2 blocks), window 2048: KDA resumes at 3072, SWA at 3584
    r = sv.resume_on_workload(trace, (1024,), window=2048)
    assert (r.kda_resume.tolist(), r.swa_resume.tolist()) == ([3072], [3584])


def test_chat_workload_invariants():
    r = sv.resume_on_workload("chat", (256, 1024, 4096), window=1024)
    assert r.requests > 100 and r.token_match > 0
    # every KDA checkpoint comes with its window, so SWA resumes at least as far
    assert np.all(r.swa_resume >= r.kda_resume)
    assert np.all(r.swa_replay + r.swa_resume == r.token_match)
    assert np.all(r.kda_replay + r.kda_resume == r.token_match)
    assert np.all(r.swa_rebuild_replay <= r.swa_replay)
    # sparser checkpoints: fewer states held, more replay
    assert np.all(np.diff(r.kda_states) < 0) and np.all(np.diff(r.kda_replay) > 0)
    # checkpoints further apart than the window: both resume at the same checkpoints
    assert r.swa_resume[-1] == r.kda_resume[-1]
    costs = sv.checkpoint_costs(windows=(1024,))
    assert r.kda_bytes.tolist() == (r.kda_states * costs.kda_checkpoint_bytes).tolist()
    assert r.swa_bytes.tolist() == (r.swa_blocks * 64 * costs.swa_bytes_per_token).tolist()


@dataclass(frozen=True)
class RecentTokens:
    """The maths on real arrays, at the last position T, for each W in ``windows``.

    swa_from_window_error: max |o_T| difference between SWA over the whole sequence (full
    attention, keys outside the window masked) and an SWA layer run on the last W tokens
    alone (rounding only: the window is all it reads);
    kda_from_zero_error: ||S'_T - S_T|| / ||S_T|| for S'_T = KDA from zero state W tokens
    back (never 0 before W = T); carried_term: ||M_T ... M_{T-W+1} S_{T-W}|| / ||S_T||, the
    part S'_T leaves out; decomposition_error: max |S_T - (S'_T + M S_{T-W})| (the affine
    formula holds to rounding); kda_from_state_error: ||S''_T - S_T|| / ||S_T|| for S''_T =
    the saved S_{T-W} replayed over the same W tokens (exact); affine_error: max |S_T -
    segment_map(all tokens).apply(S_0)| from a random S_0.
    """

    source: str
    T: int
    windows: np.ndarray
    swa_from_window_error: np.ndarray
    kda_from_zero_error: np.ndarray
    carried_term: np.ndarray
    decomposition_error: np.ndarray
    kda_from_state_error: np.ndarray
    affine_error: float


def swa_window_attention(q, k, v, window: int, *, scale: float | None = None) -> np.ndarray:
    """Sliding-window attention: o_t = softmax(scale q_t . k_j) v_j over the last ``window``
    tokens j in (t - window, t]. q, k [T, H, K]; v [T, H, V]; returns o [T, H, V]."""
    scale = q.shape[2] ** -0.5 if scale is None else float(scale)
    o = np.empty(v.shape)
    for t in range(q.shape[0]):
        lo = max(t - window + 1, 0)
        s = np.einsum("hk,jhk->hj", q[t], k[lo : t + 1]) * scale
        p = np.exp(s - s.max(axis=1, keepdims=True))
        o[t] = np.einsum("hj,jhv->hv", p / p.sum(axis=1, keepdims=True), v[lo : t + 1])
    return o


def _masked_last(x: Inputs, window: int) -> np.ndarray:
    """The last position's SWA output as full causal attention over the whole sequence with
    every key outside the window masked to -inf (the textbook definition) [H, V]."""
    T, _, K = x.q.shape
    s = np.einsum("hk,jhk->hj", x.q[-1], x.k) * K**-0.5
    s[:, : T - window] = -np.inf
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return np.einsum("hj,jhv->hv", p / p.sum(axis=1, keepdims=True), x.v)


def _norm(x: np.ndarray) -> float:
    return float(np.linalg.norm(x))


def _one_window(x: Inputs, W: int, S_T: np.ndarray, swa_full: np.ndarray) -> tuple:
    """The five errors of ``RecentTokens`` for one window W < T."""
    T = x.q.shape[0]
    cut = T - W
    tail = (x.q[cut:], x.k[cut:], x.v[cut:], x.g[cut:], x.beta[cut:])
    _, S_cut = kda.recurrent(x.q[:cut], x.k[:cut], x.v[:cut], x.g[:cut], x.beta[:cut])
    _, S_zero = kda.recurrent(*tail)
    _, S_saved = kda.recurrent(*tail, initial_state=S_cut)
    carried = np.matmul(kda.segment_map(*tail[1:]).M, S_cut)
    swa_tail = swa_window_attention(x.q[cut:], x.k[cut:], x.v[cut:], W)[-1]
    ref = _norm(S_T)
    return (
        float(np.abs(swa_tail - swa_full).max()),
        _norm(S_zero - S_T) / ref,
        _norm(carried) / ref,
        float(np.abs(S_T - (S_zero + carried)).max()),
        _norm(S_saved - S_T) / ref,
    )


def recent_tokens(
    T: int = 1024,
    windows: Sequence[int] = (16, 64, 256, 512),
    *,
    text: str | None = None,
    seed: int = 0,
) -> RecentTokens:
    """SWA vs KDA resumed from the last W tokens only, on real arrays: seeded KDA inputs
    (``studies._kda_inputs.random_inputs``: H = 2, K = V = 32, K3's gate) or, with ``text``,
    TinyHybrid's first KDA layer on its bytes; the same q, k, v feed the SWA layer."""
    x = random_inputs(T, seed=seed) if text is None else model_inputs(text, T)
    T = x.q.shape[0]
    ws = sorted(windows)
    _, S_T = kda.recurrent(x.q, x.k, x.v, x.g, x.beta)
    rows = [_one_window(x, W, S_T, _masked_last(x, W)) for W in ws]
    cols = np.array(rows).T
    S0 = np.random.default_rng(seed).standard_normal(S_T.shape)
    _, S_from = kda.recurrent(x.q, x.k, x.v, x.g, x.beta, initial_state=S0)
    mapped = kda.segment_map(x.k, x.v, x.g, x.beta).apply(S0)
    return RecentTokens(
        source=x.source,
        T=T,
        windows=np.array(ws, dtype=np.int64),
        swa_from_window_error=cols[0],
        kda_from_zero_error=cols[1],
        carried_term=cols[2],
        decomposition_error=cols[3],
        kda_from_state_error=cols[4],
        affine_error=float(np.abs(S_from - mapped).max()),
    )


@pytest.fixture(scope="module")
def recent() -> RecentTokens:
    return recent_tokens(T=512, windows=(8, 32, 128, 384))


def test_swa_from_the_last_w_tokens_is_exact(recent):
    assert recent.windows.tolist() == [8, 32, 128, 384]
    assert recent.swa_from_window_error.max() <= 1e-12


def test_kda_from_zero_state_w_tokens_back_is_wrong_by_the_carried_term(recent):
    err, carried = recent.kda_from_zero_error, recent.carried_term
    assert np.all(err > 1e-6)  # never exact before W = T
    assert np.all(np.diff(err) < 0)  # decays with W (the gates forget), but stays
    # S_T = S'_T + M_T ... M_{T-W+1} S_{T-W}: the error is exactly the left-out term
    np.testing.assert_allclose(err, carried, rtol=1e-9)
    assert recent.decomposition_error.max() <= 1e-12
    assert recent.kda_from_state_error.max() <= 1e-12  # a saved state + replay is exact
    assert recent.affine_error <= 1e-10


def test_recent_tokens_on_the_model_and_by_hand():
    text = "Kimi Delta Attention 前缀命中不等于状态命中。" * 8
    r = recent_tokens(T=256, windows=(16, 64), text=text)
    assert r.source == "TinyHybrid layer 0"
    assert r.swa_from_window_error.max() <= 1e-12 and np.all(r.kda_from_zero_error > 1e-3)
    # one cell by hand: KDA on the last 16 tokens from zero vs on all 256 tokens
    x = random_inputs(100, seed=3)
    _, full = kda.recurrent(x.q, x.k, x.v, x.g, x.beta)
    _, tail = kda.recurrent(x.q[84:], x.k[84:], x.v[84:], x.g[84:], x.beta[84:])
    r = recent_tokens(T=100, windows=(16,), seed=3)
    want = np.linalg.norm(tail - full) / np.linalg.norm(full)
    assert r.kda_from_zero_error[0] == pytest.approx(want, rel=1e-12)


def test_swa_window_attention_by_hand():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 5, 1, 2))
    o = swa_window_attention(q, k, v, 2, scale=1.0)
    s = np.array([q[4, 0] @ k[3, 0], q[4, 0] @ k[4, 0]])
    p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    np.testing.assert_allclose(o[4, 0], p @ v[3:5, 0], rtol=1e-12)
    np.testing.assert_allclose(o[0, 0], v[0, 0], rtol=1e-12)  # one key: itself


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="windows"):
        sv.checkpoint_costs(windows=())
    with pytest.raises(ValueError, match="kv_dtype"):
        sv.checkpoint_costs(kv_dtype="float8")
    with pytest.raises(ValueError, match="window must be multiples of the trace's block"):
        sv.resume_on_workload("chat", (256,), window=100)
    with pytest.raises(ValueError, match="intervals"):
        sv.resume_on_workload("chat", (0,))
