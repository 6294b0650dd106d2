"""Checkpoint density: interval K vs state memory (~1/K) vs replay (~K) vs TTFT, and retention
policies side by side (data for the checkpoint_density app and the density / retention
figures). ``sweep`` (simulated sweeps), ``analytic`` (the model beside them), ``notes``
(what the figures state about replay, as codes and numbers), ``policies`` (policy comparison,
hit timeline, workloads). See docs/simulator.md."""

from kda_core.studies.density.analytic import (
    REPLAY_SLOPE_K,
    DensityAnalytic,
    analytic_model,
    loglog_slope,
)
from kda_core.studies.density.notes import (
    FLAT_SLOPE,
    TRENDS,
    ReplayNotes,
    ReplayTrend,
    replay_notes,
    replay_trends,
)
from kda_core.studies.density.policies import (
    HitTimeline,
    PolicySweep,
    hit_timeline,
    load_workload,
    policies_at_budget,
    policy_sweep,
)
from kda_core.studies.density.sweep import (
    DEFAULT_BUDGETS_GIB,
    DEFAULT_INTERVALS,
    DEFAULT_POLICIES,
    GIB,
    MAX_RUNS,
    DensitySweep,
    Progress,
    budget_label,
    clear_memo,
    density_sweep,
    pareto_mask,
    run_metrics,
)

__all__ = [
    "DEFAULT_BUDGETS_GIB",
    "FLAT_SLOPE",
    "ReplayNotes",
    "ReplayTrend",
    "TRENDS",
    "DEFAULT_INTERVALS",
    "DEFAULT_POLICIES",
    "GIB",
    "MAX_RUNS",
    "REPLAY_SLOPE_K",
    "DensityAnalytic",
    "DensitySweep",
    "HitTimeline",
    "PolicySweep",
    "Progress",
    "analytic_model",
    "budget_label",
    "clear_memo",
    "density_sweep",
    "hit_timeline",
    "load_workload",
    "loglog_slope",
    "pareto_mask",
    "policies_at_budget",
    "policy_sweep",
    "replay_notes",
    "replay_trends",
    "run_metrics",
]
