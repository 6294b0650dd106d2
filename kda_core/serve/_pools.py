"""The engine's state pools: one shared pool for running and cached states (SGLang's
``MambaPool``; INT8 checkpoints: a separate pool, as ``maybe_init_int8_mamba_checkpoint_pool``)
and the ping-pong ring a running request tracks its checkpoints in (``HybridReqToTokenPool``:
2 track slots with the overlap scheduler, else 1; extra_buffer_lazy takes the second at a
boundary). docs/serving.md ("One pool")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kda_core import sizing
from kda_core.model import TinyHybrid
from kda_core.serve._checkpoints import CheckpointPool, int8_pool_estimate
from kda_core.serve._slots import ActivePool, PoolError, SlotBudget, StateShape, UnifiedBudget
from kda_core.serve.report import PoolStats


def copy_rows(payload: Any, start: int, stop: int, length: int) -> Any:
    """The radix cache's KV splitter: rows of an ``[n, n_mla, C]`` array, copied (a cached
    edge never pins a request's batch array)."""
    return payload[start:stop].copy()


def free_memory_bytes() -> int | None:
    """The memory the system can still give (``MemAvailable`` of /proc/meminfo; None where
    there is no such file): the lab's stand-in for ``torch.cuda.mem_get_info``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            rows = (line.split() for line in f)
            return next((int(r[1]) * 1024 for r in rows if r[0] == "MemAvailable:"), None)
    except OSError:
        return None


@dataclass(slots=True)
class RequestSlots:
    """One request's active-pool slots: ``active`` plus ping-pong ``track`` slots;
    ``track_pos[i]`` the boundary (tokens) of ``track[i]``'s state (None: empty or donated),
    ``next`` the index the next track write goes to."""

    owner: str
    active: int
    track: list[int]
    track_pos: list[int | None]
    next: int = 0


class PingPong:
    """Every running request's slots by ``strategy`` (resolved: ``_args.check_modes``)."""

    def __init__(self, pool: ActivePool, strategy: str, overlap: bool = True) -> None:
        self.pool = pool
        self.strategy = strategy
        held = sizing.request_slots(strategy, overlap).held
        self.ring = 1 if strategy == "extra_buffer" and not overlap else 2
        self.up_front = held - 1 if strategy == "extra_buffer_lazy" else held
        self.busy: set[int] = set()
        self.track_writes = 0

    def can_open(self) -> bool:
        return self.pool.can_allocate(self.up_front)

    def open(self, owner: str) -> RequestSlots:
        """The slots a request holds from admission (its live state starts at zero)."""
        if not self.can_open():
            raise ValueError(
                f"active pool has {self.pool.n_free} free slots, strategy "
                f"{self.strategy!r} needs {self.up_front}"
            )
        active = self.pool.allocate(owner)
        track = [
            self.pool.allocate(owner + ":track", shared=True) for _ in range(self.up_front - 1)
        ]
        return RequestSlots(owner, active, track, [None] * len(track))

    def track(self, req: RequestSlots, position: int) -> int | None:
        """Copy the live state (at boundary ``position``) into ``track[next]``, then flip; the
        slot written, or None (no_buffer; the lazy second slot not available). The caller
        donates a still-valid state in ``track[next]`` first (``overwritten_next``)."""
        if self.strategy == "no_buffer":
            return None
        if req.next >= len(req.track):  # lazy: take the second slot at a boundary
            if not self.pool.can_allocate(1):
                return None
            req.track.append(self.pool.allocate(req.owner + ":track", shared=True))
            req.track_pos.append(None)
        slot = req.track[req.next]
        if slot in self.busy:
            raise PoolError(
                f"track slot {slot} is written while the previous step's post-processing "
                f"has yet to read it (ping-pong ring of {self.ring})"
            )
        S, conv = self.pool.buffers(req.active)
        # a real copy: a later write to the live slot, or freezing this one (a donation), never
        # reaches the other
        self.pool.rebind(slot, S.copy(), conv.copy())
        req.track_pos[req.next] = position
        self.track_writes += 1
        req.next = (req.next + 1) % self.ring
        return slot

    def overwritten_next(self, req: RequestSlots) -> tuple[int, int] | None:
        """(slot, position) of a valid tracked state the next ``track`` would overwrite."""
        i = req.next
        if i < len(req.track) and req.track_pos[i] is not None:
            return req.track[i], req.track_pos[i]  # type: ignore[return-value]
        return None

    def valid(self, req: RequestSlots) -> list[tuple[int, int]]:
        """Every (slot, position) still holding an undonated tracked state, oldest first."""
        held = ((s, p) for s, p in zip(req.track, req.track_pos) if p is not None)
        return sorted(held, key=lambda x: x[1])

    def mark_donated(self, req: RequestSlots, slot: int) -> None:
        req.track_pos[req.track.index(slot)] = None

    def close(self, req: RequestSlots) -> None:
        """Free every slot the request holds."""
        self.busy.difference_update(req.track)
        for s in req.track:
            self.pool.free(s)
        self.pool.free(req.active)


