"""One byte buffer for the state slots and the MLA KV (``Engine(unified_memory=bytes)``, SGLang's
``--enable-unified-memory``): states may take what the KV in use leaves, the KV what the states
leave; the border is in every ``StepRow``. ``kda_core.memory`` replays the buffer byte by byte;
docs/serving.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.model import TinyHybrid
from kda_core.serve._slots import MAX_SLOTS, SlotBudget, StateShape

MAX_UNIFIED_BYTES = 1 << 40


class UnifiedBudget(SlotBudget):
    """State slots from the low end of one byte buffer, KV tokens from the high end; ``slots``
    is the most the buffer could ever hold (the tables' size)."""

    def __init__(
        self, total: int, slot_bytes: int, kv_token_bytes: int, kv_used: Callable[[], int]
    ) -> None:
        self.used = 0  # not SlotBudget.__init__: capacity is computed here
        self.slots = min(total // slot_bytes, MAX_SLOTS)
        self.total, self.slot_bytes, self.kv_token_bytes = total, slot_bytes, kv_token_bytes
        self.kv_used = kv_used  # KV tokens in use: the cache's and the running requests'

    @property  # type: ignore[override]
    def capacity(self) -> int:
        """``SlotBudget.capacity``: what the KV side leaves now (at most ``slots``)."""
        left = (self.total - self.kv_used() * self.kv_token_bytes) // self.slot_bytes
        return max(min(left, self.slots), 0)

    def kv_capacity(self) -> int:
        """KV tokens the KV side may hold now: what the state side leaves."""
        return self.kv_capacity_alone(self.used)

    def kv_capacity_alone(self, slots: int) -> int:
        """The most KV tokens a request running alone on ``slots`` state slots can have."""
        return (self.total - slots * self.slot_bytes) // self.kv_token_bytes

    def border(self) -> tuple[int, int]:
        """(where the state side ends, where the KV side begins), in bytes from 0."""
        return self.used * self.slot_bytes, self.total - self.kv_used() * self.kv_token_bytes


def make_unified(
    total: Any,
    model: TinyHybrid,
    strategy: str,
    overlap: bool,
    int8: bool,
    state_slots: Any,
    kv_used: Callable[[], int],
) -> UnifiedBudget | None:
    """``unified_memory``, checked: None, or bytes enough for one request's reserved slots
    (``sizing.request_slots``) and one KV token. The INT8 checkpoint pool lives outside the
    buffer in SGLang (allocated from headroom) and ``state_slots`` is the buffer's to decide:
    both are refused with it."""
    if total is None:
        return None
    if int8:
        raise ValueError("unified_memory: the INT8 checkpoint pool is a separate pool; not both")
    if state_slots is not None:
        raise ValueError("unified_memory: the buffer sets the state slots; leave state_slots None")
    S = StateShape.of(model).native_bytes
    kvb = 8 * len(model.mla_layers) * model.config.mla_latent
    least = sizing.request_slots(strategy, overlap).reserved * S + kvb
    total = check_int("unified_memory", total, least, MAX_UNIFIED_BYTES)
    return UnifiedBudget(total, S, kvb, kv_used)
