"""Prefix hit vs state hit, for real: requests through the caching engine (the prefix_replay app).

Re-exports only. ``scenarios`` (built-in scenarios, caps, policies, checks), ``views`` (what a
served request shows: timeline, tree snapshots, pools, replay steps), ``session`` (one engine
serving requests incrementally; ``run_scenario`` / ``serve``), ``drift`` (exact vs INT8 vs
inconsistent restore), ``tables`` (the CSV rows behind each figure). Long prose:
docs/prefix_replay.md.
"""

from kda_core.studies.prefix_replay.drift import restore_drift
from kda_core.studies.prefix_replay.scenarios import (
    ARMS,
    MAX_NEW,
    MAX_PROMPT_TOKENS,
    MAX_PROMPTS,
    POLICIES,
    SCENARIO_NAMES,
    SCENARIOS,
    Scenario,
    kda_shape,
    make_policy,
)
from kda_core.studies.prefix_replay.session import ServingSession, run_scenario, serve
from kda_core.studies.prefix_replay.tables import (
    POOL_COUNTERS,
    drift_table,
    pools_table,
    replay_table,
    timeline_table,
    tree_table,
)
from kda_core.studies.prefix_replay.views import (
    DriftStudy,
    PoolsPanel,
    ReplaySteps,
    RequestView,
    ScenarioResult,
    Timeline,
    TreeSnapshot,
    heatmap,
    readable,
    tree_snapshot,
)

__all__ = [
    "ARMS",
    "MAX_NEW",
    "MAX_PROMPTS",
    "MAX_PROMPT_TOKENS",
    "POLICIES",
    "POOL_COUNTERS",
    "SCENARIOS",
    "SCENARIO_NAMES",
    "DriftStudy",
    "PoolsPanel",
    "ReplaySteps",
    "RequestView",
    "Scenario",
    "ScenarioResult",
    "ServingSession",
    "Timeline",
    "TreeSnapshot",
    "drift_table",
    "heatmap",
    "kda_shape",
    "make_policy",
    "pools_table",
    "readable",
    "replay_table",
    "restore_drift",
    "run_scenario",
    "serve",
    "timeline_table",
    "tree_snapshot",
    "tree_table",
]
