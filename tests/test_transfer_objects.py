"""Model-state objects: round trip, every refusal names its field, corrupt/truncated/foreign
files fail cleanly, TP sharding, the splice drift."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save as st_save

from kda_core.model import TOKENIZER_FINGERPRINT, TinyHybrid, encode
from kda_core.serve.engine import Engine
from kda_core.transfer._identity import (
    Identity,
    Layout,
    model_fingerprint,
    prefix_hash,
    prefix_hashes,
)
from kda_core.transfer.instance import Instance
from kda_core.transfer.objects import (
    _NON_TRANSFER_FIELDS,
    StateObject,
    StateObjectError,
    decode_object,
    from_model_state,
    splice,
    transferable_parts,
)
from kda_core.transfer.store import EmbeddedStore

PROMPT = "The quick brown fox jumps over the lazy dog; a state hit is not a token hit. " * 2


@pytest.fixture(scope="module")
def made():
    """An engine that served PROMPT and the object at its first checkpoint (64)."""
    inst = Instance("src")
    rep = inst.engine.generate(PROMPT, 1)
    assert 64 in rep.checkpoints
    ids = encode(PROMPT)
    obj = inst.export(ids[:64])
    assert obj is not None
    return inst, obj, ids


def test_round_trip_keeps_every_part_and_field(made):
    inst, obj, ids = made
    data = obj.to_bytes()
    back = decode_object(data, inst.identity)
    assert back.tokens == tuple(ids[:64])
    for name in ("mla_kv", "kda_state", "conv_window"):
        np.testing.assert_array_equal(getattr(back, name), getattr(obj, name))
    # the parts equal an uncached run's state at the same boundary (computed independently)
    model = TinyHybrid()
    st = model.new_state()
    model.prefill(ids[:64], st)
    np.testing.assert_allclose(back.kda_state, np.stack([s.S for s in st.kda]), atol=1e-12)
    np.testing.assert_allclose(back.conv_window, np.stack([s.conv for s in st.kda]), atol=1e-12)
    np.testing.assert_allclose(back.mla_kv, st.mla_kv, atol=1e-12)
    meta = json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]
    assert meta["token_start"] == "0" and meta["token_end"] == "64"
    assert meta["prefix_hash"] == prefix_hash(ids[:64])
    assert meta["tokenizer_fingerprint"] == TOKENIZER_FINGERPRINT
    assert json.loads(meta["layout"])["kda_heads"] == [0, 4]
    parts = json.loads(meta["parts"])
    assert {p["dtype"] for p in parts.values()} == {"float64"}
    assert parts["kda_state"]["shape"] == [6, 4, 32, 32]  # 6 KDA layers of the 8-layer model


def test_prefix_hashes_match_one_by_one():
    ids = encode("状态 state")
    hs = prefix_hashes(ids)
    assert hs == [prefix_hash(ids[:p]) for p in range(len(ids) + 1)]
    assert len(set(hs)) == len(hs)


def test_fingerprint_sees_weights_not_object_identity():
    a, b = TinyHybrid(), TinyHybrid()
    assert model_fingerprint(a) == model_fingerprint(b)
    c = TinyHybrid()
    c.lm_head[0, 0] += 1e-12  # one weight element changed, config the same
    assert model_fingerprint(c) != model_fingerprint(a)
    assert model_fingerprint(TinyHybrid(weights="random", seed=1)) != model_fingerprint(a)


@pytest.mark.parametrize(
    "identity_kw, field",
    [
        ({"model": TinyHybrid(weights="random", seed=1)}, "model_fingerprint"),
        ({"tokenizer_fingerprint": "utf8-bytes-v2"}, "tokenizer_fingerprint"),
        ({"layout": Layout(2, 0)}, "layout"),
        ({"layout": Layout(2, 1)}, "layout"),
    ],
)
def test_mismatch_is_refused_naming_the_field(made, identity_kw, field):
    _, obj, _ = made
    model = identity_kw.pop("model", TinyHybrid())
    ident = Identity.of(model, **identity_kw)
    with pytest.raises(StateObjectError) as e:
        decode_object(obj.to_bytes(), ident)
    assert e.value.field == field
    assert field.split("_")[0] in str(e.value)


def test_other_dtype_is_refused(made):
    inst, obj, _ = made
    f32 = StateObject(
        obj.tokens,
        obj.mla_kv.astype(np.float32),
        obj.kda_state.astype(np.float32),
        obj.conv_window.astype(np.float32),
        obj.model_fingerprint,
        obj.tokenizer_fingerprint,
        obj.layout,
        obj.source,
    )
    with pytest.raises(StateObjectError) as e:
        decode_object(f32.to_bytes(), inst.identity)
    assert e.value.field == "dtype"


def test_truncated_at_any_point_is_refused(made):
    inst, obj, _ = made
    data = obj.to_bytes()
    n_header = struct.unpack("<Q", data[:8])[0]
    cuts = [0, 3, 8, 9, 8 + n_header // 2, 8 + n_header, 8 + n_header + 1, len(data) // 2]
    cuts += [len(data) - 1]
    for cut in cuts:
        with pytest.raises(StateObjectError) as e:
            decode_object(data[:cut], inst.identity)
        assert e.value.field in ("truncated", "format"), (cut, e.value)


def test_corrupt_part_bytes_are_refused(made):
    inst, obj, _ = made
    data = bytearray(obj.to_bytes())
    n_header = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n_header])
    for name in ("mla_kv", "kda_state", "conv_window", "tokens"):
        lo, hi = header[name]["data_offsets"]
        bad = bytearray(data)
        bad[8 + n_header + (lo + hi) // 2] ^= 0x40
        with pytest.raises(StateObjectError) as e:
            decode_object(bytes(bad), inst.identity)
        assert e.value.field == ("prefix_hash" if name == "tokens" else "corrupt"), name


def test_foreign_files_are_refused(made):
    inst, _, _ = made
    plain = st_save({"x": np.zeros(3)})  # a valid safetensors file, not a state object
    other = st_save({"x": np.zeros(3)}, metadata={"format": "something-else"})
    for blob in (plain, other, b"not a safetensors file at all", b"", "text"):
        with pytest.raises(StateObjectError) as e:
            decode_object(blob, inst.identity)
        assert e.value.field in ("format", "truncated")


def test_refused_object_leaves_the_instance_serving(made):
    _, obj, ids = made
    store = EmbeddedStore()
    data = bytearray(obj.to_bytes())
    data[-10] ^= 0xFF  # corrupt the last part
    store.put(obj.key, bytes(data))
    dec = Instance("dec", store=store)
    rep, lk = dec.serve(ids[:80], 4)
    assert [r.field for r in lk.refusals] == ["corrupt"]
    assert lk.source == "none" and rep.restore_at == 0
    ref_tokens, ref_logits = TinyHybrid().generate(ids[:80], 4)
    assert rep.tokens == ref_tokens
    np.testing.assert_allclose(rep.logits, ref_logits, atol=1e-9)
    dec.engine.check_integrity()


def test_transferable_parts_drop_device_only_fields():
    f = {"mla_kv": np.zeros(1), "kda_state": np.zeros(1), "conv_window": np.zeros(1)}
    extra = {name: np.ones(2) for name in _NON_TRANSFER_FIELDS}
    assert set(transferable_parts({**f, **extra})) == set(f)
    with pytest.raises(ValueError, match="unknown"):
        transferable_parts({**f, "ssm_cache_bogus": np.zeros(1)})
    with pytest.raises(ValueError, match="missing"):
        transferable_parts({"mla_kv": np.zeros(1)})
    # SGLang's upstream pair plus the K3 branch's six ReplaySSM ring fields (seed 004)
    assert {"intermediate_ssm", "intermediate_conv_window"} <= _NON_TRANSFER_FIELDS
    assert {
        f"replayssm_{x}" for x in ("d", "k", "g", "rawv", "rawk", "beta")
    } <= _NON_TRANSFER_FIELDS


def shard(obj: StateObject, layout: Layout) -> StateObject:
    """The rank-local object of a full (tp_size=1) one: KDA heads [lo, hi) of the state and the
    matching q|k|v channels of the conv window; the MLA latent KV is replicated (how a TP rank
    would cut what a single-rank engine published)."""
    assert obj.layout.get("tp_size") == 1
    H = int(obj.layout["kda_heads_total"])
    lo, hi = layout.heads(H)
    K = obj.kda_state.shape[2]
    HK = H * K
    cols = np.concatenate([np.arange(i * HK + lo * K, i * HK + hi * K) for i in range(3)])
    return StateObject(
        obj.tokens,
        obj.mla_kv,
        np.ascontiguousarray(obj.kda_state[:, lo:hi]),
        np.ascontiguousarray(obj.conv_window[:, :, cols]),
        obj.model_fingerprint,
        obj.tokenizer_fingerprint,
        layout.describe(H),
        obj.source,
    )


def test_shard_splits_heads_and_conv_channels(made):
    inst, obj, _ = made
    H, K = 4, 32
    ranks = [shard(obj, Layout(2, r)) for r in range(2)]
    np.testing.assert_array_equal(
        np.concatenate([r.kda_state for r in ranks], axis=1), obj.kda_state
    )
    for r, o in enumerate(ranks):
        # naive twin: conv channels of q|k|v for heads [2r, 2r+2), one head at a time
        want = [
            obj.conv_window[:, :, i * H * K + h * K : i * H * K + (h + 1) * K]
            for i in range(3)
            for h in range(2 * r, 2 * r + 2)
        ]
        np.testing.assert_array_equal(o.conv_window, np.concatenate(want, axis=2))
        np.testing.assert_array_equal(o.mla_kv, obj.mla_kv)  # replicated
        ident = Identity.of(TinyHybrid(), Layout(2, r))
        back = decode_object(o.to_bytes(), ident)
        assert back.layout["kda_heads"] == [2 * r, 2 * r + 2]
        with pytest.raises(StateObjectError, match="layout"):
            decode_object(o.to_bytes(), inst.identity)


def test_splice_is_refused_and_drifts_when_forced():
    ids_a = encode("alpha: the cache holds MLA KV for every token of this prefix")
    ids_b = encode("omega: the cache holds KDA state at the end of another one!!")
    assert len(ids_a) == len(ids_b)
    n = len(ids_a)
    model = TinyHybrid()
    ident = Identity.of(model)
    objs = {}
    for name, ids in (("A", ids_a), ("B", ids_b)):
        st = model.new_state()
        model.prefill(ids, st)
        objs[name] = from_model_state(st, ident, name)
    sp = splice(objs["A"], objs["B"])
    with pytest.raises(StateObjectError) as e:
        decode_object(sp.to_bytes(), ident)
    assert e.value.field == "boundary" and "splice" in str(e.value)
    forced = decode_object(sp.to_bytes(), ident, allow_splice=True)
    assert forced.spliced and forced.tokens == tuple(ids_a)
    assert not decode_object(objs["A"].to_bytes(), ident).spliced
    cont = ids_a + encode(" next")
    ref_tokens, ref_logits = model.generate(cont, 4)
    drift = {}
    for label, o in (("clean", objs["A"]), ("splice", forced)):
        eng = Engine()
        assert eng.adopt_checkpoint(list(o.tokens), o.mla_kv, o.kda_state, o.conv_window)
        rep = eng.generate(cont, 4)
        assert rep.restore_at == n
        drift[label] = float(np.max(np.abs(rep.logits - ref_logits)))
    assert drift["clean"] <= 1e-9
    assert drift["splice"] > 1e-3  # KDA state of another prefix: the logits move visibly
    with pytest.raises(ValueError, match="same length"):
        splice(objs["A"], from_model_state(model.new_state(), ident))
