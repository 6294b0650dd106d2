"""Pools: slot accounting, snapshot / COW restore / donate semantics, INT8 parking, ping-pong."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.kda.quant import quantize_int8
from kda_core.model import KDALayerState
from kda_core.serve._checkpoints import CheckpointPool
from kda_core.serve._pools import PingPong
from kda_core.serve._slots import ActivePool, PoolError, StateShape
from tests.pool_helpers import bind

SHAPE = StateShape(s=(2, 2, 4, 3), conv=(2, 3, 24))


def _states(rng: np.random.Generator) -> list[KDALayerState]:
    return [
        KDALayerState(rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 24)))
        for _ in range(2)
    ]


def _filled(rng: np.random.Generator, slots: int = 3) -> tuple[ActivePool, int, list]:
    pool = ActivePool(SHAPE, slots)
    a = pool.allocate("r1")
    st = _states(rng)
    bind(pool, a, st)
    return pool, a, st


def test_allocate_free_accounting() -> None:
    pool = ActivePool(SHAPE, 3)
    assert pool.can_allocate(3) and not pool.can_allocate(4)
    slots = [pool.allocate(f"r{i}") for i in range(3)]
    assert slots == [0, 1, 2]
    assert pool.n_used == 3 and pool.n_free == 0 and not pool.can_allocate()
    with pytest.raises(ValueError, match="full"):
        pool.allocate("r9")
    pool.free(1)
    pool.check_integrity()
    with pytest.raises(ValueError, match="not allocated"):
        pool.free(1)  # double free
    assert pool.allocate("r5") == 1 and pool.owned()[1] == "r5"
    np.testing.assert_array_equal(pool.buffers(1)[0], np.zeros(SHAPE.s))  # fresh slot is zero
    pool.check_integrity()


def test_integrity_detects_double_listing() -> None:
    pool = ActivePool(SHAPE, 2)
    pool.allocate("a")
    pool._free.append(0)  # corrupt: owned and free
    with pytest.raises(PoolError):
        pool.check_integrity()


def test_bind_and_layer_views(rng: np.random.Generator) -> None:
    pool, a, st = _filled(rng)
    S, conv = pool.buffers(a)
    assert S.shape == SHAPE.s and conv.shape == SHAPE.conv
    for i, layer in enumerate(pool.layer_states(a)):
        np.testing.assert_array_equal(layer.S, st[i].S)
        np.testing.assert_array_equal(layer.conv, st[i].conv)
    with pytest.raises(ValueError, match="kda states must be S"):  # one layer of two
        bind(pool, a, st[:1])


def test_snapshot_is_a_frozen_copy(rng: np.random.Generator) -> None:
    pool, a, st = _filled(rng)
    ck = CheckpointPool(SHAPE, 2)
    c = ck.store(*pool.buffers(a), "tree")
    S, conv = ck.buffers(c)
    assert not np.shares_memory(S, pool.buffers(a)[0])
    np.testing.assert_array_equal(S, pool.buffers(a)[0])
    assert ck.copies == 1 and ck.donations == 0
    with pytest.raises(ValueError):
        S[0, 0, 0, 0] = 1.0  # read-only: a shared checkpoint cannot be written in place
    ck.check_integrity()
    S.flags.writeable = True  # force a write: integrity must notice the bytes changed
    S[0, 0, 0, 0] += 1.0
    with pytest.raises(PoolError, match="changed while shared"):
        ck.check_integrity()


def test_cow_restore_isolation(rng: np.random.Generator) -> None:
    pool, a, _ = _filled(rng)
    ck = CheckpointPool(SHAPE, 2)
    c = ck.store(*pool.buffers(a), "tree")
    before = [x.copy() for x in ck.raw(c)]
    b1, b2 = pool.allocate("r2"), pool.allocate("r3")
    ck.load_to_active(c, pool, b1)
    ck.load_to_active(c, pool, b2)
    assert ck.copies == 3 and ck.loads == 2
    for b in (b1, b2):
        assert not np.shares_memory(pool.buffers(b)[0], ck.buffers(c)[0])
        np.testing.assert_array_equal(pool.buffers(b)[0], before[0])
    # the two requests continue differently: the checkpoint's bytes do not change
    pool.buffers(b1)[0][...] += 5.0
    bind(pool, b2, _states(rng))
    for x, y in zip(ck.raw(c), before):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(pool.buffers(b1)[0], pool.buffers(b2)[0])
    ck.check_integrity()


def test_donate_moves_ownership_without_copy(rng: np.random.Generator) -> None:
    pool, a, _ = _filled(rng)
    S_before, conv_before = pool.buffers(a)
    ck = CheckpointPool(SHAPE, 2)
    c = ck.donate(pool, a, "tree")
    S, conv = ck.raw(c)
    assert S is S_before and conv is conv_before  # the very buffers: no data copied
    assert ck.donations == 1 and ck.copies == 0
    assert not S.flags.writeable
    assert pool.owned()[a] == "r1"  # the slot stays with the request, with a fresh buffer
    assert not np.shares_memory(pool.buffers(a)[0], S)
    np.testing.assert_array_equal(pool.buffers(a)[0], np.zeros(SHAPE.s))
    ck.check_integrity()
    pool.check_integrity()


def test_views_taken_before_a_donation_cannot_change_the_checkpoint(
    rng: np.random.Generator,
) -> None:
    """Freezing a base array does not freeze views made before: the views themselves are
    read-only, so a request holding them can never write into a donated checkpoint."""
    pool, a, _ = _filled(rng)
    views = pool.layer_states(a)  # what a request runs on (the engine keeps these)
    ck = CheckpointPool(SHAPE, 2)
    c = ck.donate(pool, a, "tree")
    S, conv = ck.raw(c)
    assert np.shares_memory(views[0].S, S)  # no copy was made
    before = S.copy()
    for layer in views:
        assert not layer.S.flags.writeable and not layer.conv.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            layer.S[0, 0, 0] = 99.0
        with pytest.raises(ValueError, match="read-only"):
            layer.conv[0, 0] = 99.0
    np.testing.assert_array_equal(S, before)
    ck.check_integrity()


@pytest.mark.parametrize("int8", [False, True])
def test_deep_copied_checkpoints_stay_read_only(rng: np.random.Generator, int8: bool) -> None:
    import copy

    pool, a, _ = _filled(rng)
    ck = CheckpointPool(SHAPE, 3, int8=int8)
    ck.store(*pool.buffers(a), "tree")
    ck.donate(pool, a, "tree")
    twin = copy.deepcopy(ck)
    for c in twin.owned():
        for x, y in zip(twin.raw(c), ck.raw(c)):
            assert not x.flags.writeable
            assert not np.shares_memory(x, y)
            np.testing.assert_array_equal(x, y)
    twin.check_integrity()


def test_int8_checkpoint_matches_quantize_int8(rng: np.random.Generator) -> None:
    pool, a, _ = _filled(rng)
    ck = CheckpointPool(SHAPE, 2, int8=True)
    c = ck.store(*pool.buffers(a), "tree")
    qdata, scale, conv = ck.raw(c)
    S = pool.buffers(a)[0]
    q = quantize_int8(S)  # naive twin: the contract's function on the stacked state
    assert qdata.dtype == np.int8 and scale.shape == (2, 2, 4, 1)
    np.testing.assert_array_equal(qdata, q.qdata)
    np.testing.assert_array_equal(ck.buffers(c)[0], q.dequantize())
    np.testing.assert_array_equal(conv, pool.buffers(a)[1])  # conv stays native
    err = np.abs(ck.buffers(c)[0] - S)
    assert np.all(err <= scale / 2 * (1 + 1e-12))
    mx, rel = ck.quant_error(c)
    assert mx == pytest.approx(err.max(), rel=1e-12)
    assert 0 < rel < 0.01
    assert ck.slot_bytes == 2 * 2 * 4 * 3 + 8 * (2 * 2 * 4 + 2 * 3 * 24) < SHAPE.native_bytes
    b = pool.allocate("r2")
    ck.load_to_active(c, pool, b)
    np.testing.assert_array_equal(pool.buffers(b)[0], q.dequantize())
    # an INT8 donation has to quantize: counted as a copy, not a donation
    c2 = ck.donate(pool, a, "tree")
    assert ck.donations == 0 and ck.copies == 3
    np.testing.assert_array_equal(ck.raw(c2)[0], q.qdata)
    ck.check_integrity()


def test_checkpoint_pool_full_and_free(rng: np.random.Generator) -> None:
    pool, a, _ = _filled(rng)
    ck = CheckpointPool(SHAPE, 1)
    c = ck.store(*pool.buffers(a), "tree")
    with pytest.raises(ValueError, match="full"):
        ck.store(*pool.buffers(a), "tree")
    with pytest.raises(ValueError, match="full"):
        ck.donate(pool, a, "tree")
    ck.free(c)
    with pytest.raises(ValueError, match="not allocated"):
        ck.free(c)
    assert ck.n_used == 0 and ck.used_bytes == 0
    ck.check_integrity()


@pytest.mark.parametrize("strategy", ["no_buffer", "extra_buffer", "extra_buffer_lazy"])
def test_ping_pong_strategies(rng: np.random.Generator, strategy: str) -> None:
    pool = ActivePool(SHAPE, 3)
    pp = PingPong(pool, strategy)
    req = pp.open("r1")
    assert pool.n_used == pp.up_front == {"no_buffer": 1, "extra_buffer": 3}.get(strategy, 2)
    st = _states(rng)
    bind(pool, req.active, st)
    first = pp.track(req, 16)
    if strategy == "no_buffer":
        assert first is None and pp.valid(req) == []
    else:
        assert pp.valid(req) == [(first, 16)]
        # compare with the states that were bound, not with the active slot (itself, if shared)
        np.testing.assert_array_equal(pool.buffers(first)[0], np.stack([x.S for x in st]))
        np.testing.assert_array_equal(pool.buffers(first)[1], np.stack([x.conv for x in st]))
        bind(pool, req.active, _states(rng))
        second = pp.track(req, 32)
        assert second != first and pool.n_used == 3  # lazy took its second slot now
        assert pp.valid(req) == [(first, 16), (second, 32)]
        assert pp.overwritten_next(req) == (first, 16)  # next write would overwrite 16
        pp.mark_donated(req, first)
        assert pp.overwritten_next(req) is None
        assert pp.track_writes == 2
    pp.close(req)
    assert pool.n_used == 0
    pool.check_integrity()


def test_open_needs_enough_slots() -> None:
    pool = ActivePool(SHAPE, 2)
    pp = PingPong(pool, "extra_buffer")
    assert not pp.can_open()
    with pytest.raises(ValueError, match="needs 3"):
        pp.open("r1")


@pytest.mark.parametrize("bad", [0, -1, 5000, 1.5, True, "3"])
def test_bad_slots(bad: object) -> None:
    with pytest.raises(ValueError, match="slots"):
        ActivePool(SHAPE, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slots"):
        CheckpointPool(SHAPE, bad)  # type: ignore[arg-type]


def test_bad_arguments() -> None:
    pool = ActivePool(SHAPE, 2)
    with pytest.raises(ValueError, match="strategy"):
        PingPong(pool, "triple_buffer")
    with pytest.raises(ValueError, match="int8"):
        CheckpointPool(SHAPE, 2, int8=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="owner"):
        pool.allocate("")
    with pytest.raises(ValueError, match="slot"):
        pool.free(7)
    with pytest.raises(ValueError, match="n must be"):
        pool.can_allocate(-1)


@pytest.mark.parametrize("strategy", ["extra_buffer", "extra_buffer_lazy"])
def test_track_copies_the_active_state(rng: np.random.Generator, strategy: str) -> None:
    pool = ActivePool(SHAPE, 3)
    pp = PingPong(pool, strategy)
    req = pp.open("r1")
    st = _states(rng)
    bind(pool, req.active, st)
    t = pp.track(req, 16)
    assert t is not None
    S_a, conv_a = pool.buffers(req.active)
    S_t, conv_t = pool.buffers(t)
    assert not np.shares_memory(S_a, S_t) and not np.shares_memory(conv_a, conv_t)
    want_S = np.stack([x.S for x in st])
    want_conv = np.stack([x.conv for x in st])
    # the request keeps running in place: the tracked state must not move
    S_a[...] += 3.0
    conv_a[...] -= 2.0
    np.testing.assert_array_equal(pool.buffers(t)[0], want_S)
    np.testing.assert_array_equal(pool.buffers(t)[1], want_conv)
    # donate the track slot: the checkpoint holds the boundary state, the active slot stays
    # writable and further in-place writes reach neither the checkpoint nor its digest
    ck = CheckpointPool(SHAPE, 2)
    c = ck.donate(pool, t, "tree")
    pp.mark_donated(req, t)
    assert S_a.flags.writeable and conv_a.flags.writeable
    S_a[...] *= -1.0
    conv_a[...] += 7.0
    np.testing.assert_array_equal(ck.raw(c)[0], want_S)
    np.testing.assert_array_equal(ck.raw(c)[1], want_conv)
    ck.check_integrity()
    pool.check_integrity()
    pp.close(req)


def test_lazy_second_slot_unavailable_skips_the_track(rng: np.random.Generator) -> None:
    pool = ActivePool(SHAPE, 2)  # exactly the lazy strategy's up-front slots
    pp = PingPong(pool, "extra_buffer_lazy")
    req = pp.open("r1")
    st = _states(rng)
    bind(pool, req.active, st)
    first = pp.track(req, 16)
    assert first is not None and pp.track_writes == 1
    bind(pool, req.active, _states(rng))
    assert pp.track(req, 32) is None  # no slot for the lazy second track: skipped
    assert pp.track_writes == 1 and pool.n_used == 2 and len(req.track) == 1
    assert pp.valid(req) == [(first, 16)]  # the first tracked state is intact
    np.testing.assert_array_equal(pool.buffers(first)[0], np.stack([x.S for x in st]))
    pp.close(req)
    pool.check_integrity()
