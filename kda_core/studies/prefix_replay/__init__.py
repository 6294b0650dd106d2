"""Prefix hit vs state hit, for real: requests through the caching engine (the prefix_replay app).

Re-exports only. ``_scenarios`` (built-in scenarios, caps, policies, checks), ``_views`` (what a
served request shows: timeline, tree snapshots, pools, replay steps), ``_session`` (one engine
serving requests incrementally; ``run_scenario`` / ``serve``), ``_drift`` (exact vs INT8 vs
inconsistent restore); the CSV rows behind each figure are ``studies.exports``. Long prose:
docs/prefix_replay.md.
"""

from kda_core.studies._parking import kda_shape
from kda_core.studies.prefix_replay._drift import restore_drift
from kda_core.studies.prefix_replay._scenarios import (
    ARMS,
    MAX_PROMPT_TOKENS,
    MAX_PROMPTS,
    POLICIES,
    SCENARIOS,
)
from kda_core.studies.prefix_replay._session import ServingSession, run_scenario, serve
from kda_core.studies.prefix_replay._views import (
    POOL_COUNTERS,
    DriftStudy,
    ReplaySteps,
    RequestView,
    ScenarioResult,
    Timeline,
    TreeSnapshot,
    heatmap,
    readable,
)

__all__ = [
    "ARMS",
    "MAX_PROMPTS",
    "MAX_PROMPT_TOKENS",
    "POLICIES",
    "POOL_COUNTERS",
    "SCENARIOS",
    "DriftStudy",
    "ReplaySteps",
    "RequestView",
    "ScenarioResult",
    "ServingSession",
    "Timeline",
    "TreeSnapshot",
    "heatmap",
    "kda_shape",
    "readable",
    "restore_drift",
    "run_scenario",
    "serve",
]
