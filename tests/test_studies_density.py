from __future__ import annotations

import itertools

import numpy as np
import pytest

from kda_core import sim
from kda_core import workloads as W
from kda_core.studies import density as D
from kda_core.studies.density import _analytic, _notes, _sweep
from kda_core.studies.density._analytic import loglog_slope
from kda_core.workloads import _synthetic as S

GIB = 1 << 30


@pytest.fixture(scope="module")
def head() -> W.Trace:
    return W.bundled_trace("conversation").head(2500)


@pytest.fixture(scope="module")
def sweep(head: W.Trace) -> tuple[D.DensitySweep, list[tuple[float, str]]]:
    calls: list[tuple[float, str]] = []
    s = D.density_sweep(
        head, (512, 2048, 8192), (1.0, 8.0, None), progress=lambda f, m: calls.append((f, m))
    )
    return s, calls


def test_sweep_shapes_and_progress(sweep: tuple[D.DensitySweep, list]) -> None:
    s, calls = sweep
    assert s.state_hit_rate.shape == (3, 3)
    assert s.intervals.tolist() == [512, 2048, 8192]
    assert s.budget_labels == ("1 GiB", "8 GiB", "unlimited")
    assert s.budgets_bytes[-1] == np.inf and s.budgets_bytes[0] == GIB
    assert np.all(s.state_hit_rate <= s.token_hit_rate + 1e-15)
    fr = [c[0] for c in calls]
    assert fr[-1] == 1.0 and all(a <= b for a, b in zip(fr, fr[1:]))
    assert any("K=2048" in c[1] for c in calls)
    assert s.state_bytes_per_checkpoint == 29_039_616


def test_sweep_values_match_direct_simulation(head: W.Trace, sweep: tuple) -> None:
    s, _ = sweep
    r = sim.simulate(head, ("interval", {"every": 2048}), 8 * GIB)
    assert s.state_hit_rate[1, 1] == r.state_hit_rate
    assert s.checkpoints_stored[1, 1] == r.checkpoints_stored
    assert s.ttft_p95_s[1, 1] == r.ttft_p95_s
    assert s.peak_state_bytes[1, 1] <= 8 * GIB


def test_analytic_state_hit_equals_unlimited_simulation(sweep: tuple) -> None:
    # with no budget, a checkpoint every K tokens restores exactly floor(ideal / K) * K
    s, _ = sweep
    assert np.allclose(s.state_hit_rate[:, -1], s.analytic.state_hit_rate, rtol=0, atol=1e-12)
    # memory ~ 1/K: fewer checkpoints as K grows, analytic states exactly 1/K
    assert np.all(np.diff(s.checkpoints_stored[:, -1]) < 0)
    a = s.analytic
    assert np.allclose(a.states * a.intervals, a.states[0] * a.intervals[0])
    assert np.allclose(a.uniform_replay, (a.intervals - 512) / 2)
    assert np.array_equal(a.states_exact, s.checkpoints_stored[:, -1])


def test_optimum_and_pareto(sweep: tuple) -> None:
    s, _ = sweep
    for j in range(3):
        k = s.optimum[j]
        assert s.ttft_mean_s[k, j] == s.ttft_mean_s[:, j].min()
    mask = _sweep.pareto_mask(s.peak_state_bytes, s.state_hit_rate).reshape(s.pareto.shape)
    assert np.array_equal(mask, s.pareto)
    assert s.pareto.any()


def test_pareto_mask_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    c = rng.integers(0, 6, 40).astype(float)
    v = rng.integers(0, 6, 40).astype(float)
    got = _sweep.pareto_mask(c, v)
    for i in range(40):
        dominated = any(
            c[j] <= c[i] and v[j] >= v[i] and (c[j] < c[i] or v[j] > v[i]) for j in range(40)
        )
        assert got[i] == (not dominated)
    assert _sweep.pareto_mask(np.array([1.0, 2.0]), np.array([0.5, 0.4])).tolist() == [True, False]


