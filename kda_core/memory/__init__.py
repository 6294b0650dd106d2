"""The unified two-ended byte pool (MLA KV pages from the top, KDA state slots from the bottom)
and the static partition it is compared with.

Modules: ``side`` (one side's virtual-id tables), ``two_ended`` (the shared buffer machinery),
``pools`` (UnifiedPool, StaticPool, make_pool), ``workload`` and ``replay`` (a scheduler replay
of request lengths through a pool; the unified_memory study packages it). This file only
re-exports; see docs/memory.md.
"""

from kda_core.memory.pools import StaticPool, UnifiedPool, make_pool
from kda_core.memory.two_ended import (
    MAX_BUFFER_BYTES,
    MODES,
    SIDES,
    TwoEndedPool,
    TwoEndedPoolStats,
)

__all__ = [
    "MAX_BUFFER_BYTES",
    "MODES",
    "SIDES",
    "StaticPool",
    "TwoEndedPool",
    "TwoEndedPoolStats",
    "UnifiedPool",
    "make_pool",
]
