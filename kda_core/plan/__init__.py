"""Plan from a trace: sweep the engines' flags on the user's workload, locally or on Dask.

``sweep(model, trace, engine=..., tp=..., rest_bytes=..., grid={flag: [values]}, ...)`` sizes
every grid point as SGLang 0.5.23 or vLLM 0.33 sizes it, replays the trace through the fast
simulator pass under the point's pools, queues it at the point's concurrency cap, and returns a
``Sweep``: a row per point, the Pareto front, the recommended point with its launch command and
the lines the engine prints at start-up. ``FLAGS`` lists the flags each engine can sweep.
docs/plan.md.
"""

from kda_core.plan._flags import FLAGS
from kda_core.plan._sweep import Sweep, sweep

__all__ = ["FLAGS", "Sweep", "sweep"]
