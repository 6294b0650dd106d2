"""The unified two-ended byte pool (MLA KV pages from the top, KDA state slots from the bottom)
and the static partition it is compared with.

``make_pool(kind, ...)`` builds one (``TwoEndedPool``: "eager" / "lazy" unified, "static"
split); ``replay`` replays request lengths (``Workload``: ``shifting_mix``, ``from_trace``,
``from_lengths``) through a pool (the unified_memory study packages it). The machinery is the
package's own (``_two_ended``, ``_pools``, ``_side``, ``_replay``, ``_workload``). See
docs/memory.md.
"""

from kda_core.memory._pools import make_pool
from kda_core.memory._replay import ReplayConfig, ReplayResult, replay, tuned_ratio
from kda_core.memory._workload import Workload, from_lengths, from_trace, shifting_mix

__all__ = [
    "ReplayConfig",
    "ReplayResult",
    "Workload",
    "from_lengths",
    "from_trace",
    "make_pool",
    "replay",
    "shifting_mix",
    "tuned_ratio",
]