class StatePools:
    """``active`` and ``checkpoints`` (one budget of ``state_slots``; separate with INT8, whose
    bytes by part are ``int8_estimate``), the ``pingpong`` ring and the ``unified`` budget of a
    byte buffer shared with the MLA KV or None."""

    def __init__(
        self,
        model: TinyHybrid,
        state_slots: int,
        checkpoint_slots: int,
        strategy: str,
        overlap: bool,
        int8: bool,
        unified: UnifiedBudget | None = None,
    ) -> None:
        shape = StateShape.of(model)
        self.int8_estimate: dict[str, int] | None = None
        if int8:  # sized BEFORE the pool exists, as SGLang's maybe_init_int8_mamba_checkpoint_pool
            est = self.int8_estimate = int8_pool_estimate(shape, checkpoint_slots)
            free = free_memory_bytes()
            if free is not None and est["total"] >= free:
                raise ValueError(
                    f"checkpoint_slots: the INT8 checkpoint pool needs ~{est['total'] / 2**20:.2f}"
                    f" MB but only {free / 2**20:.2f} MB is free. Lower checkpoint_slots "
                    f"(currently {checkpoint_slots})"
                )
        self.unified = unified
        if unified is not None:  # one byte buffer: the table spans what the buffer could hold
            state_slots = checkpoint_slots = unified.slots
        self.state_slots = state_slots
        self.budget = None if int8 else unified or SlotBudget(state_slots)
        self.active = ActivePool(shape, state_slots, self.budget)
        self.checkpoints = CheckpointPool(shape, checkpoint_slots, int8=int8, budget=self.budget)
        self.pingpong = PingPong(self.active, strategy, overlap)
        self.frees = 0  # cached states the cache has dropped so far
        self.freed_at: dict[int, int] = {}  # checkpoint slot -> ``frees`` when last dropped

    def drop_cached(self, slot: int, nbytes: int) -> None:
        """The prefix cache's ``on_free_state`` hook: a cached state is gone, free its slot
        (counted, so a request can tell which of its inserted states are still cached)."""
        self.frees += 1
        self.freed_at[slot] = self.frees
        self.checkpoints.free(slot)

    def still_held(self, inserted: list[tuple[int, int]]) -> int:
        """How many of these (slot, ``frees`` when inserted) the cache still holds."""
        return sum(self.freed_at.get(slot, -1) <= n for slot, n in inserted)

    @property
    def shared(self) -> bool:
        """Running and cached states draw from one budget (INT8 off)."""
        return self.budget is not None

    def by_kind(self, tree_states: int) -> tuple[int, int, int, int | None]:
        """(slots held by running requests, cached, free, the INT8 pool's free or None)."""
        held = self.active.n_used + self.checkpoints.n_used - tree_states
        ck_free = None if self.shared else self.checkpoints.n_free
        return held, tree_states, self.active.n_free, ck_free

    def stats(self) -> PoolStats:
        ck = self.checkpoints
        return PoolStats(
            active_capacity=self.active.capacity,
            active_used=self.active.n_used,
            checkpoint_capacity=ck.capacity,
            checkpoint_used=ck.n_used,
            checkpoint_bytes=ck.used_bytes,
            copies=ck.copies,
            donations=ck.donations,
            loads=ck.loads,
            track_writes=self.pingpong.track_writes,
            int8=ck.int8,
        )

    def check_integrity(self, cached_slots: list[int]) -> None:
        """Both tables, nothing left running (between requests), and the cache's states
        (``cached_slots``) are exactly the checkpoint slots owned by "cache"."""
        self.active.check_integrity()
        self.checkpoints.check_integrity()
        owned = self.checkpoints.owned()  # slot -> owner: all the cache's, no slot leaked
        if sorted(cached_slots) != sorted(owned) or set(owned.values()) - {"cache"}:
            raise PoolError(f"engine: the cache holds slots {sorted(cached_slots)}, owned: {owned}")
        if self.active.n_used:
            raise PoolError(f"engine: {self.active.n_used} active slots leaked")
        if self.pingpong.busy:
            raise PoolError(f"engine: track slots {sorted(self.pingpong.busy)} left busy")
        if self.unified is not None and (border := self.unified.border())[0] > border[1]:
            raise PoolError(f"engine: the state and KV sides cross ({border})")
