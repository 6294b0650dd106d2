"""The batched serve's bookkeeping fast paths against their naive twins.

* ``_Slots.check``'s fast path (a plain int the owner table holds) against the full check
  ``_Slots._check_slot``: same slot back, same ValueError otherwise, for allocated, freed,
  out-of-range, negative, bool, numpy-integer and non-integer slots, on a plain and a shared
  table;
* ``Lifecycle.admit`` no longer binds a fresh zero state over the slot ``open`` allocated:
  the slot it leaves is the zero state ``bind(model.new_state().kda)`` would have bound;
* ``Lifecycle.report``'s step log (``StepRecord._make``) equals the records built field by
  field, and the serve's step rows (phases built without the retraction set when nothing is
  retracted) mark a request "retracted" exactly in the rows that retract it.
"""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.cache.pool import ActivePool, StateShape
from kda_core.cache.pool.slots import _Slots
from kda_core.model import TinyHybrid
from kda_core.serve.engine import Engine, Request
from kda_core.serve.pools import SharedBudget, SharedSlots
from kda_core.serve.report import StepRecord

MODEL = TinyHybrid()


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValueError as err:
        return ("ValueError", str(err))


@pytest.mark.parametrize("shared", [False, True])
def test_slot_check_fast_path_equals_the_full_check(shared):
    table = SharedSlots(6, "active", SharedBudget(6)) if shared else _Slots(6, "active")
    held = [table.take(f"r{i}") for i in range(4)]
    table.release(held[1])  # a freed slot: must be refused by both
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
    from kda_core.serve.lifecycle import Lifecycle
    from kda_core.serve.request import RequestState

    life = Lifecycle(e, 1)
    r = RequestState(0, [5, 6, 7, 8], 3, 0)
    life.admit(r, 0)
    assert r.restore_at == 0 and r.slots is not None
    S, conv = e.active.buffers(r.slots.active)
    ref = ActivePool(StateShape.of(MODEL), 1)  # the naive twin: bind the model's fresh state
    a = ref.allocate("ref")
    ref.bind(a, MODEL.new_state().kda)
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

    from kda_core.cache.pool import CheckpointPool, PoolError, checkpoint
    from kda_core.model import KDALayerState

    assert checkpoint._new_hash is xxhash.xxh3_128  # installed: the fast hash is the one used
    hasher = xxhash.xxh3_128 if algo == "xxh3_128" else hashlib.sha1
    monkeypatch.setattr(checkpoint, "_new_hash", hasher)
    shape = StateShape(layers=2, heads=2, k=4, v=3, conv_rows=3, conv_dim=24)
    rng = np.random.default_rng(11)
    active = ActivePool(shape, 1)
    a = active.allocate("r")
    layers = [KDALayerState(rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 24)))]
    active.bind(a, layers * 2)
    pool = CheckpointPool(shape, 1, int8=int8)
    c = pool.store_from_active(active, a, "tree")
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
