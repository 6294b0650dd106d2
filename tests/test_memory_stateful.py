"""Hypothesis stateful test: random allocs / frees / writes / flushes on both sides of a pool,
in eager and lazy mode (and the static partition), with every live entry's bytes verified
after every step against a plain dict model, and the capacity rule checked at every alloc:

* unified: ``alloc(side, n)`` succeeds iff ``live + n <= (T - peer_live * E_peer) // E``
  (any mix of bytes fits, whatever the holes and frontiers), in both modes;
* static: iff ``live + n <= capacity(side)``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kda_core.memory._pools import StaticPool, UnifiedPool

T, P, S = 1200, 8, 40
SIDE = st.sampled_from(["state", "kv"])


class _PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = self.make()
        self.model: dict[str, dict[int, bytes]] = {"state": {}, "kv": {}}
        self.counter = 0

    def make(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def expected_ok(self, side: str, n: int) -> bool:
        e = self.pool.entry_bytes(side)
        peer = "kv" if side == "state" else "state"
        peer_bytes = len(self.model[peer]) * self.pool.entry_bytes(peer)
        return len(self.model[side]) + n <= (T - peer_bytes) // e

    def _payload(self, side: str) -> bytes:
        self.counter += 1
        e = self.pool.entry_bytes(side)
        rng = np.random.default_rng(self.counter)
        return rng.integers(0, 256, size=e, dtype=np.uint8).tobytes()

    @rule(side=SIDE, n=st.integers(0, 12))
    def alloc(self, side: str, n: int) -> None:
        ok = self.pool.can_alloc(side, n)
        assert ok == self.expected_ok(side, n)
        vids = self.pool.alloc(side, n)
        assert (vids is not None) == ok
        if vids is None:
            return
        assert len(set(vids.tolist()) & set(self.model[side])) == 0
        for v in vids.tolist():
            data = self._payload(side)
            self.pool.write(side, v, np.frombuffer(data, dtype=np.uint8))
            self.model[side][v] = data

    @precondition(lambda self: self.model["state"] or self.model["kv"])
    @rule(side=SIDE, data=st.data())
    def free(self, side: str, data) -> None:
        live = sorted(self.model[side])
        if not live:
            return
        chosen = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=8, unique=True))
        self.pool.free(side, np.array(chosen, dtype=np.int64))
        for v in chosen:
            del self.model[side][v]

    @precondition(lambda self: self.model["state"] or self.model["kv"])
    @rule(side=SIDE, data=st.data(), offset=st.integers(0, P - 3))
    def overwrite(self, side: str, data, offset: int) -> None:
        live = sorted(self.model[side])
        if not live:
            return
        v = data.draw(st.sampled_from(live))
        chunk = bytes([offset + 1] * 3)
        self.pool.write(side, v, chunk, offset=offset)
        old = bytearray(self.model[side][v])
        old[offset : offset + 3] = chunk
        self.model[side][v] = bytes(old)

    @rule(side=SIDE, cap=st.one_of(st.none(), st.integers(0, 3)))
    def flush(self, side: str, cap: int | None) -> None:
        self.pool.flush(side, cap)

    @rule()
    def idle(self) -> None:
        self.pool.on_idle()

    @invariant()
    def contents_and_integrity(self) -> None:
        for side, entries in self.model.items():
            assert self.pool.live(side) == len(entries)
            for v, data in entries.items():
                assert self.pool.read(side, v).tobytes() == data
        self.pool.check_integrity()


class EagerMachine(_PoolMachine):
    def make(self):
        return UnifiedPool(T, P, S, mode="eager")

    @invariant()
    def no_holes(self) -> None:
        assert self.pool.holes("state") == 0 and self.pool.holes("kv") == 0


class LazyMachine(_PoolMachine):
    def make(self):
        return UnifiedPool(T, P, S, mode="lazy", max_moves_per_flush=2)


class StaticMachine(_PoolMachine):
    def make(self):
        return StaticPool(T, P, S, ratio=0.6)

    def expected_ok(self, side: str, n: int) -> bool:
        return len(self.model[side]) + n <= self.pool.capacity(side)


_SETTINGS = settings(max_examples=80, stateful_step_count=50, deadline=None)
TestEager = EagerMachine.TestCase
TestEager.settings = _SETTINGS
TestLazy = LazyMachine.TestCase
TestLazy.settings = _SETTINGS
TestStatic = StaticMachine.TestCase
TestStatic.settings = settings(max_examples=20, stateful_step_count=30, deadline=None)
