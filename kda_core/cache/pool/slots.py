"""What the state pools share: slot shapes and counts, the pool statistics, and the
``SlotBudget`` several pools draw from (running and cached states in one pool, as SGLang's
``MambaPool``). The slot table itself is the pools' own (``_slots``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kda_core.model import TinyHybrid

MAX_SLOTS = 4096
"""Most slots one pool may hold (caps memory)."""
STRATEGIES: tuple[str, ...] = ("no_buffer", "extra_buffer", "extra_buffer_lazy")
"""The serving strategies (slots per request by strategy: ``sizing.request_slots``)."""

__all__ = [
    "MAX_SLOTS",
    "STRATEGIES",
    "PoolError",
    "PoolStats",
    "SlotBudget",
    "StateShape",
]


class PoolError(AssertionError):
    """Raised by ``check_integrity`` when an invariant is broken."""


@dataclass(slots=True, frozen=True)
class StateShape:
    """Per-slot shapes: S [L, H, K, V] and conv [L, W-1, D] (D = 3HK), float64."""

    layers: int
    heads: int
    k: int
    v: int
    conv_rows: int
    conv_dim: int

    @classmethod
    def of(cls, model: TinyHybrid) -> StateShape:
        c = model.config
        return cls(
            len(model.kda_layers),
            c.n_heads,
            c.head_dim,
            c.head_dim,
            c.conv_size - 1,
            3 * c.n_heads * c.head_dim,
        )

    @property
    def s(self) -> tuple[int, int, int, int]:
        return (self.layers, self.heads, self.k, self.v)

    @property
    def conv(self) -> tuple[int, int, int]:
        return (self.layers, self.conv_rows, self.conv_dim)

    @property
    def native_bytes(self) -> int:
        """Bytes of one full-precision slot (S + conv, float64)."""
        return 8 * (math.prod(self.s) + math.prod(self.conv))  # per insert: no numpy call

    @property
    def int8_bytes(self) -> int:
        """Bytes of one INT8 checkpoint: int8 S codes + float64 scales [L, H, K] + native conv."""
        L, H, K, V = self.s
        return L * H * K * V + 8 * L * H * K + 8 * int(np.prod(self.conv))


@dataclass(slots=True, frozen=True)
class PoolStats:
    """Counts for the pools panel."""

    active_capacity: int
    active_used: int
    checkpoint_capacity: int
    checkpoint_used: int
    checkpoint_bytes: int
    copies: int
    donations: int
    loads: int
    track_writes: int
    int8: bool


class SlotBudget:
    """A slot count several ``SlotTable`` s draw from: ``used <= capacity`` always."""

    __slots__ = ("capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
