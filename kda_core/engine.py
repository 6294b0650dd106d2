"""Public API entry: ``kda_core.engine.Engine`` / ``Request`` and the reports.

The engine lives in ``kda_core.serve.engine`` (serving in ``kda_core.serve``); internal code
imports it from there. See docs/serving.md.
"""

from kda_core.serve.engine import Engine, Request
from kda_core.serve.report import EngineStats, GenerateReport, ServeReport, StepRecord, StepRow

__all__ = [
    "Engine",
    "EngineStats",
    "GenerateReport",
    "Request",
    "ServeReport",
    "StepRow",
    "StepRecord",
]