def test_uniform_probe_replay_matches_the_analytic_half_interval() -> None:
    t = S.uniform_prefix(300, doc_tokens=32_768, block_size=16, seed=1)
    s = D.density_sweep(t, (512, 1024, 4096), (None,))
    half = s.intervals / 2
    assert np.all(np.abs(s.mean_replay_per_hit[:, 0] - half) <= 0.1 * half)
    assert np.all(np.abs(s.mean_replay_per_hit[:, 0] - s.analytic.uniform_replay) <= 0.1 * half)
    assert np.allclose(s.analytic.uniform_replay, (s.intervals - 16) / 2)
    assert np.all(np.abs(s.analytic.mean_replay_per_hit - half) <= 0.1 * half)


def test_policy_sweep_and_one_budget(head: W.Trace) -> None:
    pols = (("every block", "interval", {"every": 512}), ("Marconi", "marconi", {}))
    ps = D.policy_sweep(head, pols, (2.0, None))
    assert ps.state_hit_rate.shape == (2, 2)
    assert ps.labels == ("every block", "Marconi")
    assert np.all(ps.state_hit_rate <= ps.token_hit_rate + 1e-15)
    assert ps.checkpoints_stored[1, 1] < ps.checkpoints_stored[0, 1]
    r = sim.simulate(head, "marconi", 2 * GIB)
    assert ps.state_hit_rate[1, 0] == r.state_hit_rate
    one = D.policies_at_budget(head, 2.0, pols)
    assert np.array_equal(one.state_hit_rate[:, 0], ps.state_hit_rate[:, 0])
    assert 0 < ps.ideal_token_hit_rate < 1


def test_hit_timeline(head: W.Trace) -> None:
    h = D.hit_timeline(head, "interval", {"every": 4096})
    r = sim.simulate(head, ("interval", {"every": 4096}), None)
    assert h.cum_token_hit_rate[-1] == pytest.approx(r.token_hit_rate, rel=1e-12)
    assert h.cum_state_hit_rate[-1] == pytest.approx(r.state_hit_rate, rel=1e-12)
    assert np.all(h.cum_state_hit_rate <= h.cum_token_hit_rate + 1e-15)


def test_synthetic_workloads_in_the_sweep() -> None:
    for name in ("chat", "agentic", "documents"):
        t = W.workload(name, seed=2)
        s = D.density_sweep(t, (256, 1024), (0.5, None))
        assert np.all(s.state_hit_rate <= s.token_hit_rate + 1e-15)
        if name == "documents":
            assert np.all(s.state_hit_rate == 0)
        else:
            assert s.state_hit_rate[0, -1] > 0


