"""``PingPong``: per-request active-slot sets by strategy (``no_buffer``, ``extra_buffer``,
``extra_buffer_lazy``) and the track writes at checkpoint boundaries (docs/pools.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from kda_core.cache.pool.active import ActivePool
from kda_core.cache.pool.slots import SLOTS_UP_FRONT, STRATEGIES

__all__ = ["PingPong", "RequestSlots"]


@dataclass(slots=True)
class RequestSlots:
    """One request's active-pool slots: ``active`` plus ping-pong ``track`` slots.

    ``track_pos[i]`` is the boundary (tokens) of the state held by ``track[i]`` (None: empty
    or already donated); ``next`` is the index the next track write goes to.
    """

    owner: str
    strategy: str
    active: int
    track: list[int]
    track_pos: list[int | None]
    next: int = 0


class PingPong:
    """Ping-pong tracking slots per request, by strategy (see the module docstring)."""

    def __init__(self, pool: ActivePool, strategy: str = "extra_buffer") -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if not isinstance(pool, ActivePool):
            raise ValueError(f"pool must be an ActivePool, got {type(pool).__name__}")
        self.pool = pool
        self.strategy = strategy
        self.track_writes = 0

    def can_open(self) -> bool:
        return self.pool.can_allocate(self.slots_up_front())

    def slots_up_front(self) -> int:
        """Slots a request holds from admission: 1 / 3 / 2 (no_buffer / extra_buffer / lazy)."""
        return SLOTS_UP_FRONT[self.strategy]

    def open(self, owner: str) -> RequestSlots:
        """Allocate the slots a request holds from admission (``slots_up_front``)."""
        need = self.slots_up_front()
        if not self.pool.can_allocate(need):
            raise ValueError(
                f"active pool has {self.pool.n_free} free slots, strategy "
                f"{self.strategy!r} needs {need}"
            )
        active = self.pool.allocate(owner)
        track = [self.pool.allocate_unfilled(owner + ":track") for _ in range(need - 1)]
        return RequestSlots(owner, self.strategy, active, track, [None] * len(track))

    def track(self, req: RequestSlots, position: int) -> int | None:
        """Write the active slot's state (at boundary ``position``) into ``track[next]``; flip.

        Returns the track slot written, or None for no_buffer (nothing to track into) or
        when the lazy second slot cannot be allocated. The caller must donate a still-valid
        state in ``track[next]`` before calling (``pending()`` tells which).
        """
        if self.strategy == "no_buffer":
            return None
        if req.next >= len(req.track):  # lazy: take the second slot at a boundary
            if not self.pool.can_allocate(1):
                return None
            req.track.append(self.pool.allocate_unfilled(req.owner + ":track"))
            req.track_pos.append(None)
        slot = req.track[req.next]
        S, conv = self.pool.buffers(req.active)
        # the kernel writes the state at this boundary into the track slot: a real copy, so a
        # later in-place write to the active slot (or donating the track slot, which freezes
        # its buffers) never reaches the other slot
        self.pool.rebind(slot, S.copy(), conv.copy())
        req.track_pos[req.next] = position
        self.track_writes += 1
        n = 2
        req.next = (req.next + 1) % n
        return slot

    def overwritten_next(self, req: RequestSlots) -> tuple[int, int] | None:
        """(slot, position) of a valid tracked state the next ``track`` would overwrite."""
        i = req.next
        if i < len(req.track) and req.track_pos[i] is not None:
            return req.track[i], req.track_pos[i]  # type: ignore[return-value]
        return None

    def valid(self, req: RequestSlots) -> list[tuple[int, int]]:
        """Every (slot, position) still holding an undonated tracked state, oldest first."""
        return sorted(
            ((s, p) for s, p in zip(req.track, req.track_pos) if p is not None),
            key=lambda x: x[1],
        )

    def mark_donated(self, req: RequestSlots, slot: int) -> None:
        i = req.track.index(slot)
        req.track_pos[i] = None

    def close(self, req: RequestSlots) -> None:
        """Free every slot the request holds."""
        for s in req.track:
            self.pool.free(s)
        self.pool.free(req.active)
        req.track.clear()
        req.track_pos.clear()
