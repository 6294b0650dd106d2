"""The trace-driven cache simulator: ``simulate`` (simulator, sequential / in-flight
schedules, placement under budgets, results), ``costmodel`` (FLOPs and time) and ``tiers``
(device / host / remote state tiers). See docs/simulator.md."""

from kda_core.sim.result import SimResult, SimSeries
from kda_core.sim.simulator import (
    DEFAULT_TP,
    MAX_BUDGET,
    SCHEDULES,
    checkpoint_bytes,
    marconi_efficiency_fn,
    resolve_policy,
    simulate,
)

__all__ = [
    "DEFAULT_TP",
    "MAX_BUDGET",
    "SCHEDULES",
    "SimResult",
    "SimSeries",
    "checkpoint_bytes",
    "marconi_efficiency_fn",
    "resolve_policy",
    "simulate",
]
