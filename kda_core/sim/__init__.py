"""The trace-driven cache simulator: ``simulate`` (simulator, sequential / in-flight
schedules, placement under budgets (``place``, ``release``, ``kv_cleanup`` on a ``RunCtx``,
as the fleet drives them), results), ``costmodel`` (FLOPs and time) and ``tiers``
(device / host / remote state tiers). See docs/simulator.md."""

from kda_core.sim._placement import RunCtx, kv_cleanup, place, release
from kda_core.sim._result import SimResult
from kda_core.sim._sequential import request_keys
from kda_core.sim.simulator import (
    DEFAULT_TP,
    checkpoint_bytes,
    resolve_policy,
    simulate,
)

__all__ = [
    "DEFAULT_TP",
    "RunCtx",
    "SimResult",
    "checkpoint_bytes",
    "kv_cleanup",
    "place",
    "release",
    "request_keys",
    "resolve_policy",
    "simulate",
]
