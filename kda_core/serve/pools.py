"""One state pool for running and cached states: the active and checkpoint pools share slots.

SGLang keeps running requests' states and the radix tree's cached states in one ``MambaPool``
(``sgl-project/sglang`` ``python/sglang/srt/mem_cache/memory_pool.py`` ``MambaPool`` /
``HybridReqToTokenPool``; engines.md §1.1): a slot is a slot, whoever holds it. Its size is
``max_mamba_cache_size`` and ``max_running_requests = size // ratio`` with the ratio 3 / 5 / 4 of
``_calculate_mamba_ratio`` (``model_runner_kv_cache_mixin.py``:
``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3``, ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP =
2``; ``kda_core.sizing.slots_per_request``). Here ``ActivePool`` and ``CheckpointPool`` keep their
own slot tables (their buffers and owners differ) but draw from one ``SharedBudget``:
``active.n_used + checkpoints.n_used <= budget.capacity`` always, and either pool reports as
free only what the budget still has.

With INT8 checkpoints the pools are separate, as in SGLang: the active pool holds
``state_slots`` full-precision slots and the INT8 checkpoint pool ``int8_mamba_ckpt_size``
slots, default ``2 * mamba_size`` (``python/sglang/srt/mem_cache/mamba_checkpoint_pool.py``
``maybe_init_int8_mamba_checkpoint_pool``: ``ckpt_size = int8_mamba_ckpt_size or (2 *
mamba_size)``). ``int8_checkpoint_slots`` does that arithmetic.

``ServePingPong`` sizes the ping-pong ring by the scheduler mode, as SGLang does
(``memory_pool.py`` ``HybridReqToTokenPool.__init__``: ``mamba_ping_pong_track_buffer_size = 2
if enable_overlap_schedule else 1``; ``get_mamba_ping_pong_other_idx``): extra_buffer holds 1 +
2 track slots with the overlap scheduler, 1 + 1 without; extra_buffer_lazy (overlap only) 1 + 1
up front and a second on demand. ``busy`` is the set of track slots whose state the deferred
post-processing of the previous step has yet to read; writing one raises (the write-after-read
hazard the second slot exists to avoid; see ``lifecycle``).

Left out: SGLang's slot 0 padding sink (our free lists start at 0).
"""

from __future__ import annotations

from kda_core._checks import check_bool, check_int
from kda_core.cache.pool import (
    MAX_SLOTS,
    ActivePool,
    CheckpointPool,
    PingPong,
    PoolError,
    RequestSlots,
)
from kda_core.cache.pool.slots import _Slots

__all__ = [
    "ServePingPong",
    "SharedBudget",
    "SharedSlots",
    "int8_checkpoint_slots",
    "share",
    "slots_held",
    "slots_up_front",
]


def slots_up_front(strategy: str, overlap: bool = True) -> int:
    """Active-pool slots a request opens with: 1 / 1 + ring (extra_buffer) / 2 (lazy)."""
    if strategy == "extra_buffer":
        return 1 + (2 if overlap else 1)
    return {"no_buffer": 1, "extra_buffer_lazy": 2}[strategy]


def slots_held(strategy: str, overlap: bool = True) -> int:
    """Most active-pool slots a request holds at once (lazy: its on-demand second track)."""
    return 3 if strategy == "extra_buffer_lazy" else slots_up_front(strategy, overlap)


class SharedBudget:
    """The slot count both pools draw from."""

    __slots__ = ("capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = check_int("state_slots", capacity, 1, MAX_SLOTS)
        self.used = 0

    @property
    def free(self) -> int:
        return self.capacity - self.used


class SharedSlots(_Slots):
    """A pool's slot table whose allocations also count against a ``SharedBudget``."""

    def __init__(self, capacity: int, name: str, budget: SharedBudget) -> None:
        super().__init__(capacity, name)
        self.budget = budget

    @property
    def n_free(self) -> int:
        return min(len(self._free), self.budget.free)

    def can_allocate(self, n: int = 1) -> bool:
        super().can_allocate(n)  # argument check
        return self.n_free >= n

    def take(self, owner: str) -> int:
        if self.budget.free <= 0:
            raise ValueError(
                f"state pool is full ({self.budget.capacity} slots shared by running and "
                f"cached states): cannot allocate"
            )
        slot = super().take(owner)
        self.budget.used += 1
        return slot

    def release(self, slot) -> int:
        s = super().release(slot)
        self.budget.used -= 1
        return s

    def check_integrity(self) -> None:
        super().check_integrity()
        if not 0 <= self.budget.used <= self.budget.capacity:
            raise PoolError(f"{self.name}: shared budget used {self.budget.used} out of range")


def share(active: ActivePool, checkpoints: CheckpointPool, budget: SharedBudget) -> None:
    """Make two fresh (empty) pools draw from ``budget``; each may take up to all of it."""
    for pool, name in ((active, "active"), (checkpoints, "checkpoint")):
        if pool.n_used:
            raise ValueError(f"{name} pool must be empty to be shared")
        if pool.capacity != budget.capacity:
            raise ValueError(f"{name} pool must have capacity {budget.capacity}")
        pool._slots = SharedSlots(budget.capacity, name, budget)


def int8_checkpoint_slots(state_slots: int, int8_ckpt_size: int | None = None) -> int:
    """SGLang's INT8 checkpoint pool size: ``int8_ckpt_size or 2 * state_slots`` (capped at
    ``MAX_SLOTS``)."""
    n = check_int("state_slots", state_slots, 1, MAX_SLOTS)
    if int8_ckpt_size is not None:
        return check_int("checkpoint_slots", int8_ckpt_size, 1, MAX_SLOTS)
    return min(2 * n, MAX_SLOTS)


class ServePingPong(PingPong):
    """``PingPong`` with the ring sized by the scheduler mode (see the module docstring)."""

    def __init__(self, pool: ActivePool, strategy: str = "extra_buffer", overlap: bool = True):
        super().__init__(pool, strategy)
        self.overlap = check_bool("overlap", overlap)
        if strategy == "extra_buffer_lazy" and not overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
        self.ring = 1 if strategy == "extra_buffer" and not overlap else 2
        self.busy: set[int] = set()

    def slots_up_front(self) -> int:
        """1 live + the ring's track slots (extra_buffer without overlap: 1 + 1)."""
        return slots_up_front(self.strategy, self.overlap)

    def track(self, req: RequestSlots, position: int) -> int | None:
        """``PingPong.track`` on a ring of ``self.ring`` slots; refuses a busy slot."""
        if self.strategy == "no_buffer":
            return None
        if req.next >= len(req.track):  # lazy: take the second slot at a boundary
            if not self.pool.can_allocate(1):
                return None
            req.track.append(self.pool.allocate_unfilled(req.owner + ":track"))
            req.track_pos.append(None)
        slot = req.track[req.next]
        if slot in self.busy:
            raise PoolError(
                f"track slot {slot} is written while the previous step's post-processing "
                f"has yet to read it (ping-pong ring of {self.ring})"
            )
        S, conv = self.pool.buffers(req.active)
        self.pool.rebind(slot, S.copy(), conv.copy())  # a real copy (see PingPong.track)
        req.track_pos[req.next] = position
        self.track_writes += 1
        req.next = (req.next + 1) % self.ring
        return slot

    def close(self, req: RequestSlots) -> None:
        self.busy.difference_update(req.track)
        super().close(req)
