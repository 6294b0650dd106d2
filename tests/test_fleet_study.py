"""``kda_core.studies.fleet``: the routers side by side, load over time against a brute-force
count, the KV-only router's over-promised requests."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.fleet import ROUTERS, simulate_fleet
from kda_core.studies.fleet import SUMMARY_KEYS, fleet_study
from kda_core.studies.fleet import _load_over_time as load_over_time
from kda_core.workloads import bundled_trace


def test_load_over_time_equals_a_brute_force_count():
    r = simulate_fleet(bundled_trace("conversation").head(300), replicas=3, router="round_robin")
    t, load = load_over_time(r, 50)
    for i, ti in enumerate(t):
        for k in range(3):
            on = (r.replica == k) & (r.arrival_s <= ti) & (r.finish_s > ti)
            assert load[i, k] == on.sum()
    assert load.max() > 1  # requests overlap on this trace


def test_study_runs_every_router_and_orders_the_over_promises():
    trace = bundled_trace("conversation").head(600)
    s = fleet_study(trace, replicas=3, engine="sglang", state_budget_bytes=2e9, bins=20)
    assert s.routers == ROUTERS and s.rates.shape == (len(ROUTERS), len(SUMMARY_KEYS))
    kv = s.kv_only
    gaps = (kv.expected - kv.cached)[s.over]
    assert (gaps > 0).all() and (np.diff(gaps) <= 0).all()
    assert len(s.over) == kv.summary()["over_promised_requests"] > 0
    assert s.rate("state_aware", "over_promised_tokens") == 0
    assert s.load.shape == (20, 3) and s.chosen.router == "state_aware"


def test_study_refuses_bad_input():
    with pytest.raises(ValueError, match="router"):
        fleet_study(router="nope")
    with pytest.raises(ValueError, match="bins"):
        fleet_study(bins=0)
