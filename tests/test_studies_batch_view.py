"""studies.batch_view: the per-step phases and pool series agree with what serving did."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.model import TinyHybrid, encode
from kda_core.studies.batch_view import PHASES, batch_view

MODEL = TinyHybrid()
SYSTEM = "You are a helpful assistant. Answer briefly. "
PROMPTS = [SYSTEM + "What is KDA?", SYSTEM + "Why MLA?", "hi", SYSTEM + "Tell me more."]


def test_phases_and_pool_series():
    news = [5, 3, 4, 6]
    v = batch_view(PROMPTS, news, [0, 0, 1, 3], state_slots=16, model=MODEL, reference=True)
    P = {p: i for i, p in enumerate(PHASES)}
    n_steps = v.phase.shape[1]
    assert v.phase.shape == (4, n_steps) and len(v.running) == n_steps
    assert v.max_abs_logit_diff is not None and v.max_abs_logit_diff < 1e-9
    for i, prow in enumerate(v.phase):
        # one decode step per generated token but the first (it comes from the prompt)
        assert np.count_nonzero(prow == P["decode"]) == news[i] - 1
        prefill_steps = np.flatnonzero(prow == P["prefill"])
        decode_steps = np.flatnonzero(prow == P["decode"])
        assert prefill_steps.size >= 1
        assert decode_steps.size == 0 or prefill_steps.max() < decode_steps.min()
        assert v.admitted_step[i] == prefill_steps.min()
        assert np.all(prow[: [0, 0, 1, 3][i]] == P["not_arrived"])
        assert np.all(prow[v.finished_step[i] + 1 :] == P["finished"])
    assert np.array_equal(v.running, np.count_nonzero(
        (v.phase == P["prefill"]) | (v.phase == P["decode"]), axis=0))  # fmt: skip
    assert np.all(v.slots_running + v.slots_cached + v.slots_free == 16)
    assert v.planner_max_running == sizing.max_running_requests(16, "extra_buffer") == 3
    assert v.running.max() <= 3 and "capped to 3" in v.capping_message
    assert v.restore_at[3] > 0  # the late request restores the shared system prompt
    assert v.texts[0] and all(t for t in v.texts)


def test_rejection_and_retraction_show_up():
    prompts = ["r" * 60, "a", "bb", "ccc", "dddd"]
    v = batch_view(prompts, 24, state_slots=40, kv_tokens=60, model=MODEL)
    P = {p: i for i, p in enumerate(PHASES)}
    assert set(v.rejected) == {0} and np.all(v.phase[0] == P["rejected"])
    assert len(encode(prompts[0])) + 24 - 1 > 60
    assert v.retractions.sum() == np.count_nonzero(v.phase == P["retracted"]) > 0


def test_the_smallest_kv_pool_is_the_engines():
    """A request needs its prompt and every new token but the last: one token under the
    smallest need rejects them all (no step), at it one is admitted (``Engine.serve``'s own
    admission, not this module's)."""
    from kda_core.studies.batch_view import DEFAULT_PROMPTS

    news = [8, 3, 8, 5, 8, 8]
    want = [len(p.encode("utf-8")) + m - 1 for p, m in zip(DEFAULT_PROMPTS, news)]
    v = batch_view(list(DEFAULT_PROMPTS), news, kv_tokens=10_000, model=MODEL)
    assert v.kv_needed.tolist() == want and v.smallest_kv_pool == min(want)
    under = batch_view(list(DEFAULT_PROMPTS), news, kv_tokens=min(want) - 1, model=MODEL)
    assert under.n_steps == 0 and sorted(under.rejected) == list(range(6))
    at = batch_view(list(DEFAULT_PROMPTS), news, kv_tokens=min(want), model=MODEL)
    least = [i for i, w in enumerate(want) if w == min(want)]  # two here: #2 and #6
    assert at.n_steps > 0 and sorted(set(range(6)) - set(at.rejected)) == least == [1, 5]


def test_bad_input():
    with pytest.raises(ValueError, match="prompts must be a list"):
        batch_view("one", model=MODEL)
    with pytest.raises(ValueError, match="one value per prompt"):
        batch_view(["a", "b"], [1], model=MODEL)
    with pytest.raises(ValueError, match=r"state_slots must be in \[5, 4096\]"):
        batch_view(["a"], state_slots=3, model=MODEL)


@pytest.mark.parametrize("strategy", ["no_buffer", "extra_buffer", "extra_buffer_lazy"])
def test_admission_check_reaches_the_planner_cap(strategy):
    from kda_core.studies import exports
    from kda_core.studies.batch_view import admission_check

    v = admission_check(strategy, model=MODEL)
    # 16 slots // (3 | 5 | 4) slots reserved per request under overlap (SGLang's reservation)
    cap = {"no_buffer": 5, "extra_buffer": 3, "extra_buffer_lazy": 4}[strategy]
    assert v.planner_max_running == v.max_running == cap
    assert v.peak_running == cap == v.running[v.peak_step] and v.capped  # 8 requests wait
    assert np.all(v.running[: v.peak_step] < cap)  # the first step at the peak
    at = v.slots_at(v.peak_step)
    assert sum(at.values()) == 16 and at["running"] >= cap  # each running request holds >= 1
    rows = exports.columns("batch_phases", v)
    assert len(rows["phase"]) == v.phase.size and set(rows["phase"]) <= set(PHASES)
    pool = exports.columns("batch_pool", v)
    assert np.array_equal(pool["running_requests"], v.running)
    assert np.all(pool["slots_running"] + pool["slots_cached"] + pool["slots_free"] == 16)
