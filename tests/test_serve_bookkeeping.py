"""The batched serve's bookkeeping fast paths against their naive twins.

* ``SlotTable.check``'s fast path (a plain int the owner table holds) against the full check
  ``SlotTable._check_slot``: same slot back, same ValueError otherwise, for allocated, freed,
  out-of-range, negative, bool, numpy-integer and non-integer slots, on a plain and a shared
  table;
* ``Lifecycle.admit`` binds no fresh zero state over the slot ``open`` allocated: the slot it
  leaves is the zero state ``bind(model.new_state().kda)`` would bind;
* ``RequestState.report``'s text (bytes of the model's own tokens) equals ``tokenizer.decode``;
* ``RequestState.report``'s step log (``StepRecord._make``) equals the records built field by
  field, and the serve's step rows (phases built without the retraction set when nothing is
  retracted) mark a request "retracted" exactly in the rows that retract it.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.model import TinyHybrid, decode
from kda_core.serve._slots import ActivePool, SlotBudget, SlotTable, StateShape
from kda_core.serve.engine import Engine, Request
from kda_core.serve.report import StepRecord
from tests.pool_helpers import bind

MODEL = TinyHybrid()


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValueError as err:
        return ("ValueError", str(err))


@pytest.mark.parametrize("shared", [False, True])
def test_slot_check_fast_path_equals_the_full_check(shared):
    table = SlotTable(6, "active", SlotBudget(6) if shared else None)
    held = [table.take(f"r{i}") for i in range(4)]
    table.free(held[1])  # a freed slot: must be refused by both
    probes = [*range(-2, 8), True, False, np.int64(0), np.int32(2), np.int64(1), 2.0, "0", None]
    checked = 0
    for slot in probes:
        fast = _outcome(table.check, slot, "c_slot")
        full = _outcome(table._check_slot, slot, "c_slot")
        assert fast == full, slot
        if fast[0] == "ok":
            assert type(fast[1]) is int
            checked += 1
    # allocated: 0, 2, 3 as int and np.int64(0) / np.int32(2); everything else refused
    assert checked == 5
    with pytest.raises(ValueError, match="c_slot 1 of the active pool is not allocated"):
        table.check(1, "c_slot")
    with pytest.raises(ValueError, match=r"slot must be in \[0, 5\], got 6"):
        table.check(6)


def test_admitted_slot_holds_the_zero_state_bind_would_have_bound():
    e = Engine(model=MODEL, state_slots=20)
    from kda_core.serve._lifecycle import Lifecycle
    from kda_core.serve._state import RequestState

    life = Lifecycle(e.loop.parts)
    r = RequestState(0, [5, 6, 7, 8], 3, 0)
    life.admit(r, life.match(r))
    assert r.restore_at == 0 and r.slots is not None
    S, conv = e.pools.active.buffers(r.slots.active)
    ref = ActivePool(StateShape.of(MODEL), 1)  # the naive twin: bind the model's fresh state
    a = ref.allocate("ref")
    bind(ref, a, MODEL.new_state().kda)
    S_ref, conv_ref = ref.buffers(a)
    assert S.shape == S_ref.shape and conv.shape == conv_ref.shape
    np.testing.assert_array_equal(S, S_ref)
    np.testing.assert_array_equal(conv, conv_ref)
    assert not S.any() and not conv.any()  # zeros, and not by comparing two empty arrays
    life.release(r)


def test_reports_and_step_rows_equal_their_naive_builds():
    rng = np.random.default_rng(7)
    prompts = [[int(t) for t in rng.integers(0, 256, n)] for n in (5, 9, 17, 3)]
    # kv_tokens tight enough that decode retracts: rows with and without retractions
    e = Engine(model=MODEL, state_slots=40, chunk_size=8)
    out = e.serve([Request(p, 12) for p in prompts], max_batch_tokens=16, kv_tokens=40)
    assert out.retractions > 0
    nan = float("nan")
    for rep in out.reports:
        assert rep is not None
        assert rep.text == decode(rep.tokens)  # the tokenizer's own decode: the naive twin
        for rec in rep.step_log:
            naive = StepRecord(rec.pos, rec.n, rec.token, rec.phase, nan, nan)
            assert type(rec) is StepRecord and rec[:4] == naive[:4]
            assert all(np.isnan(rec[i]) and np.isnan(naive[i]) for i in (4, 5, 6))
    # phases: a request is "retracted" exactly in the rows that list it as retracted
    for row in out.steps:
        assert len(row.phases) == len(prompts)
        for i, ph in enumerate(row.phases):
            assert (ph == "retracted") == (i in row.retracted), (row.step, i)
    saw = {ph for row in out.steps for ph in row.phases}
    assert {"retracted", "decode", "finished"} <= saw


@pytest.mark.parametrize("algo", ["xxh3_128", "sha1"])
@pytest.mark.parametrize("int8", [False, True])
def test_checkpoint_digest_either_hash_catches_one_bit_changes(algo, int8, monkeypatch):
    """The digest's hash (XXH3-128, the declared dependency; SHA-1 where it is missing):
    either one catches a one-bit change of any stored array's first, middle or last byte,
    and agrees again once the bit is restored."""
    import hashlib

    import xxhash

    from kda_core.model import KDALayerState
    from kda_core.serve import _checkpoints as checkpoint
    from kda_core.serve._checkpoints import CheckpointPool
    from kda_core.serve._slots import PoolError

    assert checkpoint._new_hash is xxhash.xxh3_128  # installed: the fast hash is the one used
    hasher = xxhash.xxh3_128 if algo == "xxh3_128" else hashlib.sha1
    monkeypatch.setattr(checkpoint, "_new_hash", hasher)
    shape = StateShape(s=(2, 2, 4, 3), conv=(2, 3, 24))
    rng = np.random.default_rng(11)
    active = ActivePool(shape, 1)
    a = active.allocate("r")
    layers = [KDALayerState(rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 24)))]
    bind(active, a, layers * 2)
    pool = CheckpointPool(shape, 1, int8=int8)
    c = pool.store(*active.buffers(a), "tree")
    digest = pool._data[c].digest
    assert len(digest) == (32 if algo == "xxh3_128" else 40)  # 128 / 160 bits in hex
    pool.check_integrity()
    for arr in pool.raw(c):
        arr.flags.writeable = True  # force writes: the digest must notice each one
        raw = arr.reshape(-1).view(np.uint8)
        for pos in (0, raw.size // 2, raw.size - 1):
            raw[pos] ^= 0x80  # the top bit of one byte (of a float64's last byte: its sign)
            with pytest.raises(PoolError, match="changed while shared"):
                pool.check_integrity()
            raw[pos] ^= 0x80
            pool.check_integrity()
        arr.flags.writeable = False


@pytest.mark.parametrize("strategy", ["extra_buffer", "extra_buffer_lazy"])
def test_unfilled_track_slots_and_donated_slots_read_as_allocates_zeros(strategy):
    """Track slots (``allocate(shared=True)``) and a slot whose buffers were donated are bound to
    the pool's shared read-only ``zero_state``: they read as the zeros ``allocate`` binds (the
    naive twin), cannot be written in place, and a track write still binds its own copy."""
    import copy

    from kda_core.serve._checkpoints import CheckpointPool
    from kda_core.serve._pools import PingPong

    shape = StateShape(s=(2, 2, 4, 3), conv=(2, 3, 24))
    pool = ActivePool(shape, 4)
    pp = PingPong(pool, strategy)
    req = pp.open("r")
    fresh = pool.allocate("naive")  # allocate's zeros: the twin
    S0, conv0 = pool.buffers(fresh)
    rng = np.random.default_rng(5)
    pool.rebind(req.active, rng.standard_normal(shape.s), rng.standard_normal(shape.conv))
    assert req.track  # both strategies open at least one track slot
    for t in req.track:
        S, conv = pool.buffers(t)
        np.testing.assert_array_equal(S, S0)
        np.testing.assert_array_equal(conv, conv0)
        assert not S.flags.writeable and not conv.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            S[0, 0, 0, 0] = 1.0
    t = pp.track(req, 7)
    assert t is not None
    S_t, conv_t = pool.buffers(t)
    np.testing.assert_array_equal(S_t, pool.buffers(req.active)[0])
    assert S_t.flags.writeable and not np.shares_memory(S_t, pool.zero_state[0])
    ck = CheckpointPool(shape, 2)
    c = ck.donate(pool, t, "tree")
    assert ck.raw(c)[0] is S_t  # zero-copy: the very buffer
    S_d, conv_d = pool.buffers(t)
    np.testing.assert_array_equal(S_d, S0)
    np.testing.assert_array_equal(conv_d, conv0)
    assert not np.shares_memory(S_d, ck.raw(c)[0])
    assert not S0.any() and not conv0.any()  # the twin really is zeros
    np.testing.assert_array_equal(ck.raw(c)[0], S_t)
    twin = copy.deepcopy(pool)  # a fork's zero state is read-only and shared again
    assert all(not a.flags.writeable for a in twin.zero_state)
    assert twin.buffers(t)[0] is twin.zero_state[0]
    pool.check_integrity()
    ck.check_integrity()
    twin.check_integrity()


@pytest.mark.parametrize("int8", [False, True])
def test_checkpoint_used_bytes_counter_equals_the_sum_over_slots(int8):
    """``CheckpointPool.used_bytes`` (a counter kept by store / donate / free) against the sum
    over the stored checkpoints, through a serve that stores, shares (restores) and frees
    copies the tree had already, and directly: the counter follows every put and free, and a
    corrupted counter is caught."""
    from kda_core.serve._slots import PoolError

    rng = np.random.default_rng(9)
    base = [int(t) for t in rng.integers(0, 256, 16)]
    prompts = [base + [int(t) for t in rng.integers(0, 256, n)] for n in (4, 9, 1, 14)]
    e = Engine(model=MODEL, state_slots=10, int8_checkpoints=int8)
    out = e.serve([Request(p, 20) for p in prompts], max_batch_tokens=64)
    assert sum(r.checkpoints_existed for r in out.reports) > 0  # freed through insert
    assert e.stats().state_hits > 0
    ck = e.pools.checkpoints
    assert ck.n_used > 0
    assert ck.used_bytes == ck._used_bytes_naive() == ck.n_used * ck.slot_bytes
    # the lifecycle's insert hands the tree (position, slot) pairs and one state_bytes: every
    # state the tree holds is still counted at the pool's slot size
    assert e.cache.n_states == ck.n_used
    assert e.cache.state_bytes == e.cache.n_states * ck.slot_bytes
    ck.check_integrity()
    e.cache.check_integrity()
    slots = list(ck.owned())
    ck.free(slots[0])
    assert ck.used_bytes == ck._used_bytes_naive() == (len(slots) - 1) * ck.slot_bytes
    ck.used_bytes += 1  # a counter out of step with the slots: integrity must say so
    with pytest.raises(PoolError, match="used bytes"):
        ck.check_integrity()
    ck.used_bytes -= 1
    ck.check_integrity()


def test_report_text_equals_the_tokenizers_decode_on_any_bytes():
    """The report's text on outputs with multi-byte, cut and invalid UTF-8 (a served TinyHybrid
    mostly writes ASCII): byte for byte what ``tokenizer.decode`` makes of the same ids."""
    from kda_core.model import VOCAB
    from kda_core.serve._state import RequestState

    rng = np.random.default_rng(13)
    cases = [list("中文 ok".encode()), list("中文".encode())[:-1], [0xFF, 0x41, 0xC3], []]
    cases += [[int(t) for t in rng.integers(0, VOCAB, 40)] for _ in range(20)]
    for gen in cases:
        r = RequestState(0, [1, 2], max(len(gen), 1), 0)
        r.gen = list(gen)
        r.logit_rows = [np.zeros(VOCAB)] * len(gen)
        assert r.report(0, Engine(model=MODEL).pools.stats()).text == decode(gen), gen
    assert decode(cases[1]).endswith("\ufffd")  # the cut character: the case means something
