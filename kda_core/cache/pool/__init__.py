"""State pools: active slots, a checkpoint pool (copy-on-write restore, snapshot, donate),
ping-pong track slots (re-exports; docs/pools.md).
"""

from kda_core.cache.pool.active import ActivePool
from kda_core.cache.pool.checkpoint import CheckpointPool
from kda_core.cache.pool.pingpong import PingPong, RequestSlots
from kda_core.cache.pool.slots import (
    MAX_SLOTS,
    SLOTS_MAX,
    SLOTS_UP_FRONT,
    STRATEGIES,
    PoolError,
    PoolStats,
    StateShape,
)

__all__ = [
    "MAX_SLOTS",
    "SLOTS_MAX",
    "SLOTS_UP_FRONT",
    "STRATEGIES",
    "ActivePool",
    "CheckpointPool",
    "PingPong",
    "PoolError",
    "PoolStats",
    "RequestSlots",
    "StateShape",
]
