"""Checkpoint density: interval K vs state memory (~1/K) vs replay (~K) vs TTFT, and retention
policies side by side (data for the checkpoint_density app and the density / retention
figures). ``_sweep`` (simulated sweeps), ``_analytic`` (the model beside them), ``_notes``
(what the figures state about replay, as codes and numbers), ``_policies`` (policy comparison,
hit timeline, workloads). See docs/simulator.md."""

from kda_core.studies.density._analytic import DensityAnalytic
from kda_core.studies.density._notes import (
    TRENDS,
    ReplayNotes,
    ReplayTrend,
    replay_notes,
)
from kda_core.studies.density._policies import (
    HitTimeline,
    PolicySweep,
    hit_timeline,
    load_workload,
    policies_at_budget,
    policy_sweep,
)
from kda_core.studies.density._sweep import (
    DEFAULT_INTERVALS,
    DEFAULT_POLICIES,
    DensitySweep,
    clear_memo,
    density_sweep,
)

__all__ = [
    "DEFAULT_INTERVALS",
    "DEFAULT_POLICIES",
    "DensityAnalytic",
    "DensitySweep",
    "HitTimeline",
    "PolicySweep",
    "ReplayNotes",
    "ReplayTrend",
    "TRENDS",
    "clear_memo",
    "density_sweep",
    "hit_timeline",
    "load_workload",
    "policies_at_budget",
    "policy_sweep",
    "replay_notes",
]
