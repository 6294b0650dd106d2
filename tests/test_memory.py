"""kda_core.memory: the two-ended unified pool, its compaction and the static partition."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.memory import make_pool
from kda_core.memory._pools import StaticPool, UnifiedPool
from kda_core.memory._two_ended import MAX_BUFFER_BYTES

P, S = 8, 24  # KV page bytes, state slot bytes (a slot weighs 3 pages)


def _fill(pool, side, vids, seed):
    rng = np.random.default_rng(seed)
    data = {}
    for v in np.atleast_1d(vids).tolist():
        b = rng.integers(0, 256, size=pool.entry_bytes(side), dtype=np.uint8)
        pool.write(side, v, b)
        data[v] = b
    return data


def _assert_contents(pool, side, data):
    for v, b in data.items():
        np.testing.assert_array_equal(pool.read(side, v), b)


def _naive_min_moves(live_positions: set[int]) -> int:
    """Moves any compaction needs: live entries sitting at or above the live count."""
    n = len(live_positions)
    return sum(1 for p in live_positions if p >= n)


@pytest.mark.parametrize("mode", ["eager", "lazy"])
def test_layout_two_ends(mode):
    pool = UnifiedPool(240, P, S, mode=mode)
    s = pool.alloc("state", 2)
    k = pool.alloc("kv", 3)
    assert pool.physical("state", s).tolist() == [0, 1]
    assert pool.physical("kv", k).tolist() == [0, 1, 2]
    pool.write("state", int(s[1]), np.full(S, 7, np.uint8))
    pool.write("kv", int(k[0]), np.full(P, 9, np.uint8))
    # state slot 1 occupies bytes [24, 48); KV page 0 occupies the top 8 bytes
    assert (pool.buffer[24:48] == 7).all() and (pool.buffer[232:240] == 9).all()
    assert pool.state_frontier == 48 and pool.kv_frontier == 240 - 24
    assert pool.gap_bytes == 240 - 48 - 24
    st = pool.stats()
    assert st.state_used_bytes + st.kv_used_bytes + st.free_bytes == 240
    pool.check_integrity()


@pytest.mark.parametrize("mode", ["eager", "lazy"])
def test_ends_meet_rule(mode):
    pool = UnifiedPool(240, P, S, mode=mode)
    kv = pool.alloc("kv", 12)  # 96 bytes from the top: the gap is 144 = 6 slots
    assert pool.gap_bytes == 6 * S
    assert not pool.can_alloc("state", 7)
    assert pool.alloc("state", 7) is None
    assert pool.stats().ends_met == 1
    assert pool.can_alloc("state", 6)
    st = pool.alloc("state", 6)
    assert st is not None and st.size == 6
    assert pool.gap_bytes == 0
    # the ends met: the other side cannot allocate, nor can this one
    assert not pool.can_alloc("kv", 1)
    assert pool.alloc("kv", 1) is None
    assert pool.alloc("state", 1) is None
    assert pool.stats().ends_met == 3
    # freeing one slot lets the KV side take exactly 3 pages
    pool.free("state", st[:1])
    assert pool.alloc("kv", 4) is None
    assert pool.alloc("kv", 3) is not None
    assert pool.live("kv") == 15 and kv.size == 12
    pool.check_integrity()


def test_ends_meet_ladder_asks_the_peer_to_compact():
    pool = UnifiedPool(240, P, S, mode="lazy")
    kv = pool.alloc("kv", 30)  # the whole buffer
    data = _fill(pool, "kv", kv, 1)
    assert pool.gap_bytes == 0
    pool.free("kv", kv[[0, 4, 9]])  # interior pages: holes, the frontier does not move
    for v in (kv[0], kv[4], kv[9]):
        del data[int(v)]
    assert pool.holes("kv") == 3 and pool.gap_bytes == 0
    assert pool.available("state") == 0  # nothing without relief ...
    assert pool.can_alloc("state", 1)  # ... but the ladder credits the peer's holes
    assert not pool.can_alloc("state", 2)
    moves_before = pool.stats().moves
    st = pool.alloc("state", 1)
    assert st is not None
    # the peer compacted: its 3 holes left, its frontier retreated 3 pages, 3 live pages moved
    assert pool.holes("kv") == 0 and pool.watermark("kv") == 27
    assert pool.stats().moves - moves_before == 3
    _assert_contents(pool, "kv", data)
    pool.check_integrity()


def test_eager_minimal_moves():
    pool = UnifiedPool(240, P, S, mode="eager")
    vids = pool.alloc("state", 9)
    data = _fill(pool, "state", vids, 2)
    # freeing the frontier entry moves nothing
    assert pool.free("state", vids[8]) == 0
    del data[int(vids[8])]
    assert pool.watermark("state") == 8
    # freeing positions 2 and 5 with wm = 8: the band [6, 8) holds 2 live entries; they move
    before = pool.physical("state", vids[:8]).copy()
    assert pool.free("state", vids[[2, 5]]) == 2
    del data[int(vids[2])], data[int(vids[5])]
    after = pool.physical("state", vids[[0, 1, 3, 4, 6, 7]])
    assert after.tolist() == [0, 1, 3, 4, 2, 5]  # 6 -> hole 2, 7 -> hole 5, the rest stay
    assert before[[0, 1, 3, 4]].tolist() == [0, 1, 3, 4]
    assert pool.watermark("state") == 6
    # freeing one interior entry together with the frontier entry moves exactly one
    assert pool.free("state", vids[[0, 7]]) == 1  # vid 7 sat at 5 (the top), vid 0 at 0
    del data[int(vids[0])], data[int(vids[7])]
    assert pool.watermark("state") == 4
    _assert_contents(pool, "state", data)
    pool.check_integrity()


@pytest.mark.parametrize("mode", ["eager", "lazy"])
def test_compaction_moves_agree_with_naive_minimum(mode):
    rng = np.random.default_rng(3)
    for trial in range(30):
        pool = UnifiedPool(4096, 16, 16, mode=mode)
        vids = pool.alloc("kv", 200)
        data = _fill(pool, "kv", vids, trial)
        kill = rng.choice(200, size=int(rng.integers(1, 120)), replace=False)
        live_after = set(pool.physical("kv", np.delete(vids, kill)).tolist())
        moves = pool.free("kv", vids[kill])
        if mode == "lazy":
            assert moves == 0
            # the top holes were trimmed for free; flush does the minimal rest
            wm_live = set(pool.physical("kv", np.delete(vids, kill)).tolist())
            assert wm_live == live_after
            moves = pool.flush("kv")
            assert pool.holes("kv") == 0
        assert moves == _naive_min_moves(live_after)
        assert pool.watermark("kv") == 200 - kill.size
        for k in kill.tolist():
            del data[int(vids[k])]
        _assert_contents(pool, "kv", data)
        pool.check_integrity()


def test_lazy_holes_reused_lowest_first_and_capped_flush():
    pool = UnifiedPool(1024, 16, 16, mode="lazy")
    vids = pool.alloc("state", 20)
    data = _fill(pool, "state", vids, 4)
    pool.free("state", vids[[3, 7, 11, 19]])  # 19 is the top: trimmed
    for k in (3, 7, 11, 19):
        del data[int(vids[k])]
    assert pool.holes("state") == 3 and pool.watermark("state") == 19
    new = pool.alloc("state", 2)
    assert pool.physical("state", new).tolist() == [3, 7]
    assert pool.holes("state") == 1
    pool.free("state", vids[[0, 1, 2]])
    for k in (0, 1, 2):
        del data[int(vids[k])]
    data.update(_fill(pool, "state", new, 5))
    # holes at 0, 1, 2, 11; wm 19. A flush capped at 2 moves the 2 highest into the 2 lowest.
    assert pool.flush("state", max_moves=2) == 2
    assert pool.watermark("state") == 17 and pool.holes("state") == 2
    _assert_contents(pool, "state", data)
    pool.check_integrity()
    assert pool.flush("state") == 2
    assert pool.holes("state") == 0 and pool.watermark("state") == 15
    _assert_contents(pool, "state", data)
    pool.check_integrity()


def test_static_pool_split_and_no_lending():
    t = 2400
    pool = StaticPool(t, P, S, ratio=0.5)
    # state budget = T * r / (1 + r) = 800 bytes -> 33 slots; KV gets (2400 - 792) // 8 = 201
    assert pool.state_capacity == 33 and pool.kv_capacity == 201
    assert pool.alloc("state", 34) is None
    st = pool.alloc("state", 33)
    assert st is not None
    assert pool.alloc("state", 1) is None  # the KV region is empty but lends nothing
    assert pool.live("kv") == 0 and pool.gap_bytes > S
    kv = pool.alloc("kv", 201)
    assert kv is not None and pool.alloc("kv", 1) is None
    pool.free("state", st[[1, 5]])
    assert pool.holes("state") == 2
    assert pool.can_alloc("state", 2) and not pool.can_alloc("state", 3)
    assert pool.physical("state", pool.alloc("state", 2)).tolist() == [1, 5]
    pool.check_integrity()
    # a unified pool of the same bytes holds what the static split refused
    uni = UnifiedPool(t, P, S)
    assert uni.alloc("state", 60) is not None and uni.alloc("kv", 120) is not None
    with pytest.raises(ValueError, match="ratio"):
        StaticPool(t, P, S, ratio=-1.0)


def test_make_pool():
    assert isinstance(make_pool("lazy", 240, P, S), UnifiedPool)
    assert make_pool("eager", 240, P, S).mode == "eager"
    assert isinstance(make_pool("static", 240, P, S, ratio=1.0), StaticPool)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_pool("dynamic", 240, P, S)
    for kind in ("lazy", "eager", "static"):  # refused even where only "static" would use it
        with pytest.raises(ValueError, match="ratio must be a number in"):
            make_pool(kind, 240, P, S, ratio=-1.0)


def test_accounting_only_pool_at_gpu_scale():
    # 28 GiB per GPU, 64-token K3 KV pages, one K3 slot (TP8, bf16): no buffer is allocated
    pool = UnifiedPool(28 << 30, 64 * 27648, 29_039_616, store=False)
    assert pool.buffer is None
    assert pool.alloc("state", 100) is not None
    assert pool.can_alloc("kv", 10_000)
    with pytest.raises(ValueError, match="store=True"):
        pool.read("state", 0)
    assert pool.state_cost_in_kv_entries() == 17  # ceil(29,039,616 / 1,769,472)
    pool.check_integrity()


def test_bad_inputs():
    with pytest.raises(ValueError, match="total_bytes must be in"):
        UnifiedPool(MAX_BUFFER_BYTES + 1, P, S)
    with pytest.raises(ValueError, match="total_bytes // kv_entry_bytes"):
        UnifiedPool(1 << 40, 1, S, store=False)
    with pytest.raises(ValueError, match="mode must be one of"):
        UnifiedPool(240, P, S, mode="sometimes")
    pool = UnifiedPool(240, P, S)
    with pytest.raises(ValueError, match="side must be one of"):
        pool.alloc("ssm", 1)
    with pytest.raises(ValueError, match="n must be in"):
        pool.alloc("kv", -1)
    v = pool.alloc("kv", 2)
    pool.free("kv", v[:1])
    with pytest.raises(ValueError, match="not allocated"):
        pool.free("kv", v[:1])
    with pytest.raises(ValueError, match="must not repeat"):
        pool.free("kv", [int(v[1]), int(v[1])])
    with pytest.raises(ValueError, match="not allocated"):
        pool.read("kv", int(v[0]))
    with pytest.raises(ValueError, match="entry size"):
        pool.write("kv", int(v[1]), np.zeros(P + 1, np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        pool.write("kv", int(v[1]), np.zeros(2, np.float32))
    assert pool.alloc("kv", 0).size == 0
    st = pool.alloc("state", 1)
    # floats and bools are not ids: 1.7 must not be truncated to 1, True must not mean 1
    for bad in ([1.7], 1.0, [True], True, np.array([0.0]), ["1"]):
        with pytest.raises(ValueError, match="vids must be integer"):
            pool.free("state", bad)
        with pytest.raises(ValueError, match="vids must be integer"):
            pool.physical("state", bad)
    with pytest.raises(ValueError, match="1-D"):
        pool.free("state", [[int(st[0])]])
    assert pool.free("state", []) == 0
    assert pool.physical("kv", np.uint8(v[1])) == pool.physical("kv", int(v[1]))
    assert pool.free("state", np.int32(st[0])) == 0 and pool.stats().state_used_bytes == 0
    pool.check_integrity()


def test_check_integrity_catches_corruption():
    pool = UnifiedPool(240, P, S)
    v = pool.alloc("state", 2)
    _fill(pool, "state", v, 6)
    pool.check_integrity()
    pool.buffer[S + 3] ^= 1  # flip a bit of the live slot at position 1
    with pytest.raises(AssertionError, match="changed"):
        pool.check_integrity()
    pool.buffer[S + 3] ^= 1
    pool.check_integrity()
    pool._sides["state"].p2v[1] = -1  # break the tables
    with pytest.raises(AssertionError):
        pool.check_integrity(check_bytes=False)


def test_verify_off_skips_crc_but_keeps_table_checks():
    pool = UnifiedPool(240, P, S, verify=False)
    v = pool.alloc("state", 2)
    pool.write("state", int(v[0]), np.full(S, 5, np.uint8))
    np.testing.assert_array_equal(pool.read("state", int(v[0])), np.full(S, 5, np.uint8))
    pool.buffer[3] ^= 1
    pool.check_integrity()  # bytes are not tracked without verification
    pool._sides["state"].v2p[int(v[1])] = 7
    with pytest.raises(AssertionError):
        pool.check_integrity()