def test_bad_input(head: W.Trace) -> None:
    with pytest.raises(ValueError, match="intervals"):
        D.density_sweep(head, (500,), (None,))
    with pytest.raises(ValueError, match="intervals"):
        D.density_sweep(head, (), (None,))
    with pytest.raises(ValueError, match="budgets"):
        D.density_sweep(head, (512,), (-1.0,))
    with pytest.raises(ValueError, match="runs"):
        D.density_sweep(head, tuple(range(512, 512 * 61, 512)), tuple(itertools.repeat(1.0, 4)))
    with pytest.raises(ValueError, match="policies"):
        D.policy_sweep(head, (("x", "interval"),), (None,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="progress"):
        D.density_sweep(head, (512,), (None,), progress=3)  # type: ignore[arg-type]


def test_loglog_slope_against_polyfit() -> None:
    x = np.array([1024.0, 2048.0, 4096.0, 8192.0])
    y = np.array([400.0, 420.0, 500.0, 900.0])
    want = np.polyfit(np.log(x), np.log(y), 1)[0]
    assert loglog_slope(x, y) == pytest.approx(want, rel=1e-12)
    assert loglog_slope(x, 3.0 * x) == pytest.approx(1.0, abs=1e-12)
    # non-positive points are left out; fewer than two distinct x -> nan
    assert loglog_slope(np.array([512.0, 1024.0, 2048.0]), np.array([0.0, 5.0, 10.0])) == (
        pytest.approx(1.0, abs=1e-12)
    )
    assert np.isnan(loglog_slope(np.array([1.0, 2.0]), np.array([0.0, 1.0])))
    with pytest.raises(ValueError, match="same length"):
        loglog_slope(np.ones(2), np.ones(3))


def test_replay_slope_is_fitted_over_k_above_a_block(sweep: tuple) -> None:
    s, _ = sweep
    big = s.intervals > s.block_size
    for j in range(s.replay_slope.size):
        want = loglog_slope(s.intervals[big], s.mean_replay_per_hit[big, j])
        assert s.replay_slope[j] == want
    # no budget's replay grows like K on the chat trace
    assert not np.all(s.replay_slope >= _analytic.REPLAY_SLOPE_K)
    a = s.analytic
    assert a.replay_curve is a.mean_replay_per_hit
    assert a.replay_slope > s.replay_slope.max()


def test_notes_say_what_each_curve_does(sweep: tuple) -> None:
    """One trend per budget, from its own slope and its end values from the data: on the chat
    trace the budgeted curves fall with K (evictions at small K send hits further back) while
    the unlimited one grows slower than K. Codes and numbers only: words/phrases.py words them
    (tests/test_words.py)."""
    s, _ = sweep
    notes = D.replay_notes(s)
    trends = notes.trends
    assert trends == _notes.replay_trends(s)
    big = s.intervals > s.block_size
    assert [t.budget for t in trends] == list(s.budget_labels)
    for j, t in enumerate(trends):
        y = s.mean_replay_per_hit[big, j]
        assert (t.replay0, t.replay1) == (y[y > 0][0], y[y > 0][-1])
        assert (t.k0, t.k1) == (s.intervals[big][y > 0][0], s.intervals[big][y > 0][-1])
        assert t.slope == s.replay_slope[j]
        if t.slope <= -_notes.FLAT_SLOPE:
            want = "falls"
        elif t.slope < _notes.FLAT_SLOPE:
            want = "flat"
        else:
            want = "slower" if t.slope < _analytic.REPLAY_SLOPE_K else "like_k"
        assert t.trend == want
    by = {t.budget: t for t in trends}
    assert by["8 GiB"].trend == "falls" and by["8 GiB"].replay0 > 2 * by["8 GiB"].replay1
    assert by["unlimited"].trend in ("slower", "flat")  # it does not follow K
    assert notes.unlimited_below_k
    # the first budget whose replay falls while its evictions drop explains the fall
    falls = [t for t in trends if t.trend == "falls" and t.evictions0 > t.evictions1]
    assert falls and notes.falling == falls[0]
    j = s.budget_labels.index(notes.falling.budget)
    ev, pos = s.evictions[big, j], np.flatnonzero(s.mean_replay_per_hit[big, j] > 0)
    assert (notes.falling.evictions0, notes.falling.evictions1) == (ev[pos[0]], ev[pos[-1]])
    an = s.analytic.replay_curve[big]
    assert notes.analytic == (an.min(), an.max())


def test_replay_follows_k_on_uniform_match_points() -> None:
    t = S.uniform_prefix(300, doc_tokens=32_768, block_size=16, seed=1)
    s = D.density_sweep(t, (512, 1024, 4096), (None,))
    assert s.replay_slope[0] == pytest.approx(1.0, abs=0.1)
    assert s.replay_slope[0] >= _analytic.REPLAY_SLOPE_K
    notes = D.replay_notes(s)
    assert [x.trend for x in notes.trends] == ["like_k"]
    assert not notes.unlimited_below_k and notes.falling is None


def test_load_workload_head_equals_sliced_trace() -> None:
    got = D.load_workload("head", "conversation", 50)
    want = W.bundled_trace("conversation").head(50)
    assert len(got) == 50 and got.name == "conversation[:50]"
    assert np.array_equal(got.input_len, want.input_len)
    assert np.array_equal(got.blocks, want.blocks)
    assert np.array_equal(got.offsets, want.offsets)
    assert D.load_workload("head", "conversation", 50) is got  # memoised
    with pytest.raises(ValueError, match="kind must be one of"):
        D.load_workload("nope", "conversation")
    with pytest.raises(ValueError, match="n_head must be"):
        D.load_workload("head", "conversation", 0)
    with pytest.raises(ValueError, match="name must be one of"):
        D.load_workload("head", "x" * 500)


def test_replay_notes_with_one_interval_have_no_slope():
    """One interval gives no slope: the trend says so ("one_k") instead of a nan slope."""
    tr = S.uniform_prefix(300, doc_tokens=32_768, block_size=16, seed=1)
    s = D.density_sweep(tr, (1024,), (None,))
    assert not np.isfinite(s.replay_slope).any()
    (t,) = D.replay_notes(s).trends
    assert t.trend == "one_k" and t.k0 == t.k1 == 1024
