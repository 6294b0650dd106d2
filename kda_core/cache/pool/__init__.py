"""State pools: active slots and a checkpoint pool (copy-on-write restore, snapshot, donate),
their slot tables and the budget a shared pool's tables draw from (re-exports; docs/pools.md).
"""

from kda_core.cache.pool.active import ActivePool
from kda_core.cache.pool.checkpoint import CheckpointPool
from kda_core.cache.pool.slots import (
    MAX_SLOTS,
    STRATEGIES,
    PoolError,
    PoolStats,
    SlotBudget,
    StateShape,
)

__all__ = [
    "MAX_SLOTS",
    "STRATEGIES",
    "ActivePool",
    "CheckpointPool",
    "PoolError",
    "PoolStats",
    "SlotBudget",
    "StateShape",
]
